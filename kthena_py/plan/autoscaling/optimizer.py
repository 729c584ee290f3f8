"""Heterogeneous target: split a replica total over ModelServings of different cost.

Definitions, for ``params`` (cost ``c_i``, bounds ``lo_i..hi_i``) and a requested ``total``:

1. ``K = clamp(total, sum(lo), sum(hi))``; ``C*`` = the least cost ``sum(c_i * n_i)`` of any integer allocation
   with ``lo <= n <= hi`` and ``sum(n) = K`` (filling the cheapest replicas first is exactly optimal).
2. Budget ``B = max(P, 100) / 100 * C*`` with ``P = costExpansionRatePercent`` (default 200): the API's promise
   ("200 allows the optimizer to spend up to 2x the minimal cost").
3. ``g`` = Kthena's block-greedy allocation for ``K`` (:func:`kthena_greedy`, bit-for-bit Kthena's block sequence).
4. :func:`optimize` returns the allocation with sum ``K``, within bounds and with cost ``<= B`` that is closest to
   ``g`` (least total absolute difference); ties go to the cheaper allocation, then to earlier params.

Guarantees:

* ``P <= 100`` gives a cost-optimal allocation equal to Kthena's; whenever Kthena's allocation keeps the promise
  (cost ``<= B``) it is returned unchanged; otherwise the nearest allocation keeping it.
* Exact: costs are fractions (integers, decimals or floats read as decimals), the budget test is exact.
* Fast: :func:`optimize` needs ``O(p log p)`` arithmetic beyond building ``g`` (no solver). It moves replicas
  from the most expensive to the cheapest params one block at a time: with ``m`` replicas moved (distance
  ``2m``) the largest possible saving is "the ``m`` most expensive removable replicas minus the ``m`` cheapest
  addable ones"; the least ``m`` whose saving reaches ``cost(g) - B`` is the optimum, and pairing in cost order
  attains it (a pair with zero saving is never needed, so no param both gives and receives).
* :func:`optimize_milp` solves the same problem with ``scipy.optimize.milp`` (L1 distance linearised with
  ``d_i >= |n_i - g_i|``); it is an independent cross-check and a fallback-free alternative: its answer is
  verified exactly and ``None`` is returned when the solver fails or the verification does. Floating point
  cannot hold budgets above 2**53 exactly (``int32`` costs times 1e6 replicas times 32 params), which is why
  the exact method is the default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

from kthena_py.plan.autoscaling.spec import CostParam

__all__ = [
    "allocation_cost",
    "budget",
    "clamp_total",
    "kthena_blocks",
    "kthena_greedy",
    "min_cost",
    "min_cost_allocation",
    "optimize",
    "optimize_milp",
]


def _check(params: Sequence[CostParam]) -> None:
    if not params:
        raise ValueError("at least one param is required")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"param names must be unique, got {names}")


def clamp_total(params: Sequence[CostParam], total: int) -> int:
    """Return ``clamp(total, sum(minReplicas), sum(maxReplicas))``."""
    low = sum(p.min_replicas for p in params)
    high = sum(p.max_replicas for p in params)
    return min(max(total, low), high)


def allocation_cost(params: Sequence[CostParam], allocation: Mapping[str, int]) -> Fraction:
    """Exact cost ``sum(cost_i * replicas_i)`` of an allocation."""
    return sum((p.exact_cost * allocation[p.name] for p in params), Fraction(0))


def _scaled_costs(params: Sequence[CostParam]) -> list[int]:
    """Costs times the lcm of their denominators: integers that order exactly like the costs (and sort fast)."""
    costs = [p.exact_cost for p in params]
    scale = math.lcm(*(c.denominator for c in costs))
    return [int(c * scale) for c in costs]


def _fill(params: Sequence[CostParam], order: Sequence[tuple[int, int]], total: int) -> dict[str, int]:
    """Start at the minimums and hand out ``(param index, size)`` blocks in order until ``total`` is reached."""
    result = {p.name: p.min_replicas for p in params}
    left = clamp_total(params, total) - sum(p.min_replicas for p in params)
    for index, size in order:
        if left <= 0:
            break
        slot = min(left, size)
        result[params[index].name] += slot
        left -= slot
    return result


def min_cost_allocation(params: Sequence[CostParam], total: int) -> dict[str, int]:
    """A cost-optimal allocation of ``clamp_total(total)``: cheapest params first, ties by param order."""
    _check(params)
    costs = _scaled_costs(params)
    order = sorted(range(len(params)), key=lambda i: (costs[i], i))
    return _fill(params, [(i, params[i].max_replicas - params[i].min_replicas) for i in order], total)


def min_cost(params: Sequence[CostParam], total: int) -> Fraction:
    """``C*``: the least cost of any allocation of ``clamp_total(total)`` replicas within bounds."""
    return allocation_cost(params, min_cost_allocation(params, total))


def budget(params: Sequence[CostParam], total: int, cost_expansion_rate_percent: int = 200) -> Fraction:
    """``B = max(P, 100) / 100 * C*``."""
    return Fraction(max(cost_expansion_rate_percent, 100), 100) * min_cost(params, total)


def kthena_blocks(params: Sequence[CostParam], cost_expansion_rate_percent: int = 200) -> list[tuple[int, int]]:
    """Kthena's scaling order: ``(param index, block size)`` sorted by ``(block cost, param index)``.

    With ``P == 100`` each param is one block costed at its unit cost; otherwise block sizes grow by ``P/100``
    from 1 (truncated, at least 1, the last one cut to the remainder) and a block costs ``cost * size``.
    """
    if cost_expansion_rate_percent < 0:
        raise ValueError("costExpansionRatePercent must be >= 0")
    keyed: list[tuple[int, int, int]] = []
    costs = _scaled_costs(params)
    for index, param in enumerate(params):
        span = param.max_replicas - param.min_replicas
        if span <= 0:
            continue
        if cost_expansion_rate_percent == 100:
            keyed.append((costs[index], index, span))
            continue
        length = 1.0
        while span > 0:
            size = min(span, max(int(length), 1))
            keyed.append((costs[index] * size, index, size))
            span -= size
            length = length * cost_expansion_rate_percent / 100
    keyed.sort(key=lambda block: (block[0], block[1]))  # equal keys only within one param: order irrelevant
    return [(index, size) for _, index, size in keyed]


def kthena_greedy(params: Sequence[CostParam], total: int, cost_expansion_rate_percent: int = 200) -> dict[str, int]:
    """Kthena's ``RestoreReplicasOfEachBackend``: fill Kthena's block sequence from the minimums.

    Args:
        params: The params, in spec order.
        total: Requested total (clamped to the sum of bounds).
        cost_expansion_rate_percent: ``P``.

    Returns:
        Replicas per param name.
    """
    _check(params)
    if cost_expansion_rate_percent < 100:
        # Unit blocks costed at the unit cost: the same order as P == 100, without a million blocks.
        return min_cost_allocation(params, total)
    return _fill(params, kthena_blocks(params, cost_expansion_rate_percent), total)


def optimize(params: Sequence[CostParam], total: int, cost_expansion_rate_percent: int = 200) -> dict[str, int]:
    """The allocation closest to Kthena's that keeps the cost within ``B`` (see the module docstring).

    Args:
        params: The params, in spec order (the order breaks ties).
        total: Requested total replicas (clamped to the sum of bounds).
        cost_expansion_rate_percent: ``P`` (``costExpansionRatePercent``, default 200).

    Returns:
        Replicas per param name.
    """
    greedy = kthena_greedy(params, total, cost_expansion_rate_percent)
    limit = budget(params, total, cost_expansion_rate_percent)
    excess = allocation_cost(params, greedy) - limit
    if excess <= 0:
        return greedy
    costs = [p.exact_cost for p in params]
    counts = [greedy[p.name] for p in params]
    givers = sorted(range(len(params)), key=lambda i: (-costs[i], -i))
    takers = sorted(range(len(params)), key=lambda i: (costs[i], i))
    gi = ti = 0
    while excess > 0:
        while counts[givers[gi]] <= params[givers[gi]].min_replicas:
            gi += 1
        while counts[takers[ti]] >= params[takers[ti]].max_replicas:
            ti += 1
        giver, taker = givers[gi], takers[ti]
        saving = costs[giver] - costs[taker]
        if saving <= 0:  # unreachable: B >= C* means enough positive savings exist
            raise AssertionError("budget unreachable")
        moved = min(
            counts[giver] - params[giver].min_replicas,
            params[taker].max_replicas - counts[taker],
            math.ceil(excess / saving),
        )
        counts[giver] -= moved
        counts[taker] += moved
        excess -= moved * saving
    return {p.name: counts[i] for i, p in enumerate(params)}


def optimize_milp(
    params: Sequence[CostParam], total: int, cost_expansion_rate_percent: int = 200, time_limit: float = 10.0
) -> dict[str, int] | None:
    """Solve :func:`optimize`'s problem with ``scipy.optimize.milp`` (least L1 distance to Kthena's allocation).

    Ties between allocations at the same distance are left to the solver. The answer is verified exactly
    (sum, bounds, cost ``<= B`` in fractions).

    Args:
        params: The params.
        total: Requested total replicas.
        cost_expansion_rate_percent: ``P``.
        time_limit: Solver time limit in seconds.

    Returns:
        Replicas per param name, or ``None`` when the solver fails or its answer does not verify.
    """
    import numpy as np  # only here: numpy and scipy cost ~1 s to import, and only this cross-check needs them
    from scipy.optimize import Bounds, LinearConstraint, milp

    greedy = kthena_greedy(params, total, cost_expansion_rate_percent)
    limit = budget(params, total, cost_expansion_rate_percent)
    size = len(params)
    goal = np.array([greedy[p.name] for p in params], dtype=float)
    low = np.array([p.min_replicas for p in params], dtype=float)
    high = np.array([p.max_replicas for p in params], dtype=float)
    scale = max((p.exact_cost for p in params), default=Fraction(0)) or Fraction(1)
    unit = np.array([float(p.exact_cost / scale) for p in params])
    eye = np.eye(size)
    total_k = float(sum(greedy.values()))
    constraints = [
        LinearConstraint(np.concatenate([np.ones(size), np.zeros(size)])[None, :], total_k, total_k),
        LinearConstraint(np.hstack([-eye, eye]), -goal, np.inf),
        LinearConstraint(np.hstack([eye, eye]), goal, np.inf),
        LinearConstraint(np.concatenate([unit, np.zeros(size)])[None, :], -np.inf, float(limit / scale) * (1 + 1e-12)),
    ]
    result = milp(
        c=np.concatenate([np.zeros(size), np.ones(size)]),
        constraints=constraints,
        integrality=np.concatenate([np.ones(size), np.zeros(size)]),
        bounds=Bounds(np.concatenate([low, np.zeros(size)]), np.concatenate([high, high - low])),
        options={"time_limit": time_limit, "mip_rel_gap": 0.0},
    )
    if result.x is None or not result.success:
        return None
    allocation = {p.name: round(float(result.x[i])) for i, p in enumerate(params)}
    within = all(p.min_replicas <= allocation[p.name] <= p.max_replicas for p in params)
    if not within or sum(allocation.values()) != sum(greedy.values()) or allocation_cost(params, allocation) > limit:
        return None
    return allocation
