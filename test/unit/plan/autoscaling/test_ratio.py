"""Ratio repair (exact) and the disaggregated pass.

Kthena conformance (reference §3, ``disaggregated_ratio_test.go`` and the scaler/controller vectors): all
ratio vectors hold, including ``ratioAdjusted`` and ``currentRatio``; so do the metric-inheritance vectors,
the fixed-role vectors and ``TestDoDisaggregatedScale_RatioRaisesDecode``.

Deliberate differences (reference §7.8, §7.9):

* exact arithmetic: prefill 21 with ``maxRatio 0.7`` needs decode 30 (Kthena 31); decode 50 with
  ``minRatio 1.1`` needs prefill 55 (Kthena 56);
* the repair sees each role's behaviour box; it stays inside when it can and reports the roles whose limits it
  had to exceed otherwise (Kthena ignores the limits silently);
* the role history records the count actually applied (Kthena records the pre-ratio value);
* a role without data holds its count while the others still scale (Kthena abandons the pass).
"""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.plan.autoscaling import (
    Behavior,
    ExternalSample,
    MetricTarget,
    PodSample,
    RatioConstraint,
    RoleSpec,
    ScaleUpPolicy,
    StablePolicy,
    decide_disaggregated,
    format_ratio,
    ratio_feasible,
    repair_ratio,
    role_metrics,
)

PD = RatioConstraint("prefill", "decode", "0.25", 1)
DEFAULT_BOUNDS = {"prefill": (0, 8), "decode": (0, 16)}


@pytest.mark.parametrize(
    ("given_pair", "bounds", "constraint", "expected", "adjusted", "ratio"),
    [
        ((2, 4), DEFAULT_BOUNDS, PD, (2, 4), False, "0.5"),
        ((1, 8), DEFAULT_BOUNDS, PD, (2, 8), True, "0.25"),
        ((6, 2), DEFAULT_BOUNDS, PD, (6, 6), True, "1"),
        ((2, 20), {"prefill": (0, 3), "decode": (0, 20)}, PD, (3, 12), True, "0.25"),
        ((0, 4), DEFAULT_BOUNDS, PD, (1, 4), True, "0.25"),
        ((4, 0), DEFAULT_BOUNDS, PD, (4, 4), True, "1"),
        ((0, 0), DEFAULT_BOUNDS, PD, (0, 0), False, ""),
        ((10, 4), DEFAULT_BOUNDS, None, (8, 4), False, ""),
    ],
)
def test_kthena_ratio_vectors(
    given_pair: tuple[int, int],
    bounds: dict[str, tuple[int, int]],
    constraint: RatioConstraint | None,
    expected: tuple[int, int],
    adjusted: bool,
    ratio: str,
) -> None:
    result = repair_ratio({"prefill": given_pair[0], "decode": given_pair[1]}, bounds, constraint)
    assert (result.replicas["prefill"], result.replicas["decode"]) == expected
    assert (result.adjusted, result.current_ratio, result.satisfied) == (adjusted, ratio, True)


def test_exact_arithmetic() -> None:
    bounds = {"p": (0, 1000), "d": (0, 1000)}
    result = repair_ratio({"p": 21, "d": 10}, bounds, RatioConstraint("p", "d", 0, "0.7"))
    assert dict(result.replicas) == {"p": 21, "d": 30}
    result = repair_ratio({"p": 40, "d": 50}, bounds, RatioConstraint("p", "d", "1.1", 5))
    assert dict(result.replicas) == {"p": 55, "d": 50}


def test_format_ratio_like_go() -> None:
    assert [format_ratio(*p) for p in [(1, 1), (1, 4), (1, 3), (1, 100000), (3, 0)]] == [
        "1",
        "0.25",
        "0.3333333333333333",
        "0.00001",
        "",
    ]


def test_behaviour_box_is_kept_when_possible_and_reported_otherwise() -> None:
    bounds = {"p": (1, 20), "d": (1, 20)}
    one_to_one = RatioConstraint("p", "d", 1, 1)
    kept = repair_ratio({"p": 6, "d": 2}, bounds, one_to_one, {"p": (4, 6), "d": (2, 4)})
    assert dict(kept.replicas) == {"p": 4, "d": 4} and kept.limits_exceeded == ()
    forced = repair_ratio({"p": 10, "d": 2}, bounds, one_to_one, {"p": (10, 10), "d": (2, 4)})
    assert dict(forced.replicas) == {"p": 10, "d": 10}
    assert forced.limits_exceeded == ("d",) and forced.satisfied
    assert any("behaviour limits" in r for r in forced.reasons)


def test_unsatisfiable_constraint_is_reported() -> None:
    result = repair_ratio({"p": 5, "d": 5}, {"p": (5, 5), "d": (1, 2)}, RatioConstraint("p", "d", 0, 1))
    assert not result.satisfied and dict(result.replicas) == {"p": 5, "d": 2}


def test_large_bounds_are_fast_and_exact() -> None:
    bounds = {"p": (1, 1_000_000), "d": (1, 1_000_000)}
    result = repair_ratio({"p": 999_999, "d": 3}, bounds, RatioConstraint("p", "d", "0.7", "0.7"))
    p, d = result.replicas["p"], result.replicas["d"]
    assert ratio_feasible(p, d, RatioConstraint("p", "d", "0.7", "0.7")) and 10 * p == 7 * d


def brute(
    n0: int, d0: int, bounds: dict[str, tuple[int, int]], box: dict[str, tuple[int, int]], c: RatioConstraint
) -> tuple[tuple[int, int, int, int], tuple[int, int]] | None:
    def dist(x: int, b: tuple[int, int]) -> int:
        return max(b[0] - x, 0, x - b[1])

    best = None
    for n, d in itertools.product(range(bounds["n"][0], bounds["n"][1] + 1), range(bounds["d"][0], bounds["d"][1] + 1)):
        if not ratio_feasible(n, d, c):
            continue
        key = (
            dist(n, box["n"]) + dist(d, box["d"]),
            max(n0 - n, 0) + max(d0 - d, 0),
            max(n - n0, 0) + max(d - d0, 0),
            d,
        )
        if best is None or key < best[0]:
            best = (key, (n, d))
    return best


# the last two have 20-digit numerators: they take the integer-only path instead of numpy's int64
ratios = st.sampled_from(
    [
        "0",
        "0.25",
        "0.5",
        "0.7",
        "1",
        "1.1",
        "1.5",
        "2",
        "3",
        "0.333",
        "0.70000000000000000001",
        "1.00000000000000000001",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    st.tuples(st.integers(0, 6), st.integers(0, 12)),
    st.tuples(st.integers(0, 6), st.integers(0, 12)),
    st.integers(0, 12),
    st.integers(0, 12),
    ratios,
    ratios,
    st.tuples(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12), st.integers(0, 12)),
)
def test_repair_is_feasible_and_optimal_whenever_possible(
    n_bounds: tuple[int, int],
    d_bounds: tuple[int, int],
    n0: int,
    d0: int,
    low: str,
    high: str,
    box: tuple[int, int, int, int],
) -> None:
    # Compare exactly: "0.70000000000000000001" and "0.7" are the same float.
    if Decimal(low) > Decimal(high) or Decimal(high) == 0:
        low, high = high, low
    if Decimal(high) == 0:
        return
    constraint = RatioConstraint("n", "d", low, high)
    bounds = {"n": (n_bounds[0], n_bounds[0] + n_bounds[1]), "d": (d_bounds[0], d_bounds[0] + d_bounds[1])}

    def within(b: tuple[int, int], x: int, y: int) -> tuple[int, int]:
        lo, hi = sorted((min(max(x, b[0]), b[1]), min(max(y, b[0]), b[1])))
        return lo, hi

    allowed = {"n": within(bounds["n"], box[0], box[1]), "d": within(bounds["d"], box[2], box[3])}
    desired = {"n": min(max(n0, allowed["n"][0]), allowed["n"][1]), "d": min(max(d0, allowed["d"][0]), allowed["d"][1])}
    result = repair_ratio(desired, bounds, constraint, allowed)
    n, d = result.replicas["n"], result.replicas["d"]
    assert bounds["n"][0] <= n <= bounds["n"][1] and bounds["d"][0] <= d <= bounds["d"][1]
    oracle = brute(desired["n"], desired["d"], bounds, allowed, constraint)
    assert result.satisfied == (oracle is not None)
    if oracle is None:
        assert (n, d) == (desired["n"], desired["d"])
        return
    assert ratio_feasible(n, d, constraint)
    assert (n, d) == oracle[1]
    in_box = allowed["n"][0] <= n <= allowed["n"][1] and allowed["d"][0] <= d <= allowed["d"][1]
    assert in_box == (result.limits_exceeded == ())
    assert result.adjusted == ((n, d) != (desired["n"], desired["d"]))


def test_role_metrics() -> None:
    shared = (MetricTarget("shared_load", 10),)
    assert role_metrics(RoleSpec(0, 8, (MetricTarget("prefill_load", 5),)), shared) == (
        MetricTarget("prefill_load", 5),
    )
    assert role_metrics(RoleSpec(0, 8), shared) == shared
    assert role_metrics(RoleSpec(2, 2), shared) == ()


def test_single_fixed_role() -> None:
    result = decide_disaggregated({"decode": RoleSpec(2, 2)}, {"decode": 5}, 0.0, {}, {})
    (role,) = result.roles
    assert (role.desired, role.final) == (2, 2)
    assert result.ratio is None and result.current_ratio == ""


UNLIMITED = Behavior(ScaleUpPolicy(StablePolicy(period=0)), StablePolicy(period=0))


def test_ratio_raises_decode() -> None:
    roles = {
        "prefill": RoleSpec(1, 8, (MetricTarget("prefill_load", 1),)),
        "decode": RoleSpec(2, 16, (MetricTarget("decode_load", 1),)),
    }
    samples = {
        "prefill": {"prefill_load": PodSample(6.0, reporting=1)},
        "decode": {"decode_load": PodSample(2.0, reporting=2)},
    }
    result = decide_disaggregated(
        roles, {"prefill": 1, "decode": 2}, 0.0, samples, {}, constraint=PD, tolerance_percent=0, behavior=UNLIMITED
    )
    assert result.replicas() == {"decode": 6, "prefill": 6}
    assert result.ratio_adjusted and result.current_ratio == "1"
    assert [(r.name, r.current, r.desired) for r in result.roles] == [("decode", 2, 2), ("prefill", 1, 6)]
    decode = result.roles[0]
    assert decode.state.history.replicas[-1] == (0.0, 6)  # the applied count, not the pre-ratio one


def test_ratio_reports_exceeded_behaviour_limits() -> None:
    roles = {"prefill": RoleSpec(1, 8), "decode": RoleSpec(1, 16)}
    spec_metrics = (MetricTarget("rps", 10),)
    one_step = StablePolicy(instances=1, percent=0, period=60)
    slow = Behavior(ScaleUpPolicy(one_step), one_step)
    samples = {"prefill": {"rps": ExternalSample(60)}, "decode": {"rps": ExternalSample(10)}}
    result = decide_disaggregated(
        roles,
        {"prefill": 6, "decode": 2},
        0.0,
        samples,
        {},
        spec_metrics=spec_metrics,
        constraint=RatioConstraint("prefill", "decode", 0, 1),
        tolerance_percent=0,
        behavior=slow,
    )
    # prefill may only step down to 5 and decode up to 3 this period: no pair with prefill <= decode fits, so
    # the ratio wins with the least excursion (decode 5, two above its limit) and says so.
    assert result.replicas() == {"decode": 5, "prefill": 5}
    assert [r.name for r in result.roles if r.limits_exceeded] == ["decode"]
    assert result.ratio is not None and result.ratio.limits_exceeded == ("decode",)


def test_role_without_data_holds_while_others_scale() -> None:
    roles = {"prefill": RoleSpec(1, 8, (MetricTarget("p", 1),)), "decode": RoleSpec(1, 16, (MetricTarget("d", 1),))}
    samples = {"prefill": {"p": ExternalSample(4)}, "decode": {}}
    result = decide_disaggregated(
        roles, {"prefill": 2, "decode": 3}, 0.0, samples, {}, tolerance_percent=0, behavior=UNLIMITED
    )
    assert result.replicas() == {"decode": 3, "prefill": 4}
