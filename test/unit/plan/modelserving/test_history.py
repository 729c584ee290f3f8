"""Rollout history, undo and progress, planned purely from ControllerRevisions and status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kthena_py.api.modelserving import ModelServing
from kthena_py.kube.memory.patches import merge_patch
from kthena_py.plan.modelserving.core.revision import build_controller_revision, revision_data, revision_hash
from kthena_py.plan.modelserving.rollout.history import (
    HistoryError,
    describe_changes,
    history,
    spec_revision,
    undo_patch,
    undo_target,
)
from kthena_py.plan.modelserving.rollout.progress import rollout_progress

from .builders import MS_UID, ms_doc, parse, ref_of, role_doc


def _doc(image: str = "img:1", workers: int = 1, decode: int = 2) -> dict[str, Any]:
    return ms_doc(role_doc("prefill", image=image), role_doc("decode", replicas=decode, workers=workers, image=image))


def _revisions(*docs: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for doc in docs:
        ms = parse(doc)
        data = revision_data(ms.spec)
        out.append(build_controller_revision(ref_of(ms), data, revision_hash(data), out))
    return out


def _with_status(doc: dict[str, Any], current: str, update: str) -> ModelServing:
    doc = copy.deepcopy(doc)
    doc["status"] = {"currentRevision": current, "updateRevision": update}
    return parse(doc)


def test_history_orders_by_number_and_says_what_changed() -> None:
    v1, v2, v3 = _doc("img:1"), _doc("img:2"), _doc("img:2", workers=2)
    revisions = _revisions(v1, v2, v3)
    hashes = [r["metadata"]["labels"]["modelserving.volcano.sh/revision"] for r in revisions]
    ms = _with_status(v3, hashes[1], hashes[2])
    pods = [
        {"metadata": {"labels": {"modelserving.volcano.sh/revision": hashes[1]}}},
        {"metadata": {"labels": {"modelserving.volcano.sh/revision": hashes[1]}, "deletionTimestamp": "x"}},
        {"metadata": {"labels": {"modelserving.volcano.sh/revision": hashes[2]}}},
    ]
    entries = history(ms, list(reversed(revisions)), pods)
    assert [(e.number, e.hash, e.current, e.update, e.pods) for e in entries] == [
        (1, hashes[0], False, False, 0),
        (2, hashes[1], True, False, 1),
        (3, hashes[2], False, True, 1),
    ]
    assert entries[0].images == "prefill=img:1 decode=img:1"
    assert entries[0].changes == ()
    assert entries[1].changes == ("prefill: image img:1 -> img:2", "decode: image img:1 -> img:2")
    assert entries[2].changes == ("decode: workerReplicas 1 -> 2",)


def test_history_skips_revisions_of_other_owners_and_lists_unreadable_ones() -> None:
    revisions = _revisions(_doc("img:1"))
    other = copy.deepcopy(revisions[0])
    other["metadata"]["name"] = "llama-other"
    other["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    broken = copy.deepcopy(revisions[0])
    broken["metadata"]["name"] = "llama-broken"
    broken["data"] = {"data": "nonsense"}
    broken["revision"] = 5
    entries = history(parse(_doc()), [*revisions, other, broken])
    assert sorted(e.name for e in entries) == sorted(["llama-broken", revisions[0]["metadata"]["name"]])
    unreadable = next(e for e in entries if e.name == "llama-broken")
    assert unreadable.data is None and unreadable.images == "(unreadable)"
    with pytest.raises(HistoryError, match="cannot be read"):
        undo_target(parse(_doc()), entries, unreadable.number)


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        (_doc(), _doc(), ()),
        (_doc(decode=2), _doc(decode=5), ()),  # replicas are not part of a revision
        (
            ms_doc(role_doc("prefill")),
            ms_doc(role_doc("prefill"), role_doc("decode")),
            ("role decode added",),
        ),
        (
            ms_doc(role_doc("prefill"), role_doc("decode")),
            ms_doc(role_doc("decode")),
            ("role prefill removed",),
        ),
        (
            ms_doc(role_doc("prefill", labels={"a": "1"})),
            ms_doc(role_doc("prefill", labels={"a": "2"})),
            ("prefill: entryTemplate changed",),
        ),
        (
            ms_doc(role_doc("prefill")),
            ms_doc(role_doc("prefill"), scheduler="default-scheduler"),
            ("schedulerName volcano -> default-scheduler",),
        ),
    ],
)
def test_describe_changes(old: dict[str, Any], new: dict[str, Any], changes: tuple[str, ...]) -> None:
    assert describe_changes(revision_data(parse(old).spec), revision_data(parse(new).spec)) == changes


def test_undo_goes_back_to_the_previous_revision_keeping_replicas_and_rollout_settings() -> None:
    v1, v2 = _doc("img:1", decode=2), _doc("img:2", decode=2)
    entries = history(parse(v2), _revisions(v1, v2))
    now = copy.deepcopy(v2)
    now["metadata"]["resourceVersion"] = "42"
    now["spec"]["template"]["roles"][1]["replicas"] = 4  # scaled since
    now["spec"]["template"]["roles"][1]["partition"] = 1
    ms = parse(now)
    target = undo_target(ms, entries, None)
    assert target.number == 1 and target.data is not None
    patch = undo_patch(ms, target.data)
    assert patch["metadata"] == {"resourceVersion": "42"}
    result = parse(merge_patch(now, patch))
    assert spec_revision(result) == target.hash
    decode = result.spec.template.roles[1]
    assert (decode.replicas, str(decode.partition)) == (4, "1")
    assert result.spec.plugins is None


def test_undo_to_a_revision_by_number_and_errors() -> None:
    v1, v2, v3 = _doc("img:1"), _doc("img:2"), _doc("img:3")
    entries = history(parse(v3), _revisions(v1, v2, v3))
    ms = parse(v3)
    assert undo_target(ms, entries, 1).number == 1
    assert undo_target(ms, entries, None).number == 2
    with pytest.raises(HistoryError, match=r"revision 7 not found \(revisions: 1, 2, 3\)"):
        undo_target(ms, entries, 7)
    only = history(parse(v1), _revisions(v1))
    with pytest.raises(HistoryError, match="no earlier revision"):
        undo_target(parse(v1), only, None)


def test_undo_brings_back_a_role_only_the_revision_has() -> None:
    v1 = ms_doc(role_doc("prefill"), role_doc("decode", replicas=3))
    v2 = ms_doc(role_doc("prefill"))
    entries = history(parse(v2), _revisions(v1, v2))
    target = undo_target(parse(v2), entries, 1)
    assert target.data is not None
    result = parse(merge_patch(v2, undo_patch(parse(v2), target.data)))
    assert [(r.name, r.replicas) for r in result.spec.template.roles] == [("prefill", 1), ("decode", 3)]


# --- progress ------------------------------------------------------------------------------------------------------


def _condition(reason: str, status: str = "True", generation: int = 2, message: str = "m") -> dict[str, Any]:
    return {
        "type": "UpdateInProgress",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2024-01-01T00:00:00Z",
        "observedGeneration": generation,
    }


def _progress_doc(generation: int = 2, **status: Any) -> ModelServing:
    doc = ms_doc(role_doc("prefill"), replicas=4, generation=generation)
    base = {"observedGeneration": 2, "updatedReplicas": 4, "availableReplicas": 4}
    base |= {"currentRevision": "b", "updateRevision": "b"}
    doc["status"] = base | status
    return parse(doc)


@pytest.mark.parametrize(
    ("ms", "done", "partition", "stalled", "text"),
    [
        (_progress_doc(generation=3), False, False, False, "spec update to be observed"),
        (
            _progress_doc(conditions=[_condition("RolloutComplete", "False", generation=1)]),
            False,
            False,
            False,
            "observed by the rollout controller",
        ),
        (
            _progress_doc(conditions=[_condition("RolloutComplete", "False")]),
            True,
            False,
            False,
            'modelserving "llama" successfully rolled out (4 of 4 ServingGroups updated, 4 available, revision b)',
        ),
        (_progress_doc(), True, False, False, "successfully rolled out"),  # never rolled out
        (_progress_doc(availableReplicas=3), False, False, False, "4 of 4 ServingGroups updated, 3 available"),
        (
            _progress_doc(currentRevision="a", updatedReplicas=1, conditions=[_condition("PartitionReached", "False")]),
            True,
            True,
            False,
            "partitioned roll out complete: 1 of 4 ServingGroups updated",
        ),
        (
            _progress_doc(
                currentRevision="a",
                updatedReplicas=2,
                conditions=[_condition("UpdateStalled", message="llama-3 (ImagePullBackOff)")],
            ),
            False,
            False,
            True,
            "(UpdateStalled: llama-3 (ImagePullBackOff))",
        ),
        (
            _progress_doc(
                replicas=5, currentRevision="a", updatedReplicas=1, conditions=[_condition("GroupsUpdating")]
            ),
            False,
            False,
            False,
            "1 of 4 ServingGroups updated, 4 available, 5 live (GroupsUpdating: m)...",
        ),
        (
            _progress_doc(currentRevision="a", updatedReplicas=2, conditions=[_condition("GroupsUpdating")]),
            False,
            False,
            False,
            'Waiting for modelserving "llama" rollout to finish: 2 of 4 ServingGroups updated, 4 available',
        ),
    ],
)
def test_rollout_progress(ms: ModelServing, done: bool, partition: bool, stalled: bool, text: str) -> None:
    progress = rollout_progress(ms)
    assert (progress.done, progress.partition, progress.stalled) == (done, partition, stalled)
    assert text in progress.message


def test_uid_filter_applies_only_with_a_uid() -> None:
    revisions = _revisions(_doc())
    doc = _doc()
    doc["metadata"].pop("uid")
    assert len(history(parse(doc), revisions)) == 1
    assert revisions[0]["metadata"]["ownerReferences"][0]["uid"] == MS_UID
