"""The Scheduled condition, decided from what Volcano and kube-scheduler wrote (table-driven)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kthena_py.plan.modelserving.scheduling import (
    SchedulingInputs,
    decide_scheduled,
    is_accelerator,
    queue_position,
    shorten,
)

from .scheduling_builders import GPU, KUBE_GPU, NOW, VOLCANO_GPU, condition, node, pod, podgroup, queue

NODES = (node("n0"), node("n1"))
QUEUES = {"default": queue()}


def inputs(**kw: Any) -> SchedulingInputs:
    base: dict[str, Any] = {"pods": (), "now": NOW, "generation": 3, "queues": QUEUES}
    base.update(kw)
    return SchedulingInputs(**base)


@pytest.mark.parametrize(
    ("resource", "accelerator"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("gpu.intel.com/i915", True),
        ("nvidia.com/mig-1g.5gb", True),
        ("habana.ai/gaudi", True),
        ("cpu", False),
        ("memory", False),
        ("ephemeral-storage", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/batch", False),
        ("example.kubernetes.io/thing", False),
        ("foo.k8s.io/bar", False),
        ("/gpu", False),
        ("nvidia.com/", False),
    ],
)
def test_accelerators_are_extended_resources_outside_kubernetes_domains(resource: str, accelerator: bool) -> None:
    assert is_accelerator(resource) is accelerator


@pytest.mark.parametrize(
    ("message", "short"),
    [
        (VOLCANO_GPU, "1/1 tasks in gang unschedulable: 0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu."),
        (KUBE_GPU, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
        (
            "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending. Origin reason is: queue full",
            "2/2 tasks in gang unschedulable: queue full",
        ),
        ("a\n  b", "a b"),
        ("x" * 300, "x" * 237 + "..."),
    ],
)
def test_shorten(message: str, short: str) -> None:
    assert shorten(message) == short


# (name, inputs, status, reason, message fragments)
CASES: list[tuple[str, SchedulingInputs, str, str, tuple[str, ...]]] = [
    (
        "volcano: 16 GPUs per pod on 8-GPU nodes",
        inputs(
            pods=(pod(gpus=16),),
            podgroups=(podgroup(verdict=VOLCANO_GPU),),
            nodes=NODES,
        ),
        "False",
        "InsufficientGPU",
        (
            "waiting for nvidia.com/gpu: 16 per pod; largest node offers 8; ServingGroup llama-0; "
            "queue default: position 1 of 1, priority 0; "
            "scheduler: 1/1 tasks in gang unschedulable: 0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu.",
        ),
    ),
    (
        "kube-scheduler: PodScheduled=False names the GPU",
        inputs(pods=(pod(gpus=16, verdict=KUBE_GPU),), nodes=NODES),
        "False",
        "InsufficientGPU",
        ("waiting for nvidia.com/gpu: 16 per pod; largest node offers 8; ServingGroup llama-0; scheduler: 0/3",),
    ),
    (
        "cpu is a resource, not a GPU",
        inputs(
            pods=(pod(cpu="64", verdict="0/2 nodes are available: 2 Insufficient cpu."),),
            nodes=NODES,
        ),
        "False",
        "InsufficientResources",
        ("waiting for cpu: 64 per pod; largest node offers 32",),
    ),
    (
        "an accelerator wins over cpu in one message",
        inputs(pods=(pod(gpus=9, verdict="0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient amd.com/gpu."),)),
        "False",
        "InsufficientGPU",
        ("waiting for amd.com/gpu",),
    ),
    (
        "taints are Unschedulable",
        inputs(pods=(pod(verdict="0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}."),)),
        "False",
        "Unschedulable",
        ("no node fits", "untolerated taint"),
    ),
    (
        "scheduling gates are Unschedulable",
        inputs(pods=(pod(verdict="", reason="SchedulingGated"),)),
        "False",
        "Unschedulable",
        ("scheduling gates",),
    ),
    (
        "no verdict yet",
        inputs(pods=(pod(),), podgroups=(podgroup(phase="Inqueue"),)),
        "False",
        "Scheduling",
        ("waiting for pods to be created and placed",),
    ),
    (
        "a closed queue",
        inputs(pods=(pod(),), podgroups=(podgroup(phase="Pending", queue="q"),), queues={"q": queue("q", "Closed")}),
        "False",
        "NotEnqueued",
        ("Volcano queue q is Closed; ServingGroup llama-0; queue q: position 1 of 1, priority 0",),
    ),
    (
        "a queue that does not exist",
        inputs(pods=(pod(),), podgroups=(podgroup(phase="Pending", queue="nope"),)),
        "False",
        "NotEnqueued",
        ("Volcano queue nope does not exist",),
    ),
    (
        "a full queue",
        inputs(
            pods=(pod(gpus=8),),
            podgroups=(podgroup(phase="Pending", queue="q", min_resources={GPU: "8"}),),
            queues={"q": queue("q", capability={GPU: "8"}, allocated={GPU: "4"})},
        ),
        "False",
        "QueueFull",
        ("Volcano queue q has no room: nvidia.com/gpu capability 8, allocated 4, the gang needs 8",),
    ),
    (
        "Pending with a verdict but room in the queue: not enqueued",
        inputs(pods=(pod(),), podgroups=(podgroup(phase="Pending", verdict="2/2 tasks in gang unschedulable: x"),)),
        "False",
        "NotEnqueued",
        ("Volcano has not admitted the gang to queue default: 2/2 tasks in gang unschedulable: x",),
    ),
    (
        "Pending without a verdict: no verdict yet",
        inputs(pods=(pod(),), podgroups=(podgroup(phase=None),)),
        "False",
        "Scheduling",
        (),
    ),
    (
        "every pod bound, the PodGroup Running",
        inputs(pods=(pod(node="n0"),), podgroups=(podgroup(phase="Running"),)),
        "True",
        "AllScheduled",
        ("every pod is placed on a node",),
    ),
    (
        "every pod bound before Volcano moves the phase to Running",
        inputs(pods=(pod(node="n0"),), podgroups=(podgroup(phase="Inqueue", verdict=VOLCANO_GPU),)),
        "True",
        "AllScheduled",
        (),
    ),
    (
        "fewer pods than minMember, all bound: the gang is not complete yet",
        inputs(pods=(pod(node="n0"),), podgroups=(podgroup(phase="Inqueue", min_member=2),)),
        "False",
        "Scheduling",
        (),
    ),
    (
        "a stale Unschedulable verdict on a Running PodGroup is history",
        inputs(pods=(pod(node="n0"),), podgroups=(podgroup(phase="Running", verdict=VOLCANO_GPU),)),
        "True",
        "AllScheduled",
        (),
    ),
    (
        "Running, but a pod beyond the gang minimum waits",
        inputs(
            pods=(pod(node="n0"), pod("llama-0-prefill-1-0", gpus=16, verdict=KUBE_GPU)),
            podgroups=(podgroup(phase="Running"),),
        ),
        "False",
        "InsufficientGPU",
        (),
    ),
    (
        "terminating and finished pods do not wait",
        inputs(pods=(pod(terminating=True), pod(node="n0"))),
        "True",
        "AllScheduled",
        (),
    ),
    ("no pods wanted", inputs(wants_pods=False), "True", "AllScheduled", ("no pods to place",)),
    ("pods wanted, none yet", inputs(), "False", "Scheduling", ("waiting for pods to be created and placed",)),
    (
        "the most telling reason wins; the others are listed",
        inputs(
            pods=(pod(gpus=16), pod("llama-1-prefill-0-0", "llama-1")),
            podgroups=(
                podgroup(verdict=VOLCANO_GPU),
                podgroup("llama-1", phase="Pending", queue="q"),
            ),
            queues={"default": queue(), "q": queue("q", "Closed")},
        ),
        "False",
        "NotEnqueued",
        ("ServingGroup llama-1", "also InsufficientGPU: llama-0"),
    ),
]


@pytest.mark.parametrize(("name", "given", "status", "reason", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_verdicts(name: str, given: SchedulingInputs, status: str, reason: str, fragments: tuple[str, ...]) -> None:
    decision = decide_scheduled(given)
    c = decision.condition
    assert (c["type"], c["status"], c["reason"]) == ("Scheduled", status, reason), c["message"]
    assert c["observedGeneration"] == 3
    for fragment in fragments:
        assert fragment in c["message"]
    assert decision.blocking is (reason not in ("AllScheduled", "Scheduling"))


def test_the_nodes_are_asked_for_only_when_a_resource_is_short() -> None:
    short = inputs(pods=(pod(gpus=16),), podgroups=(podgroup(verdict=VOLCANO_GPU),))
    assert decide_scheduled(short).needs_nodes
    assert "largest node" not in decide_scheduled(short).condition["message"]
    assert not decide_scheduled(replace(short, nodes=NODES)).needs_nodes
    assert not decide_scheduled(inputs(pods=(pod(),))).needs_nodes
    none = decide_scheduled(replace(short, nodes=(node("cpu-only", gpus=0),)))
    assert "no node offers it" in none.condition["message"]


def test_positions_follow_volcanos_order_priority_then_age() -> None:
    old = podgroup("a", created="2023-11-14T20:00:00Z")
    young = podgroup("b", created="2023-11-14T21:00:00Z")
    urgent = podgroup("c", created="2023-11-14T21:30:00Z", priority_class="high")
    running = podgroup("d", phase="Running", created="2023-11-14T19:00:00Z")
    elsewhere = podgroup("e", queue="other", created="2023-11-14T19:00:00Z")
    every = (old, young, urgent, running, elsewhere)
    classes = {"high": 1000}
    assert queue_position(urgent, every, classes) == (1, 3)
    assert queue_position(old, every, classes) == (2, 3)
    assert queue_position(young, every, classes) == (3, 3)
    assert queue_position(running, every, classes) is None
    assert queue_position(elsewhere, every, classes) == (1, 1)
    # Without a class the global default applies: the urgent one has no edge over one with the default.
    assert queue_position(urgent, every, {"high": 5}, default=5) == (3, 3)


def test_the_position_and_priority_appear_in_the_message() -> None:
    mine = podgroup(verdict=VOLCANO_GPU, created="2023-11-14T22:00:00Z", priority_class="high")
    ahead = podgroup("other-0", namespace="x", created="2023-11-14T21:00:00Z", priority_class="high")
    message = decide_scheduled(
        inputs(pods=(pod(gpus=16),), podgroups=(mine,), queue_podgroups=(mine, ahead), priority_classes={"high": 7})
    ).condition["message"]
    assert "queue default: position 2 of 2, priority 7" in message


WAITING = condition("False", "InsufficientGPU", since="2023-11-14T22:10:00Z")
SHORT = inputs(pods=(pod(gpus=16, verdict=KUBE_GPU),))


@pytest.mark.parametrize(
    ("previous", "given", "event"),
    [
        (None, SHORT, ("Warning", "InsufficientGPU")),
        (condition("True", "AllScheduled"), SHORT, ("Warning", "InsufficientGPU")),
        (condition("False", "Scheduling"), SHORT, ("Warning", "InsufficientGPU")),
        (WAITING, SHORT, None),
        (WAITING, inputs(pods=(pod(verdict="taint"),)), None),
        (WAITING, inputs(pods=(pod(node="n0"),)), ("Normal", "Scheduled")),
        (condition("False", "Scheduling"), inputs(pods=(pod(node="n0"),)), None),
        (None, inputs(pods=(pod(),)), None),
        (None, inputs(pods=(pod(node="n0"),)), None),
    ],
)
def test_events_come_from_transitions_of_the_condition(
    previous: dict[str, Any] | None, given: SchedulingInputs, event: tuple[str, str] | None
) -> None:
    decision = decide_scheduled(replace(given, previous=previous))
    got = (decision.event.type, decision.event.reason) if decision.event is not None else None
    assert got == event


def test_the_end_of_a_wait_says_how_long_it_lasted() -> None:
    decision = decide_scheduled(inputs(pods=(pod(node="n0"),), previous=WAITING))
    assert decision.waited == 200.0 and decision.waited_reason == "InsufficientGPU"
    assert decision.event is not None and "after waiting 3m20s (InsufficientGPU)" in decision.event.message
    assert decision.condition["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    quick = decide_scheduled(inputs(pods=(pod(node="n0"),), previous=condition("False", "Scheduling")))
    assert quick.waited == 0.0 and quick.waited_reason == "Scheduling" and quick.event is None


@pytest.mark.parametrize(
    ("bound", "waited", "said"),
    [
        (("2023-11-14T22:12:00Z",), 120.0, "after waiting 2m00s"),
        (("2023-11-14T22:11:00Z", "2023-11-14T22:12:30Z"), 150.0, "after waiting 2m30s"),
        (("2023-11-14T22:11:00Z", None), 200.0, "after waiting 3m20s"),  # one pod does not say when: until now
        (("2023-11-14T22:15:00Z",), 200.0, "after waiting 3m20s"),  # a binding stamped ahead of our clock: now
        (("2023-11-14T22:09:00Z",), 0.0, "after waiting 0s"),  # bound before the wait began
    ],
)
def test_a_wait_ends_when_the_last_pod_was_bound_not_when_it_was_noticed(
    bound: tuple[str | None, ...], waited: float, said: str
) -> None:
    pods = tuple(pod(f"llama-0-r-0-{i}", node="n0", bound_at=at) for i, at in enumerate(bound))
    gone = pod("llama-0-r-0-9", node="n0", terminating=True)  # a terminating pod's binding is not asked
    decision = decide_scheduled(inputs(pods=(*pods, gone), previous=WAITING))
    assert decision.waited == waited
    assert decision.event is not None and f"{said} (InsufficientGPU)" in decision.event.message
    assert decision.condition["lastTransitionTime"] == "2023-11-14T22:13:20Z"  # the transition is dated when seen


def test_the_transition_time_moves_only_with_the_status() -> None:
    still = decide_scheduled(inputs(pods=(pod(verdict="taint"),), previous=WAITING))
    assert still.condition["lastTransitionTime"] == WAITING["lastTransitionTime"]
    assert still.waited is None


def test_creating_and_binding_pods_does_not_change_the_scheduling_condition() -> None:
    stages = [
        inputs(),
        inputs(podgroups=(podgroup(phase=None, min_member=2),)),
        inputs(pods=(pod(),), podgroups=(podgroup(phase="Inqueue", min_member=2),)),
        inputs(
            pods=(pod(node="n0"), pod("llama-0-prefill-0-1")),
            podgroups=(podgroup(phase="Inqueue", min_member=2),),
        ),
    ]
    conditions = [decide_scheduled(s).condition for s in stages]
    assert all(c == conditions[0] for c in conditions), conditions
    assert conditions[0]["reason"] == "Scheduling"


# -- a young ModelServing's first Scheduling is held ----------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "kw", "hold"),
    [
        ("young, no condition, pods unplaced", {"pods": (pod(),), "created": NOW - 10}, 20.0),
        ("young, no pods yet", {"created": NOW - 1}, 29.0),
        ("past the grace", {"pods": (pod(),), "created": NOW - 30}, None),
        ("creation unknown", {"pods": (pod(),)}, None),
        (
            "a condition already there",
            {"pods": (pod(),), "created": NOW - 1, "previous": condition("True", "AllScheduled")},
            None,
        ),
        ("young but waiting for a GPU", {"pods": (pod(verdict=KUBE_GPU, gpus=16),), "created": NOW - 1}, None),
        ("young and placed", {"pods": (pod(node="n0"),), "created": NOW - 1}, None),
    ],
)
def test_only_a_young_modelservings_first_scheduling_is_held(case: str, kw: dict[str, Any], hold: float | None) -> None:
    decision = decide_scheduled(inputs(grace=30.0, **kw))
    assert decision.hold == pytest.approx(hold) if hold is not None else decision.hold is None, case
    if hold is not None:
        assert decision.reason == "Scheduling" and decision.event is None and decision.waited is None
    else:
        assert decision.condition.get("lastTransitionTime"), case  # a condition to write


def test_no_grace_writes_the_first_scheduling_at_once() -> None:
    decision = decide_scheduled(inputs(pods=(pod(),), created=NOW - 1))
    assert decision.hold is None and decision.reason == "Scheduling"
