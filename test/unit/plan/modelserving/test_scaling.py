"""Ordinal planning: fill lowest first, never renumber, scale-down preference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelserving.core.groups import deletion_cost
from kthena_py.plan.modelserving.core.scaling import OrdinalPlan, UnitScore, missing_ordinals, plan_ordinals

SETTINGS = settings(max_examples=200, deadline=None, database=None)


def _u(ordinal: int, ready: bool = True, cost: int = 0) -> UnitScore:
    return UnitScore(ordinal, ready, cost)


@pytest.mark.parametrize(
    ("live", "replicas", "expected"),
    [
        ([], 3, OrdinalPlan((), (0, 1, 2), ())),
        ([_u(0), _u(2)], 3, OrdinalPlan((0, 2), (1,), ())),
        ([_u(0), _u(5)], 3, OrdinalPlan((0, 5), (1,), ())),  # never renumbered
        ([_u(1)], 2, OrdinalPlan((1,), (0,), ())),
        ([_u(0), _u(1), _u(2)], 1, OrdinalPlan((0,), (), (2, 1))),  # highest ordinal first
        ([_u(0), _u(1, ready=False), _u(2)], 2, OrdinalPlan((0, 2), (), (1,))),  # not-ready first
        ([_u(0, cost=5), _u(1, cost=10), _u(2, cost=7)], 2, OrdinalPlan((1, 2), (), (0,))),  # cheapest first
        ([_u(0, cost=-1), _u(1), _u(2, ready=False, cost=100)], 1, OrdinalPlan((1,), (), (2, 0))),
        ([_u(0), _u(1)], 0, OrdinalPlan((), (), (1, 0))),
        ([_u(0)], -1, OrdinalPlan((), (), (0,))),
    ],
)
def test_plan_ordinals(live: list[UnitScore], replicas: int, expected: OrdinalPlan) -> None:
    assert plan_ordinals(live, replicas) == expected


def test_missing_ordinals() -> None:
    assert missing_ordinals({0, 2, 3}, 3) == [1, 4, 5]
    assert missing_ordinals(set(), 0) == []


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, 0),
        ({}, 0),
        ({"controller.kubernetes.io/pod-deletion-cost": "100"}, 100),
        ({"controller.kubernetes.io/pod-deletion-cost": "-5"}, -5),
        ({"controller.kubernetes.io/pod-deletion-cost": "1.5"}, 0),
        ({"controller.kubernetes.io/pod-deletion-cost": "abc"}, 0),
        ({"controller.kubernetes.io/pod-deletion-cost": ""}, 0),
    ],
)
def test_deletion_cost(annotations: dict[str, str] | None, expected: int) -> None:
    assert deletion_cost(annotations) == expected


_UNITS = st.lists(
    st.tuples(st.integers(0, 20), st.booleans(), st.integers(-3, 3)), unique_by=lambda t: t[0], max_size=12
).map(lambda items: [UnitScore(o, r, c) for o, r, c in items])


@SETTINGS
@given(live=_UNITS, replicas=st.integers(0, 15))
def test_plan_ordinals_properties(live: list[UnitScore], replicas: int) -> None:
    plan = plan_ordinals(live, replicas)
    ordinals = {u.ordinal for u in live}
    assert len(plan.desired) == replicas
    assert set(plan.keep) | set(plan.remove) == ordinals
    assert not set(plan.keep) & set(plan.remove)
    assert not set(plan.create) & ordinals
    # scale-up fills the lowest free ordinals
    if plan.create:
        free = [o for o in range(max(plan.create) + 1) if o not in ordinals]
        assert list(plan.create) == free[: len(plan.create)]
    # a ready unit is never removed while a not-ready one is kept
    by_ordinal = {u.ordinal: u for u in live}
    if any(by_ordinal[o].ready for o in plan.remove):
        assert all(by_ordinal[o].ready for o in plan.keep)
    # among equally ready units, removed ones never cost more than kept ones
    for removed in plan.remove:
        for kept in plan.keep:
            if by_ordinal[removed].ready == by_ordinal[kept].ready:
                assert by_ordinal[removed].cost <= by_ordinal[kept].cost
