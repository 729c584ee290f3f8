"""Ratio repair for disaggregated roles, in exact rational arithmetic.

The constraint ``minRatio <= n / d <= maxRatio`` (``n``: numerator role, ``d``: denominator role) is read with
coupled scale-to-zero: a pair is *feasible* when ``n == d == 0``, or ``n >= 1``, ``d >= 1`` and the ratio holds.

Guarantees:

* Exact: the bounds are :class:`fractions.Fraction` and every comparison is on integers, so prefill 21 with
  ``maxRatio 0.7`` needs decode 30 (Kthena's float ``ceil(21/0.7)`` gives 31).
* Never outside a role's ``[minReplicas, maxReplicas]``.
* If any feasible pair exists inside the behaviour box (``allowed``) the result is feasible and inside it.
  Otherwise, if a feasible pair exists inside the bounds, the result is feasible, leaves the box by as little
  as possible and names the roles in :attr:`RatioResult.limits_exceeded` (the ratio wins, loudly). If no pair
  within the bounds is feasible, the (clamped) input is kept and :attr:`RatioResult.satisfied` is False.
* Scale-up biased and minimal, exactly: among the admissible pairs it picks the least total excursion outside
  the box, then the least total decrease below the desired counts, then the least total increase, then the
  smaller denominator. So the deficient role is raised, and the other is lowered only when the deficient one
  cannot rise far enough (Kthena's rule, without its float rounding and its unnecessary overshoot).
* Cost: one vectorised pass over the candidate denominators (at most ``maxReplicas + 1`` of them); numpy is
  imported on the first call, not with this module (a manager without a ratio constraint never loads it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from kthena_py.plan.autoscaling.spec import RatioConstraint

__all__ = ["RatioResult", "format_ratio", "ratio_feasible", "repair_ratio"]

_Key = tuple[int, int, int, int]
_SAFE = 1 << 62


@dataclass(frozen=True)
class RatioResult:
    """The outcome of a ratio repair.

    Attributes:
        replicas: Final replicas per role.
        adjusted: True when the repair changed a role's count (beyond clamping to its bounds).
        current_ratio: ``n / d`` formatted like Go's ``FormatFloat(x, 'f', -1, 64)`` (``""``: no constraint or
            ``d == 0``).
        satisfied: False when no pair within the bounds satisfies the constraint.
        limits_exceeded: Roles whose final count lies outside the behaviour box.
        reasons: Human-readable explanations.
    """

    replicas: Mapping[str, int]
    adjusted: bool
    current_ratio: str
    satisfied: bool
    limits_exceeded: tuple[str, ...]
    reasons: tuple[str, ...]


def format_ratio(numerator: int, denominator: int) -> str:
    """Format ``numerator / denominator`` as the shortest decimal, never in exponent form (``""`` if d == 0)."""
    if denominator == 0:
        return ""
    import numpy as np

    return str(np.format_float_positional(numerator / denominator, trim="-"))


def ratio_feasible(n: int, d: int, constraint: RatioConstraint) -> bool:
    """Return True when ``(n, d)`` satisfies the constraint (coupled scale-to-zero)."""
    if n == 0 and d == 0:
        return True
    if n < 1 or d < 1:
        return False
    return constraint.min_ratio * d <= n <= constraint.max_ratio * d


def _dist(x: int, box: tuple[int, int]) -> int:
    return max(box[0] - x, 0, x - box[1])


def _key(n: int, d: int, n0: int, d0: int, box_n: tuple[int, int], box_d: tuple[int, int]) -> _Key:
    viol = _dist(n, box_n) + _dist(d, box_d)
    dec = max(n0 - n, 0) + max(d0 - d, 0)
    inc = max(n - n0, 0) + max(d - d0, 0)
    return (viol, dec, inc, d)


def _search(
    n0: int,
    d0: int,
    region_n: tuple[int, int],
    region_d: tuple[int, int],
    box_n: tuple[int, int],
    box_d: tuple[int, int],
    constraint: RatioConstraint,
) -> tuple[int, int] | None:
    """Best feasible pair in the region (lexicographic key of :func:`_key`); ``n0`` must lie in ``box_n``."""
    alpha, beta = constraint.min_ratio, constraint.max_ratio
    best: tuple[_Key, tuple[int, int]] | None = None
    if region_n[0] == 0 and region_d[0] == 0:
        best = (_key(0, 0, n0, d0, box_n, box_d), (0, 0))
    n_low, n_high = max(region_n[0], 1), region_n[1]
    d_low = max(region_d[0], 1, math.ceil(n_low / beta))
    d_high = region_d[1] if alpha == 0 else min(region_d[1], math.floor(n_high / alpha))
    if n_low > n_high or d_low > d_high:
        return None if best is None else best[1]
    found = _scan(n0, d0, (n_low, n_high), (d_low, d_high), box_n, box_d, alpha, beta)
    if found is not None and (best is None or found[0] < best[0]):
        best = found
    return None if best is None else best[1]


def _scan(
    n0: int,
    d0: int,
    n_range: tuple[int, int],
    d_range: tuple[int, int],
    box_n: tuple[int, int],
    box_d: tuple[int, int],
    alpha: Fraction,
    beta: Fraction,
) -> tuple[_Key, tuple[int, int]] | None:
    d_low, d_high = d_range
    if max(alpha.numerator, beta.numerator) * d_high >= _SAFE:
        return _scan_slow(n0, d0, n_range, d_range, box_n, box_d, alpha, beta)
    import numpy as np

    d = np.arange(d_low, d_high + 1, dtype=np.int64)
    low = np.maximum(-((-alpha.numerator * d) // alpha.denominator), n_range[0])
    high = np.minimum((beta.numerator * d) // beta.denominator, n_range[1])
    ok = low <= high
    if not ok.any():
        return None
    d, low, high = d[ok], low[ok], high[ok]
    n = np.clip(n0, low, high)
    viol = np.maximum(np.maximum(box_n[0] - n, n - box_n[1]), 0) + np.maximum(np.maximum(box_d[0] - d, d - box_d[1]), 0)
    dec = np.maximum(n0 - n, 0) + np.maximum(d0 - d, 0)
    inc = np.maximum(n - n0, 0) + np.maximum(d - d0, 0)
    index = np.arange(len(d))
    for column in (viol, dec, inc):
        values = column[index]
        index = index[values == values.min()]
    i = int(index[0])
    pair = (int(n[i]), int(d[i]))
    return _key(pair[0], pair[1], n0, d0, box_n, box_d), pair


def _scan_slow(
    n0: int,
    d0: int,
    n_range: tuple[int, int],
    d_range: tuple[int, int],
    box_n: tuple[int, int],
    box_d: tuple[int, int],
    alpha: Fraction,
    beta: Fraction,
) -> tuple[_Key, tuple[int, int]] | None:
    """Integer-only scan for ratios whose numerators would overflow 64-bit arithmetic."""
    best: tuple[_Key, tuple[int, int]] | None = None
    for d in range(d_range[0], d_range[1] + 1):
        low = max(math.ceil(alpha * d), n_range[0])
        high = min(math.floor(beta * d), n_range[1])
        if low > high:
            continue
        n = min(max(n0, low), high)
        key = _key(n, d, n0, d0, box_n, box_d)
        if best is None or key < best[0]:
            best = (key, (n, d))
    return best


def _intersect(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    low, high = max(a[0], b[0]), min(a[1], b[1])
    return (low, high) if low <= high else None


def repair_ratio(
    desired: Mapping[str, int],
    bounds: Mapping[str, tuple[int, int]],
    constraint: RatioConstraint | None = None,
    allowed: Mapping[str, tuple[int, int]] | None = None,
) -> RatioResult:
    """Clamp every role to its bounds and enforce the ratio constraint.

    Args:
        desired: Replicas per role after behaviour correction.
        bounds: ``(minReplicas, maxReplicas)`` per role.
        constraint: The ratio constraint (``None``: only clamp).
        allowed: The behaviour box per role (:attr:`Decision.allowed`); ``None``: the bounds.

    Returns:
        The repaired replicas.

    Raises:
        ValueError: If a role of the constraint has no desired count or no bounds.
    """
    clamped = {role: min(max(value, bounds[role][0]), bounds[role][1]) for role, value in desired.items()}
    if constraint is None:
        return RatioResult(clamped, False, "", True, (), ())
    num, den = constraint.numerator_role, constraint.denominator_role
    for role in (num, den):
        if role not in clamped or role not in bounds:
            raise ValueError(f"ratio role {role} not found")
    boxes = {
        role: _intersect(bounds[role], (allowed or bounds).get(role, bounds[role])) or bounds[role]
        for role in (num, den)
    }
    n0 = min(max(clamped[num], boxes[num][0]), boxes[num][1])
    d0 = min(max(clamped[den], boxes[den][0]), boxes[den][1])
    low, high = f"{float(constraint.min_ratio):g}", f"{float(constraint.max_ratio):g}"
    reasons = []
    if (n0, d0) != (clamped[num], clamped[den]):
        reasons.append(f"{num}/{den} {clamped[num]}/{clamped[den]} clamped to the behaviour limits: {n0}/{d0}")
    if ratio_feasible(n0, d0, constraint):
        final = {**clamped, num: n0, den: d0}
        return RatioResult(final, False, format_ratio(n0, d0), True, (), tuple(reasons))
    reasons.append(f"{num}/{den} = {n0}/{d0} outside [{low}, {high}]")
    pair = _search(n0, d0, boxes[num], boxes[den], boxes[num], boxes[den], constraint)
    exceeded: tuple[str, ...] = ()
    if pair is None:
        pair = _search(n0, d0, bounds[num], bounds[den], boxes[num], boxes[den], constraint)
        if pair is None:
            reasons.append(f"no {num}/{den} pair within the replica bounds satisfies the ratio: kept {n0}/{d0}")
            final = {**clamped, num: n0, den: d0}
            return RatioResult(final, False, format_ratio(n0, d0), False, (), tuple(reasons))
        exceeded = tuple(role for role, value in ((num, pair[0]), (den, pair[1])) if _dist(value, boxes[role]) > 0)
        reasons.append(f"the ratio cannot hold within the behaviour limits: exceeding them for {', '.join(exceeded)}")
    reasons.append(f"ratio repair: {num} {n0} -> {pair[0]}, {den} {d0} -> {pair[1]}")
    final = {**clamped, num: pair[0], den: pair[1]}
    return RatioResult(final, True, format_ratio(*pair), True, exceeded, tuple(reasons))
