"""The wake-up guard: a target raised from zero is not sent back to zero at once.

The activator (``kthena-py activator``) holds the first request for a ModelServing at zero replicas and writes
its scale subresource 0 -> 1 itself. The autoscaler sees that count at its next pass, but its metrics may not
yet show the held request (Prometheus scrapes the activator every scrape interval; a pod metric has no pod to
read). Without a guard, a policy whose metric reads zero would scale the target back to zero while the request
waits, and the two writers would fight.

Guarantees (pure, no clock: ``now`` is passed in):

* A target is *woken* when the last replica count the history applied is 0 and ``current`` is above 0; the
  wake time is the first pass that saw it (the first history change point after the last 0).
* Within ``guard`` seconds of the wake time, :func:`guard_zero` turns a decision of 0 into 1 (the smallest
  count that keeps the woken pod). Any other decision is returned unchanged, so demand still scales up and a
  scale-down to a count above zero is not affected; bounds still win (``maxReplicas: 0`` is never guarded).
* A history that never applied 0 (or lost it: a restart, or more than one behaviour horizon ago) never
  guards.
* The rule does not ask who raised the target: the activator, a user, or this autoscaler itself (its own
  recommendation). In the last case it rarely changes anything: the stable window that raised the target still
  averages above zero for most of the guard.
"""

from __future__ import annotations

from kthena_py.plan.autoscaling.window import ScalingHistory

__all__ = ["guard_zero", "woken_at"]


def woken_at(history: ScalingHistory, current: int, now: float) -> float | None:
    """Return when the target was raised from zero by someone else (``None``: it was not).

    Args:
        history: The scaling history before this pass's record.
        current: The target's current replicas.
        now: Time of this pass (the wake time when this pass is the first to see it).
    """
    if current <= 0:
        return None
    zeros = [i for i, (_, replicas) in enumerate(history.replicas) if replicas == 0]
    if not zeros:
        return None
    last_zero = zeros[-1]
    if last_zero == len(history.replicas) - 1:
        return now
    return history.replicas[last_zero + 1][0]


def guard_zero(
    desired: int, history: ScalingHistory, current: int, now: float, guard: float, max_replicas: int
) -> tuple[int, str | None]:
    """Keep a target woken from zero at one replica for ``guard`` seconds after its wake-up.

    Args:
        desired: The decision so far (after behaviour and bounds).
        history: The scaling history before this pass's record.
        current: The target's current replicas.
        now: Time of this pass.
        guard: Seconds a woken target may not go back to zero.
        max_replicas: The upper bound (below 1: never guard).

    Returns:
        The decision and, when the guard changed it, the reason.
    """
    if desired != 0 or max_replicas < 1:
        return desired, None
    woken = woken_at(history, current, now)
    if woken is None or now - woken >= guard:
        return desired, None
    return 1, (
        f"woken from zero at {woken:g} (by the activator or a user): no scale to zero before {woken + guard:g}, keep 1"
    )
