"""Hypothesis: the Scheduled decision is stable (a restart writes and records nothing), honest and well ordered."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelserving.scheduling import SchedulingInputs, decide_scheduled, queue_position
from kthena_py.plan.modelserving.scheduling.verdict import BLOCKING_REASONS
from kthena_py.vocab.conditions import CONDITION_REASONS
from kthena_py.vocab.times import format_time

from .scheduling_builders import KUBE_GPU, NOW, VOLCANO_GPU, node, pod, podgroup, queue

VERDICTS = (None, KUBE_GPU, "0/2 nodes are available: 2 Insufficient cpu.", "0/2 nodes: 2 node(s) had taints", "")
QUEUES = {"default": queue(), "closed": queue("closed", "Closed")}


@st.composite
def worlds(draw: st.DrawFn) -> SchedulingInputs:
    groups = draw(st.integers(0, 3))
    pods: list[dict[str, Any]] = []
    podgroups: list[dict[str, Any]] = []
    gang = draw(st.booleans())
    for g in range(groups):
        for i in range(draw(st.integers(0, 2))):
            pods.append(
                pod(
                    f"llama-{g}-r-0-{i}",
                    f"llama-{g}",
                    node=draw(st.sampled_from([None, "n0"])),
                    verdict=draw(st.sampled_from(VERDICTS)),
                    gpus=draw(st.sampled_from([None, 8, 16])),
                    terminating=draw(st.booleans()),
                    bound_at=draw(st.sampled_from([None, "2023-11-14T21:00:00Z", "2023-11-14T23:59:00Z"])),
                )
            )
        if gang and draw(st.booleans()):
            podgroups.append(
                podgroup(
                    f"llama-{g}",
                    phase=draw(st.sampled_from([None, "Pending", "Inqueue", "Running"])),
                    verdict=draw(st.sampled_from([None, VOLCANO_GPU])),
                    queue=draw(st.sampled_from([None, "closed", "missing"])),
                    created=f"2023-11-14T2{g}:00:00Z",
                )
            )
    return SchedulingInputs(
        pods=tuple(pods),
        podgroups=tuple(podgroups),
        now=NOW,
        generation=1,
        wants_pods=draw(st.booleans()),
        queues=QUEUES,
        queue_podgroups=tuple(podgroups),
        nodes=draw(st.sampled_from([None, (node("n0"),)])),
    )


@settings(max_examples=300, deadline=None)
@given(worlds(), st.floats(0, 10_000))
def test_deciding_again_on_the_same_cluster_changes_nothing_and_records_nothing(
    world: SchedulingInputs, later: float
) -> None:
    first = decide_scheduled(world)
    again = decide_scheduled(replace(world, previous=first.condition, now=world.now + later))
    assert again.condition == first.condition
    assert again.event is None and again.waited is None


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_true_exactly_when_no_live_pod_is_unbound(world: SchedulingInputs) -> None:
    decision = decide_scheduled(world)
    c = decision.condition
    assert c["reason"] in CONDITION_REASONS and c["message"]
    live = [p for p in world.pods if not p["metadata"].get("deletionTimestamp")]
    unbound = [p for p in live if not p["spec"].get("nodeName")]
    if unbound:
        assert c["status"] == "False"
    if c["status"] == "True":
        assert not unbound
    if decision.blocking:
        assert c["status"] == "False" and c["reason"] in BLOCKING_REASONS


@settings(max_examples=200, deadline=None)
@given(st.lists(worlds(), min_size=1, max_size=8))
def test_one_warning_per_wait_and_a_normal_event_only_at_its_end(history: list[SchedulingInputs]) -> None:
    previous: dict[str, Any] | None = None
    blocking_since_warning = False
    for step, world in enumerate(history):
        decision = decide_scheduled(replace(world, previous=previous, now=NOW + 60 * step))
        was_blocking = previous is not None and previous["reason"] in BLOCKING_REASONS and previous["status"] == "False"
        if decision.event is not None and decision.event.type == "Warning":
            assert not was_blocking and decision.blocking
            blocking_since_warning = True
        if decision.event is not None and decision.event.type == "Normal":
            assert was_blocking and decision.condition["status"] == "True" and blocking_since_warning
        if decision.blocking and not was_blocking:
            assert decision.event is not None and decision.event.type == "Warning"
        if not decision.blocking:
            blocking_since_warning = False
        previous = decision.condition


@st.composite
def queues_of_podgroups(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, int]]:
    n = draw(st.integers(1, 8))
    groups = [
        podgroup(
            f"pg-{i}",
            phase=draw(st.sampled_from(["Pending", "Inqueue", "Running"])),
            queue=draw(st.sampled_from([None, "q"])),
            priority_class=draw(st.sampled_from([None, "low", "high"])),
            created=f"2023-11-14T{draw(st.integers(10, 23))}:00:00Z",
        )
        for i in range(n)
    ]
    return groups, {"low": 1, "high": 100}


@settings(max_examples=300, deadline=None)
@given(queues_of_podgroups())
def test_positions_are_a_ranking_by_priority_then_age(world: tuple[list[dict[str, Any]], dict[str, int]]) -> None:
    groups, classes = world
    for name in (None, "q"):
        ranked = []
        for pg in groups:
            if pg["spec"].get("queue") != name:
                continue
            place = queue_position(pg, groups, classes)
            if pg["status"]["phase"] == "Running":
                assert place is None
                continue
            assert place is not None
            ranked.append((place, pg))
        assert sorted(p for (p, _total), _ in ranked) == list(range(1, len(ranked) + 1))
        assert all(total == len(ranked) for (_p, total), _ in ranked)
        by_place = [pg for _, pg in sorted(ranked, key=lambda r: r[0])]
        prio = [classes.get(pg["spec"].get("priorityClassName") or "", 0) for pg in by_place]
        assert prio == sorted(prio, reverse=True)


def _position_by_sorting(pg: dict[str, Any], candidates: list[dict[str, Any]], classes: dict[str, int]) -> Any:
    """The queue order written out the plain way: every waiting PodGroup of the queue keyed, sorted, then indexed."""

    def waiting(o: dict[str, Any]) -> bool:
        return "deletionTimestamp" not in o["metadata"] and o["status"].get("phase") not in ("Running", "Completed")

    if not waiting(pg):
        return None
    queue_name = pg["spec"].get("queue") or "default"
    keys = {}
    for o in [*candidates, pg]:
        if waiting(o) and (o["spec"].get("queue") or "default") == queue_name:
            name = (o["metadata"]["namespace"], o["metadata"]["name"])
            priority = classes.get(o["spec"].get("priorityClassName") or "", 0)
            keys[name] = (-priority, o["metadata"]["creationTimestamp"], *name)
    order = sorted(keys.values())
    return order.index(keys[(pg["metadata"]["namespace"], pg["metadata"]["name"])]) + 1, len(order)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.sampled_from(["ns1", "ns2"]),
            st.sampled_from(["Pending", "Inqueue", "Running"]),
            st.sampled_from([None, "q2"]),
            st.sampled_from([None, "high", "low", "unknown"]),
            st.sampled_from(["2023-11-14T22:00:00Z", "2023-11-14T21:00:00Z"]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_queue_position_is_the_sorted_order_of_the_waiting_podgroups(rows: list[Any], data: st.DataObject) -> None:
    groups = [
        podgroup(name, namespace=ns, phase=phase, queue=q, priority_class=pc, created=created)
        for name, ns, phase, q, pc, created in rows
    ]
    classes = {"high": 100, "low": -5}
    pg = data.draw(st.sampled_from(groups))
    candidates = data.draw(st.lists(st.sampled_from(groups), max_size=12))
    assert queue_position(pg, candidates, classes) == _position_by_sorting(pg, candidates, classes)
    assert queue_position(pg, candidates, classes) == queue_position(pg, candidates, classes)  # memoised alike


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(-7_200, 7_200)), st.booleans()), min_size=1, max_size=4),
    st.integers(0, 7_200),
)
def test_a_reported_wait_ends_at_the_last_binding_within_the_time_it_was_false(
    bindings: list[tuple[int | None, bool]], false_for: int
) -> None:
    """Bindings stamped around ``now`` (some not stamped, some of terminating pods), a wait of ``false_for`` s."""
    pods = tuple(
        pod(f"llama-0-r-0-{i}", node="n0", terminating=gone, bound_at=None if at is None else format_time(NOW + at))
        for i, (at, gone) in enumerate(bindings)
    )
    previous = {
        "type": "Scheduled",
        "status": "False",
        "reason": "InsufficientGPU",
        "lastTransitionTime": format_time(NOW - false_for),
    }
    decision = decide_scheduled(SchedulingInputs(pods=pods, now=NOW, generation=1, previous=previous))
    live = [at for at, gone in bindings if not gone]
    if not live:
        assert decision.waited is None or decision.waited == false_for  # no pod: "no pods" is True at once
        return
    assert decision.waited is not None and 0 <= decision.waited <= false_for
    if None in live:
        assert decision.waited == false_for  # a pod does not say when it was bound: the wait ends now
    else:
        stamps = [at for at in live if at is not None]
        assert decision.waited == max(0, min(false_for, max(stamps) + false_for))
