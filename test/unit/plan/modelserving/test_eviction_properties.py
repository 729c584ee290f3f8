"""Hypothesis: no interleaving of grants, evictions, re-creations and readiness changes exceeds the budget.

A small world: one ModelServing converged by the real planners (:class:`builders.Cluster`), a tracker with a version
(optimistic concurrency, as the ConfigMap's resourceVersion), and several webhook replicas whose requests run in
two steps: decide on what they read (the tracker, then the pods, fresh, as the webhook reads them; a request may
name a pod that is gone), and write the tracker if it has not changed meanwhile, else decide again. A granted
eviction is acted on later, as the API server does, on whichever pod has the name by then, or never once
``IN_FLIGHT_SECONDS`` have passed. Between the steps: terminating pods go, the controller rebuilds what is missing
(re-created pods start Pending, or come up ready), a kubelet makes one Pending pod Running and Ready, the budget
reconciler prunes the tracker (on a view that may lag behind the cluster by any number of steps; a release is
confirmed on a fresh view, as the reconciler does), time passes (never as far as a record's expiry).

Property: after every step, in every budget, the units that are really available (ready by the user's definition
now, and without a pod the API server may still evict) are at least ``minAvailable``. Each of the flaws the storm
showed (a grant in a recorded unit not recorded; a record released while a grant may still be acted on; a
webhook without records) makes the property fail within a few hundred examples, and has a deterministic case
below.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api.modelserving import EvictionStrategySpec, ModelServing
from kthena_py.plan.modelserving.core.state import build_state
from kthena_py.plan.modelserving.core.types import Observed
from kthena_py.plan.modelserving.eviction import (
    IN_FLIGHT_SECONDS,
    TrackerEntry,
    Verdict,
    budgets,
    evaluate,
    expire,
    prune,
    target_by_name,
    target_of,
    unit_index,
)

from .builders import NOW, VOLCANO, Cluster, ms_doc, parse, ready_status, ref_of, role_doc

TTL = 100_000.0  # longer than any run: expiry is covered by the table tests


@dataclass
class Pending:
    pod: str
    version: int
    verdict: Verdict


@dataclass
class World:
    ms: ModelServing
    strategy: EvictionStrategySpec
    cluster: Cluster
    forgetful: bool = False
    """Decide without the tracker (to show that the property can fail)."""
    trusting: bool = False
    """Release on a lagging view without confirming it on a fresh one (to show that the property can fail)."""
    unrecorded_repeats: bool = False
    """Grant pods of an already disrupted unit without recording them (to show that the property can fail)."""
    unheld: bool = False
    """Release records while the API server may still act on their grants (to show that the property can fail)."""
    now: float = NOW
    history: list[Observed] = field(default_factory=list)
    version: int = 0
    entries: dict[str, TrackerEntry] = field(default_factory=dict)
    inflight: list[tuple[str, float]] = field(default_factory=list)
    """Granted evictions the API server has not acted on yet: (pod name, granted at)."""
    pending: list[Pending] = field(default_factory=list)
    grants: int = 0
    names: list[str] = field(default_factory=list)
    """Every pod name the converged ModelServing has (requests may name a pod that is gone)."""

    def __post_init__(self) -> None:
        self.history.append(self.cluster.observed())
        self.names = sorted(self.cluster.pods())

    def snapshot(self) -> None:
        self.history.append(self.cluster.observed())

    def view(self, lag: int) -> Observed:
        return self.history[max(0, len(self.history) - 1 - lag)]

    def recorded(self) -> dict[str, TrackerEntry]:
        if self.unheld:
            return {key: replace(entry, held_until=None) for key, entry in self.entries.items()}
        return self.entries

    def decide(self, pod: str) -> Verdict | None:
        obj = self.cluster.pods().get(pod)
        roles = [r.name for r in self.ms.spec.template.roles]
        target = target_of(obj) if obj is not None else target_by_name(ref_of(self.ms).name, roles, pod)
        if target is None:
            return None
        state = build_state(self.ms, ref_of(self.ms), self.cluster.observed(), VOLCANO)
        entries = {} if self.forgetful else self.recorded()
        return evaluate(state, self.strategy, target, entries, now=self.now, ttl=TTL)

    def request(self, pod: str) -> None:
        verdict = self.decide(pod)
        if verdict is None or not verdict.allowed:
            return
        if (
            self.forgetful
            or verdict.record is None
            or (self.unrecorded_repeats and verdict.reason == "AlreadyDisrupted")
        ):
            self.grant(pod)
        else:
            self.pending.append(Pending(pod, self.version, verdict))

    def commit(self, index: int) -> None:
        if not self.pending:
            return
        job = self.pending.pop(index % len(self.pending))
        if job.version != self.version:  # conflict: read again and decide again
            self.request(job.pod)
            return
        self.entries = dict(job.verdict.entries)
        self.version += 1
        self.grant(job.pod)

    def grant(self, pod: str) -> None:
        self.grants += 1
        self.inflight.append((pod, self.now))

    def act(self, index: int) -> None:
        """The API server acts on one granted eviction: whichever pod has the name now starts terminating."""
        if not self.inflight:
            return
        name, granted_at = self.inflight.pop(index % len(self.inflight))
        pod = self.cluster.pods().get(name)
        if pod is not None and self.now <= granted_at + IN_FLIGHT_SECONDS:
            self.cluster.terminate(name, self.now)
            self.snapshot()

    def reap(self) -> None:
        self.cluster.finish_terminating()
        self.snapshot()

    def rebuild(self) -> None:
        for _ in range(2):
            self.cluster.reconcile(self.ms, VOLCANO, self.now)
        self.snapshot()

    def settle(self) -> None:
        while self.inflight:
            self.act(0)
        self.reap()
        self.rebuild()

    def kubelet(self, index: int) -> None:
        names = sorted(n for n, p in self.cluster.pods().items() if p["status"].get("phase") == "Pending")
        if names:
            self.cluster.set_pod_status(names[index % len(names)], ready_status(self.now))
            self.snapshot()

    def gc(self, lag: int) -> None:
        entries = self.recorded()
        state = build_state(self.ms, ref_of(self.ms), self.view(lag), VOLCANO)
        pruned = prune(entries, unit_index(state), self.now)
        if pruned != expire(entries, self.now) and not self.trusting:
            fresh = build_state(self.ms, ref_of(self.ms), self.cluster.observed(), VOLCANO)
            pruned = prune(entries, unit_index(fresh), self.now)
        if set(pruned) != set(self.entries):
            self.entries = {key: self.entries[key] for key in pruned}
            self.version += 1

    def violations(self) -> list[str]:
        state = build_state(self.ms, ref_of(self.ms), self.cluster.observed(), VOLCANO)
        doomed = {name for name, _ in self.inflight}
        found = []
        for budget in budgets(state, self.strategy):
            available = [
                unit for unit in budget.units if unit.healthy and not any(p.name in doomed for p in unit.health.pods)
            ]
            if len(available) < budget.min_available:
                found.append(f"{budget.group or budget.ms}/{budget.role or '*'}: {len(available)} available")
        return found


@st.composite
def worlds(draw: st.DrawFn) -> World:
    workers = draw(st.integers(0, 1))
    if draw(st.booleans()):
        replicas = draw(st.integers(1, 4))
        roles = [role_doc("prefill", workers=workers)]
        if draw(st.booleans()):
            roles.append(role_doc("decode"))
        strategy: dict[str, Any] = {"minAvailable": draw(st.sampled_from([0, 1, 2, 3, "50%", "75%", "100%"]))}
    else:
        replicas = draw(st.integers(1, 2))
        roles = [role_doc("prefill", replicas=draw(st.integers(1, 3)), workers=workers), role_doc("decode")]
        value = draw(st.sampled_from([0, 1, 2, "50%", "100%"]))
        strategy = {"protectionLevel": "Role", "roleMinAvailable": {"prefill": value}}
    doc = ms_doc(*roles, replicas=replicas)
    doc["spec"]["rolloutStrategy"] = {"evictionStrategy": strategy}
    ms = parse(doc)
    cluster = Cluster()
    cluster.converge(ms)
    cluster.ready = draw(st.booleans())  # re-created pods start Pending until the kubelet step, or come up ready
    assert ms.spec.rollout_strategy is not None and ms.spec.rollout_strategy.eviction_strategy is not None
    world = World(ms, ms.spec.rollout_strategy.eviction_strategy, cluster)
    # Thresholds above what exists (e.g. 3 of 2 groups) would start violated: leave those out.
    if world.violations():
        return draw(worlds())
    return world


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.integers(0, 99), st.just(0)),
        st.tuples(st.just("commit"), st.integers(0, 99), st.just(0)),
        st.tuples(st.just("act"), st.integers(0, 99), st.just(0)),
        st.tuples(st.just("reap"), st.just(0), st.just(0)),
        st.tuples(st.just("rebuild"), st.just(0), st.just(0)),
        st.tuples(st.just("kubelet"), st.integers(0, 99), st.just(0)),
        st.tuples(st.just("gc"), st.just(0), st.integers(0, 8)),
        st.tuples(st.just("wait"), st.just(0), st.just(0)),
        # Macro steps, so short runs reach deep states: a request written at once; every granted eviction acted
        # on, the terminating pods gone and the controller's rebuild.
        st.tuples(st.just("grant"), st.integers(0, 99), st.just(0)),
        st.tuples(st.just("settle"), st.just(0), st.just(0)),
    ),
    min_size=1,
    max_size=60,
)


def run(world: World, ops: list[tuple[str, int, int]]) -> list[str]:
    for op, index, lag in ops:
        world.now += 1
        if op in ("request", "grant"):
            world.request(world.names[index % len(world.names)])
            if op == "grant":
                world.commit(len(world.pending) - 1)
        elif op == "commit":
            world.commit(index)
        elif op == "act":
            world.act(index)
        elif op == "reap":
            world.reap()
        elif op == "rebuild":
            world.rebuild()
        elif op == "kubelet":
            world.kubelet(index)
        elif op == "wait":
            world.now += IN_FLIGHT_SECONDS / 2
        elif op == "settle":
            world.settle()
        else:
            world.gc(lag)
        problems = world.violations()
        if problems:
            return [f"after {op}: {p}" for p in problems]
    return []


@settings(max_examples=400, deadline=None, database=None)
@given(world=worlds(), ops=OPS)
def test_no_interleaving_of_grants_exceeds_the_budget(world: World, ops: list[tuple[str, int, int]]) -> None:
    assert run(world, ops) == []


def test_the_property_catches_a_webhook_that_forgets_its_grants() -> None:
    doc = ms_doc(role_doc("prefill"), replicas=3)
    doc["spec"]["rolloutStrategy"] = {"evictionStrategy": {"minAvailable": 2}}
    ms = parse(doc)
    cluster = Cluster()
    cluster.converge(ms)
    assert ms.spec.rollout_strategy is not None and ms.spec.rollout_strategy.eviction_strategy is not None
    ops = [("request", 0, 0), ("request", 1, 0)]
    careful = World(ms, ms.spec.rollout_strategy.eviction_strategy, copy.deepcopy(cluster))
    assert run(careful, [*ops, ("commit", 0, 0), ("commit", 0, 0)]) == []
    assert careful.grants == 1
    forgetful = World(ms, ms.spec.rollout_strategy.eviction_strategy, copy.deepcopy(cluster), forgetful=True)
    assert run(forgetful, ops) == ["after request: llama/*: 1 available"]


def test_two_replicas_racing_for_the_last_disruption_grant_once() -> None:
    doc = ms_doc(role_doc("prefill"), replicas=3)
    doc["spec"]["rolloutStrategy"] = {"evictionStrategy": {"minAvailable": 2}}
    ms = parse(doc)
    cluster = Cluster()
    cluster.converge(ms)
    assert ms.spec.rollout_strategy is not None and ms.spec.rollout_strategy.eviction_strategy is not None
    world = World(ms, ms.spec.rollout_strategy.eviction_strategy, cluster)
    # Both decide on the same tracker version; the second write conflicts, decides again and is denied.
    assert run(world, [("request", 0, 0), ("request", 1, 0), ("commit", 0, 0), ("commit", 0, 0)]) == []
    assert world.grants == 1 and world.pending == []


def three_groups(**flags: bool) -> World:
    doc = ms_doc(role_doc("prefill"), replicas=3)
    doc["spec"]["rolloutStrategy"] = {"evictionStrategy": {"minAvailable": 2}}
    ms = parse(doc)
    cluster = Cluster()
    cluster.converge(ms)
    cluster.ready = False
    assert ms.spec.rollout_strategy is not None and ms.spec.rollout_strategy.eviction_strategy is not None
    return World(ms, ms.spec.rollout_strategy.eviction_strategy, cluster, **flags)


EVICT_G0 = [("request", 0, 0), ("commit", 0, 0), ("act", 0, 0), ("reap", 0, 0), ("rebuild", 0, 0)]


@pytest.mark.parametrize("flaw", ["", "unrecorded_repeats"])
def test_a_pod_evicted_while_its_unit_rebuilds_keeps_the_unit_disrupted(flaw: str) -> None:
    # The storm's first root cause. g0's pod is evicted and re-created (Pending); the new pod is evicted too while
    # g0 is still recorded (AlreadyDisrupted), then becomes Ready before the API server acts. Released on that view,
    # g0 would count as ready although its pod is going, and g1 could be evicted as well. Recorded with the entry,
    # the new pod holds the entry until it is gone.
    world = three_groups(**({flaw: True} if flaw else {}))
    steps = [*EVICT_G0, ("request", 0, 0), ("commit", 0, 0), ("kubelet", 0, 0), ("wait", 0, 0), ("reap", 0, 0)]
    steps += [("gc", 0, 0), ("request", 1, 0), ("commit", 0, 0)]
    problems = run(world, steps)
    if flaw:
        assert problems == ["after commit: llama/*: 1 available"]
    else:
        assert problems == []
        (entry,) = world.entries.values()
        assert len(entry.granted) == 2 and world.grants == 2


@pytest.mark.parametrize("flaw", ["", "unheld"])
def test_a_record_is_held_while_the_api_server_may_still_act_on_its_grant(flaw: str) -> None:
    # The second: the API server evicts whichever pod has the name when it acts. g0's pod is granted twice (a
    # drain's retry); the first eviction takes it down and g0 is rebuilt, ready, before the second is acted on.
    # Released on that view, g0 would count as ready, g1 could be evicted, and the second eviction then takes
    # g0's new pod. Held for the in-flight bound, the record outlives every eviction it granted.
    world = three_groups(**({flaw: True} if flaw else {}))
    steps = [("request", 0, 0), ("commit", 0, 0), ("request", 0, 0), ("commit", 0, 0), ("act", 0, 0)]
    steps += [("reap", 0, 0), ("rebuild", 0, 0), ("kubelet", 0, 0), ("gc", 0, 0), ("request", 1, 0), ("commit", 0, 0)]
    problems = run(world, steps)
    assert problems == (["after commit: llama/*: 1 available"] if flaw else [])
    assert world.grants == (3 if flaw else 2)


@pytest.mark.parametrize("flaw", ["", "trusting"])
def test_a_lagging_view_never_releases_a_record(flaw: str) -> None:
    # g0's pod is evicted, rebuilt and ready again; the record is released (fresh view); the new pod is evicted
    # too. A reconciler whose view still shows the *first* pod (another UID, not in the new record) sees g0 whole;
    # confirmed on a fresh view (the new pod is still there), the record stays, as the rollout relies on it.
    world = three_groups(**({flaw: True} if flaw else {}))
    steps = [*EVICT_G0, ("kubelet", 0, 0), ("wait", 0, 0), ("wait", 0, 0), ("gc", 0, 0)]
    assert run(world, [*steps, ("request", 0, 0), ("commit", 0, 0)]) == []
    assert len(world.entries) == 1
    assert run(world, [("wait", 0, 0), ("wait", 0, 0), ("gc", 0, 9)]) == []
    assert len(world.entries) == (0 if flaw else 1)
