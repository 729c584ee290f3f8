"""Properties of the rollout planner under random readiness schedules (hypothesis).

* A rollout step never takes ready units down below ``replicas - maxUnavailable`` ready units.
* Partition-protected groups are never touched (same pod UIDs, old image).
* Once pods are allowed to become ready, the rollout always converges: every unprotected group on the new image.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelserving.rollout.rollout import RolloutPlan, _plan_in_full, plan_rollout, settled

from .builders import VOLCANO, ms_doc, parse, ready_status, ref_of, role_doc
from .fleet import Fleet

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def _rollouts(draw: st.DrawFn) -> dict[str, Any]:
    replicas = draw(st.integers(1, 5))
    unavailable = draw(st.integers(0, 3))
    surge = draw(st.integers(0 if unavailable else 1, 2))
    partition = draw(st.integers(0, replicas))
    workers = draw(st.integers(0, 1))
    doc = ms_doc(role_doc("decode", workers=workers), replicas=replicas)
    config = {"maxUnavailable": unavailable, "maxSurge": surge, "partition": partition}
    doc["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": config}
    return doc


def _tick_some(fleet: Fleet, chosen: list[bool]) -> None:
    pending = sorted(n for n, p in fleet.cluster.pods().items() if p["status"].get("phase") != "Running")
    for name, ok in zip(pending, chosen, strict=False):
        if ok:
            fleet.cluster.set_pod_status(name, ready_status(fleet.now))


@SETTINGS
@given(doc=_rollouts(), schedule=st.lists(st.lists(st.booleans(), max_size=12), max_size=25))
def test_rollout_budget_partition_and_convergence(doc: dict[str, Any], schedule: list[list[bool]]) -> None:
    fleet = Fleet(doc)
    fleet.settle()
    replicas = doc["spec"]["replicas"]
    config = doc["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
    floor = replicas - config["maxUnavailable"]
    protected = {n: u for n, u in fleet.uids().items() if int(n.split("-")[1]) < config["partition"]}
    fleet.set_image("img:2")
    for chosen in schedule:
        ms = parse(fleet.doc)
        before = fleet.ready_groups()
        plan = plan_rollout(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
        fleet.cluster.apply(plan, fleet.now)
        if not plan.deletes:
            fleet.apply_status(plan.status)
        assert fleet.ready_groups() >= min(before, floor)
        fleet.reconcile(rollout=False)
        _tick_some(fleet, chosen)
    fleet.settle()
    images = fleet.images()
    for name, uid in protected.items():
        assert fleet.uids().get(name) == uid and images[name] == "img:1"
    unprotected = {n: i for n, i in images.items() if int(n.split("-")[1]) >= config["partition"]}
    assert set(unprotected.values()) <= {"img:2"}
    assert sorted({int(n.split("-")[1]) for n in images}) == list(range(replicas))
    assert fleet.ready_groups() == replicas
    if config["partition"] == 0:
        status = fleet.doc["status"]
        assert status["currentRevision"] == status["updateRevision"]
    assert math.isfinite(fleet.now)


@SETTINGS
@given(
    prefill=st.integers(1, 4),
    unavailable=st.integers(1, 2),
    partition=st.integers(0, 2),
    schedule=st.lists(st.lists(st.booleans(), max_size=8), max_size=20),
)
def test_role_rollout_budget_per_role(
    prefill: int, unavailable: int, partition: int, schedule: list[list[bool]]
) -> None:
    p = role_doc("prefill", replicas=prefill) | {"maxUnavailable": unavailable, "partition": partition}
    doc = ms_doc(p, role_doc("decode", workers=1), replicas=1)
    doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    fleet = Fleet(doc)
    fleet.settle()
    decode = {n: u for n, u in fleet.uids().items() if "-decode-" in n}
    fleet.set_image("img:2", role=0)

    def ready_prefill() -> int:
        return sum(
            1
            for n, pod in fleet.cluster.pods().items()
            if "-prefill-" in n
            and pod["status"].get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
        )

    for chosen in schedule:
        ms = parse(fleet.doc)
        before = ready_prefill()
        plan = plan_rollout(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
        fleet.cluster.apply(plan, fleet.now)
        assert ready_prefill() >= min(before, prefill - unavailable)
        fleet.reconcile(rollout=False)
        _tick_some(fleet, chosen)
    fleet.settle()
    images = fleet.images()
    assert {n: u for n, u in fleet.uids().items() if "-decode-" in n} == decode
    for r in range(prefill):
        assert images[f"llama-0-prefill-{r}-0"] == ("img:1" if r < min(partition, prefill) else "img:2")


@SETTINGS
@given(
    doc=_rollouts(),
    change_at=st.integers(0, 12),
    schedule=st.lists(st.lists(st.booleans(), max_size=12), min_size=1, max_size=25),
)
def test_a_settled_modelserving_has_nothing_to_roll(
    doc: dict[str, Any], change_at: int, schedule: list[list[bool]]
) -> None:
    """Whenever the shortcut says settled, the full planner takes nothing down, patches nothing, writes nothing."""
    fleet = Fleet(doc)
    for step, chosen in enumerate(schedule):
        if step == change_at:
            fleet.set_image("img:2")
        ms = parse(fleet.doc)
        observed = fleet.cluster.observed()
        if settled(ms, observed):
            full = _plan_in_full(ms, ref_of(ms), observed, VOLCANO, fleet.now)
            assert (full.deletes, full.updates, full.events, full.status) == ((), (), (), None)
            assert plan_rollout(ms, ref_of(ms), observed, VOLCANO, fleet.now) == RolloutPlan()
        fleet.reconcile()
        _tick_some(fleet, chosen)


def test_settled_cases() -> None:
    """Table: what keeps a ModelServing from counting as settled."""
    fleet = Fleet(ms_doc(role_doc("decode", workers=1), replicas=2))
    fleet.settle()
    ms = parse(fleet.doc)
    assert settled(ms, fleet.cluster.observed())
    assert not settled(ms, replace(fleet.cluster.observed(), disrupted=frozenset({"unit"})))  # an eviction is recorded
    fleet.set_image("img:2")  # every pod is now on an outdated revision
    assert not settled(parse(fleet.doc), fleet.cluster.observed())
    fleet.settle()  # the rollout ran and recorded UpdateInProgress (complete): no longer the shortcut's case
    assert not settled(parse(fleet.doc), fleet.cluster.observed())
