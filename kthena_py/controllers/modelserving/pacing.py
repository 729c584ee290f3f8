"""When a status change that only reports progress is written: a short wait, so that what follows joins it.

While a fleet starts, the ServingGroups of one ModelServing become ready one after the other, usually within a
moment of each other; writing ``availableReplicas`` for each would cost a status write (and its watch event, in
every client watching ModelServings) per group. A change that only reports progress
(:func:`~kthena_py.plan.modelserving.groups.status.progress_only`) therefore waits :data:`PROGRESS_DELAY_SECONDS`
from the first reconcile that saw it, and is then written with whatever has joined it.

Guarantees:

* Nothing else waits: a change that moves a condition's status, ``replicas``, a revision, ``observedGeneration``
  (a new spec is acknowledged at once) or a selector is written by the reconcile that sees it, and it carries the
  progress that was waiting. So ``Available`` turns True as soon as the last group is ready.
* A waiting change is never lost: the reconcile that defers it asks to be run again when it is due
  (:meth:`ProgressPacer.wait`), and that run writes it unless something else wrote meanwhile.
* Only the time the wait began is kept, per ModelServing, in memory: a restarted manager begins the wait again
  (the change is written at most one delay later than it would have been), and a ModelServing whose status
  no longer needs a write, or is gone, leaves the table.
"""

from __future__ import annotations

from kthena_py.runtime.clock import Clock, RealClock

__all__ = ["PROGRESS_DELAY_SECONDS", "ProgressPacer"]

PROGRESS_DELAY_SECONDS = 1.0
"""How long a progress-only status change waits for what follows it."""


class ProgressPacer:
    """The waits of progress-only status changes, per ModelServing (``(namespace, name)``).

    Args:
        delay: Seconds a progress-only change waits (0: written at once).
        clock: Monotonic time source.
    """

    def __init__(self, delay: float = PROGRESS_DELAY_SECONDS, clock: Clock | None = None) -> None:
        self.delay = delay
        self._clock = clock or RealClock()
        self._since: dict[tuple[str, str], float] = {}

    def wait(self, key: tuple[str, str]) -> float | None:
        """Seconds left before the progress-only change of ``key`` is written (``None``: write it now).

        The wait begins at the first call for ``key`` since it was last :meth:`settled`.
        """
        if self.delay <= 0:
            return None
        now = self._clock.now()
        since = self._since.setdefault(key, now)
        left = since + self.delay - now
        return left if left > 0 else None

    def settled(self, key: tuple[str, str]) -> None:
        """``key``'s status was written, needs no write, or the ModelServing is gone: no wait is running."""
        self._since.pop(key, None)

    def __len__(self) -> int:
        return len(self._since)
