"""``kthena-py status``'s pure parts: the tree each case builds, and its text and JSON, against golden files.

Golden files are ``golden/status/<case>.txt`` (plain text) and ``<case>.json``; ``KTHENA_PY_UPDATE_GOLDEN=1``
rewrites them (review the diff). Ages are relative to the fixed ``NOW`` the fixtures are built at.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from kthena_py.plan.modelserving.view import (
    PodView,
    StatusView,
    build_view,
    format_age,
    queue_position,
    render_json,
    render_text,
    scheduling_kind,
)
from kthena_py.vocab.conditions import (
    COORDINATION_BLOCKED,
    REASON_INSUFFICIENT_GPU,
    REASON_INSUFFICIENT_RESOURCES,
    REASON_NOT_BLOCKED,
    REASON_NOT_ENQUEUED,
    REASON_QUEUE_FULL,
    REASON_SCHEDULING,
    REASON_SKEW,
    REASON_UNSCHEDULABLE,
    SCHEDULED,
)

from .statuscases import CASES
from .statusview import NOW, World, condition, pd_doc, revision_of, running, unscheduled, waiting

GOLDEN = Path(__file__).parent / "golden" / "status"
UPDATE_ENV = "KTHENA_PY_UPDATE_GOLDEN"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def view_of(world: World, now: float = NOW) -> StatusView:
    return build_view(
        world.doc,
        world.pods,
        now=now,
        services=world.services,
        podgroups=world.podgroups,
        revisions=world.revisions,
        tracker=world.tracker,
    )


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs; review the diff"


@pytest.mark.parametrize("case", sorted(CASES))
def test_text_matches_golden(case: str) -> None:
    assert_golden(f"{case}.txt", render_text(view_of(CASES[case]())))


@pytest.mark.parametrize("case", ["gpu-wait", "pd-mid-rollout", "eviction-exhausted"])
def test_json_matches_golden(case: str) -> None:
    text = render_json(view_of(CASES[case]()))
    json.loads(text)
    assert_golden(f"{case}.json", text)


def _pods(view: StatusView) -> dict[str, PodView]:
    return {pod.name: pod for group in view.groups for inst in group.instances for pod in inst.pods}


@pytest.mark.parametrize(
    ("case", "kind", "text", "position"),
    [
        ("gpu-wait", "gpu", "waiting for GPUs: nvidia.com/gpu 16 per pod, queue position 2", 2),
        ("cpu-wait", "resources", "waiting for resources: cpu 96 per pod", None),
        ("queue-full", "queue", "waiting in queue team-a (full), position 1", 1),
    ],
)
def test_every_pod_of_a_waiting_gang_says_what_it_waits_for(
    case: str, kind: str, text: str, position: int | None
) -> None:
    view = view_of(CASES[case]())
    whys = [pod.why for group in view.groups for inst in group.instances for pod in inst.pods]
    assert len(whys) == 3
    for why in whys:
        assert why is not None
        assert (why.kind, why.text, why.queue_position) == (kind, text, position)


def test_mid_rollout_shows_revisions_partition_and_the_outdated_group() -> None:
    view = view_of(CASES["pd-mid-rollout"]())
    assert (view.ready, view.updated, view.desired, view.partition) == (2, 1, 3, 1)
    states = {g.name: (g.ready, g.revision_state, [n.kind for n in g.notes]) for g in view.groups}
    assert states == {
        "llama-0": (True, "current", ["rollout"]),
        "llama-1": (True, "current", ["rollout"]),
        "llama-2": (False, "updated", []),
    }
    assert "partition 1" in view.groups[0].notes[0].text
    assert "waiting for its turn" in view.groups[1].notes[0].text
    pods = view_of(CASES["pd-mid-rollout"]()).groups[2].instances
    starting = [pod for inst in pods for pod in inst.pods if pod.why is not None]
    assert [(p.name, p.why.kind if p.why else "") for p in starting] == [("llama-2-decode-0-1", "starting")]
    assert {g.name: g.roles for g in view.groups}["llama-2"] == (("prefill", 1, 1), ("decode", 0, 1))


def test_image_pull_crash_loop_and_eviction_are_named_on_their_pod() -> None:
    image = _pods(view_of(CASES["image-pull"]()))["llama-0-decode-0-1"]
    assert image.why is not None and image.why.kind == "image"
    crash = view_of(CASES["crash-loop"]())
    pod = crash.groups[0].instances[0].pods[0]
    assert pod.restarts == 7 and pod.why is not None
    assert (pod.why.kind, pod.why.text) == ("crash", "crash loop: last exit Error (exit code 1)")
    evicted = view_of(CASES["eviction-exhausted"]())
    group = evicted.groups[1]
    assert [n.kind for n in group.notes] == ["eviction"]
    assert "counts as disrupted for 4m more" in group.notes[0].text
    assert not group.ready and evicted.groups[0].ready
    pod = group.instances[1].pods[0]
    assert pod.terminating and pod.why is not None and pod.why.kind == "eviction"


def test_an_expired_eviction_record_is_not_shown() -> None:
    world = CASES["eviction-exhausted"]()
    view = view_of(world, now=NOW + 300)
    assert [n.kind for n in view.groups[1].notes] == []
    assert [n.kind for n in view.notes] == []
    assert view.groups[1].instances[1].pods[0].why is not None
    assert view.groups[1].instances[1].pods[0].why.kind == "terminating"


def test_a_wanted_group_without_pods_is_missing() -> None:
    doc = pd_doc(replicas=2)
    world = World(doc)
    world.group(0, doc)
    world.set_status(replicas=1, availableReplicas=1, currentRevision=revision_of(doc), updateRevision=revision_of(doc))
    view = view_of(world)
    assert [(g.name, g.missing) for g in view.groups] == [("llama-0", False), ("llama-1", True)]
    assert [i.name for i in view.groups[1].instances] == ["prefill-0", "decode-0"]
    assert all(i.missing and i.expected_pods in (1, 2) for i in view.groups[1].instances)
    text = render_text(view, ages=False)
    assert "└─ llama-1  missing" in text


def test_a_pod_the_controller_would_not_name_is_left_out() -> None:
    world = CASES["healthy"]()
    stray = copy.deepcopy(world.pods[0])
    stray["metadata"]["name"] = "llama-0-prefill-0-0-copy"
    world.pods.append(stray)
    assert "llama-0-prefill-0-0-copy" not in _pods(view_of(world))


def test_a_spec_the_controller_has_not_observed_is_noted() -> None:
    world = CASES["healthy"]()
    world.doc["metadata"]["generation"] = 2
    view = view_of(world)
    assert [n.kind for n in view.notes] == ["rollout"]
    assert "not observed this spec yet (generation 2, observed 1)" in view.notes[0].text


def test_the_builder_is_pure() -> None:
    world = CASES["gpu-wait"]()
    before = copy.deepcopy(world)
    first = view_of(world)
    assert world == before
    assert view_of(world) == first
    assert view_of(world, now=NOW + 60) != first


def test_colour_only_wraps_words_and_plain_has_no_escapes() -> None:
    view = view_of(CASES["crash-loop"]())
    plain = render_text(view)
    coloured = render_text(view, colour=True)
    assert "\x1b" not in plain
    assert "\x1b[31m" in coloured  # the crash loop is red
    assert ANSI.sub("", coloured) == plain


def test_without_ages_no_age_is_rendered() -> None:
    text = render_text(view_of(CASES["pd-mid-rollout"]()), ages=False)
    assert not re.search(r"\b\d+[smhd]\b", text)
    assert "(90s)" not in text and "age " not in text
    aged = render_text(view_of(CASES["pd-mid-rollout"]()))
    assert "(90s)" in aged and ", age 120m" in aged


def test_a_bad_spec_is_a_value_error() -> None:
    world = CASES["healthy"]()
    world.doc["spec"]["template"]["roles"] = []
    with pytest.raises(ValueError):
        view_of(world)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0, "0s"), (119, "119s"), (125, "2m5s"), (600, "10m"), (3 * 3600 + 60, "3h1m"), (50 * 3600, "2d2h")],
)
def test_format_age(seconds: float | None, text: str) -> None:
    assert format_age(seconds) == text


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        (REASON_INSUFFICIENT_GPU, "gpu"),
        (REASON_INSUFFICIENT_RESOURCES, "resources"),
        (REASON_QUEUE_FULL, "queue"),
        (REASON_NOT_ENQUEUED, "queue"),
        (REASON_UNSCHEDULABLE, "unschedulable"),
        (REASON_SCHEDULING, "scheduling"),
        ("SomethingNew", "scheduling"),
    ],
)
def test_scheduling_kind(reason: str, kind: str) -> None:
    assert scheduling_kind(reason) == kind


@pytest.mark.parametrize(
    ("message", "position"),
    [
        ("queue default position 2 of 3, priority 1000", 2),
        ("position 1", 1),
        ("waiting for nvidia.com/gpu: 16 per pod", None),
        ("repositioned 4", None),
    ],
)
def test_queue_position(message: str, position: int | None) -> None:
    assert queue_position(message) == position


@pytest.mark.parametrize("case", ["pd-mid-rollout", "gpu-wait"])
def test_the_user_guide_shows_the_output_as_it_is(case: str) -> None:
    guide = (Path(__file__).resolve().parents[4] / "docs" / "modelserving.md").read_text(encoding="utf-8")
    assert f"```\n{render_text(view_of(CASES[case]()))}```\n" in guide


def _one_pod_world(pod_status: dict[str, Any], scheduled: dict[str, Any] | None, **doc: Any) -> World:
    spec = pd_doc(**doc)
    spec["spec"]["template"]["roles"] = spec["spec"]["template"]["roles"][:1]  # prefill only: one pod
    world = World(spec)
    world.group(0, spec, {"llama-0-prefill-0-0": pod_status}, ago=60)
    rev = revision_of(spec)
    world.set_status(currentRevision=rev, updateRevision=rev, conditions=[scheduled] if scheduled else [])
    return world


TAINT = "0/3 nodes are available: 3 node(s) had untolerated taint {gpu: true}."


@pytest.mark.parametrize(
    ("pod_status", "scheduled", "doc", "kind", "text"),
    [
        (unscheduled(TAINT), None, {}, "unschedulable", "unschedulable"),
        (unscheduled(None), None, {}, "scheduling", "waiting for the scheduler"),
        (
            unscheduled("0/3 nodes are available: 3 Insufficient memory."),
            None,
            {"requests": {"memory": "512Gi"}},
            "resources",
            "waiting for resources: memory 512Gi per pod",
        ),
        (
            unscheduled("0/3 nodes are available: 3 Insufficient amd.com/gpu."),
            None,
            {"requests": {"amd.com/gpu": "4"}},
            "gpu",
            "waiting for GPUs: amd.com/gpu 4 per pod",
        ),
        (
            unscheduled(None),
            condition(SCHEDULED, "False", REASON_NOT_ENQUEUED, "queue closed; position 3"),
            {"queue": "batch"},
            "queue",
            "waiting in queue batch (not enqueued), position 3",
        ),
        (
            unscheduled("pod group is not ready, 1 Pending, 1 minAvailable"),
            condition(SCHEDULED, "False", REASON_INSUFFICIENT_GPU, "waiting for nvidia.com/gpu: 8 per pod"),
            {},
            "gpu",
            "waiting for GPUs",
        ),
        (
            unscheduled(TAINT),
            condition(SCHEDULED, "False", REASON_UNSCHEDULABLE, "taints"),
            {},
            "unschedulable",
            "unschedulable",
        ),
        (
            {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."},
            None,
            {},
            "failed",
            "Failed: Evicted The node was low on resource: memory.",
        ),
        (waiting("CreateContainerConfigError", 'secret "hf-token" not found'), None, {}, "container", ""),
        (running(ready=False), None, {}, "not-ready", "not ready"),
        (running(), None, {}, "", ""),
    ],
)
def test_the_reason_of_one_pod(
    pod_status: dict[str, Any], scheduled: dict[str, Any] | None, doc: dict[str, Any], kind: str, text: str
) -> None:
    view = view_of(_one_pod_world(pod_status, scheduled, **doc))
    (pod,) = _pods(view).values()
    if not kind:
        assert pod.why is None
        return
    assert pod.why is not None and pod.why.kind == kind
    assert pod.why.text == (text or "CreateContainerConfigError")


def test_a_blocked_coordinated_rollout_is_shown_and_a_clear_one_is_not() -> None:
    world = CASES["healthy"]()
    world.doc["status"]["conditions"].append(
        condition(COORDINATION_BLOCKED, "True", REASON_SKEW, "decode may not lead prefill by more than 1")
    )
    text = render_text(view_of(world), ages=False)
    assert "  CoordinatedRoleRolloutBlocked=True SkewLimit: decode may not lead prefill by more than 1\n" in text
    world.doc["status"]["conditions"][-1] = condition(COORDINATION_BLOCKED, "False", REASON_NOT_BLOCKED)
    assert "CoordinatedRoleRolloutBlocked" not in render_text(view_of(world), ages=False)


def test_under_role_rolling_update_the_outdated_instance_carries_the_note() -> None:
    old = pd_doc()
    new = pd_doc(image="vllm:0.10")
    for doc in (old, new):
        doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    world = World(new)
    old_rev = world.record(old)
    world.group(0, old)
    world.set_status(currentRevision=old_rev, updateRevision=revision_of(new), replicas=1, availableReplicas=1)
    view = view_of(world)
    notes = {inst.name: [n.text for n in inst.notes] for inst in view.groups[0].instances}
    assert notes == {
        "prefill-0": ["outdated: waiting for its turn in the rollout"],
        "decode-0": ["outdated: waiting for its turn in the rollout"],
    }
    assert view.groups[0].notes == ()
    assert {pod.revision_state for pod in _pods(view).values()} == {"current"}
