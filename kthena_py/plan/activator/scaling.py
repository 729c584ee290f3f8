"""Whether the activator writes ``spec.replicas``: only 0 -> 1, never anything else.

Guarantees: :func:`needs_wake` is true only for ``replicas == 0`` of an opted-in target; after a conflict the
writer re-reads and asks again, so a target another activator (or anyone) already scaled is never written.
"""

from __future__ import annotations

__all__ = ["WAKE_REPLICAS", "needs_wake"]

WAKE_REPLICAS = 1
"""What the activator scales a target at zero to (demand beyond one replica is the autoscaler's job)."""


def needs_wake(replicas: int, scale_from_zero: bool) -> bool:
    """Whether a target with ``replicas`` wanted should be scaled to :data:`WAKE_REPLICAS` by the activator."""
    return scale_from_zero and replicas == 0
