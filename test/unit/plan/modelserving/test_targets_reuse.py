"""The target builder decides each observed group once: reusing the first pass equals deciding it again (hypothesis).

Random fleets (group or role rollouts, surge, partitions, a role added mid-rollout, revisions deleted, random
readiness) are planned step by step; at every step the targets built with the first-pass reuse equal the targets
built with every wanted group decided again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelserving.core import targets
from kthena_py.plan.modelserving.core.state import build_state
from kthena_py.plan.modelserving.core.types import Observed

from .builders import VOLCANO, ms_doc, parse, ready_status, ref_of, role_doc
from .fleet import Fleet

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def decided_again() -> Iterator[None]:
    targets.REUSE_OBSERVED_TARGETS = False
    try:
        yield
    finally:
        targets.REUSE_OBSERVED_TARGETS = True


def both(fleet: Fleet, observed: Observed) -> tuple[targets.Targets, targets.Targets]:
    ms = parse(fleet.doc)
    reused = build_state(ms, ref_of(ms), observed, VOLCANO).targets
    with decided_again():
        again = build_state(ms, ref_of(ms), observed, VOLCANO).targets
    return reused, again


@st.composite
def fleets(draw: st.DrawFn) -> dict[str, Any]:
    role_level = draw(st.booleans())
    replicas = draw(st.integers(1, 4))
    prefill = role_doc("prefill", replicas=draw(st.integers(1, 3)))
    if role_level:
        prefill |= {"maxUnavailable": draw(st.integers(1, 2)), "partition": draw(st.integers(0, 2))}
    doc = ms_doc(prefill, role_doc("decode", workers=draw(st.integers(0, 1))), replicas=replicas)
    if role_level:
        doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    else:
        unavailable = draw(st.integers(0, 2))
        config = {
            "maxUnavailable": unavailable,
            "maxSurge": draw(st.integers(0 if unavailable else 1, 2)),
            "partition": draw(st.integers(0, replicas)),
        }
        doc["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": config}
    return doc


@SETTINGS
@given(
    doc=fleets(),
    change_at=st.integers(0, 6),
    add_role=st.booleans(),
    drop_revisions_at=st.integers(0, 20),
    schedule=st.lists(st.lists(st.booleans(), max_size=10), min_size=1, max_size=18),
)
def test_reusing_the_first_pass_equals_deciding_again(
    doc: dict[str, Any], change_at: int, add_role: bool, drop_revisions_at: int, schedule: list[list[bool]]
) -> None:
    fleet = Fleet(doc)
    for step, chosen in enumerate(schedule):
        if step == change_at:
            fleet.set_image("img:2", role=0)
            if add_role:
                fleet.edit(lambda d: d["spec"]["template"]["roles"].append(role_doc("router")))
        observed = fleet.cluster.observed()
        if step >= drop_revisions_at:
            observed = replace(observed, revisions=())  # every ControllerRevision gone
        reused, again = both(fleet, observed)
        assert reused == again
        fleet.reconcile()
        pending = sorted(n for n, p in fleet.cluster.pods().items() if p["status"].get("phase") != "Running")
        for name, ok in zip(pending, chosen, strict=False):
            if ok:
                fleet.cluster.set_pod_status(name, ready_status(fleet.now))


def test_the_reuse_is_taken_on_a_settled_fleet() -> None:
    """Not vacuous: on a settled fleet every wanted group is its first-pass target (the same object)."""
    fleet = Fleet(ms_doc(role_doc("prefill"), role_doc("decode", workers=1), replicas=3))
    fleet.settle()
    reused, again = both(fleet, fleet.cluster.observed())
    assert reused == again
    assert all(reused.groups[o] is reused.observed[o] for o in reused.groups)
    assert not any(again.groups[o] is again.observed[o] for o in again.groups)


def test_no_reuse_when_a_revision_is_unresolved() -> None:
    fleet = Fleet(ms_doc(role_doc("prefill"), replicas=2))
    fleet.settle()
    fleet.set_image("img:2")
    fleet.reconcile()
    observed = fleet.cluster.observed()
    observed = replace(observed, revisions=())
    reused, again = both(fleet, observed)
    assert reused == again
    assert reused.unresolved
    assert not any(reused.groups[o] is reused.observed.get(o) for o in reused.groups)
