"""The reconcile contract: what a reconciler receives and what its outcome means.

A reconciler is *level-based*: it is told only the namespace and name of an object that may need
work (:class:`Request`), never what changed. It reads the current state from the cache and the
cluster and drives the world towards the desired state. Outcomes:

* return ``None`` or ``Result()``: done; the key's backoff is reset (``forget``);
* return ``Result(requeue_after=s)``: done for now, look again after ``s`` seconds (backoff reset);
* either way the outcome *replaces* the look an earlier reconcile of the same key asked for and that still waits
  (a later reconcile read everything the earlier one did, so only its own answer counts): a reconcile must
  return every delay its state still calls for, never count on an earlier one's. A look a watch or a retry
  asked for is never dropped this way;
* return ``Result(settle=f)``: done, but the key is not handed to a worker again until ``f()`` has
  completed (say, until the cache shows this reconcile's writes); the worker is released meanwhile
  and takes other keys, so a wait for the informer never holds one of the ``workers`` slots;
* raise :class:`TerminalError`: logged and counted as an error, **not** retried until the
  object changes again (for problems only the user can fix, e.g. invalid input);
* raise any other exception: logged, counted, and retried with per-key exponential backoff.

The engine wraps every call, so no exception can kill a worker or the process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, order=True)
class Request:
    """The object to reconcile, by namespace and name (namespace is empty for cluster-scoped kinds)."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


Settle = Callable[[], Awaitable[None]]
"""A wait after a reconcile (:attr:`Result.settle`)."""


@dataclass(frozen=True)
class Result:
    """A successful reconcile's outcome; ``requeue_after`` asks for another look later."""

    requeue_after: float | None = None
    settle: Settle | None = None
    """Awaited after the reconcile with the worker released; until it ends the key stays in progress."""


def result_of(*requeue_after: float | None, settle: Settle | None = None) -> Result | None:
    """The outcome that looks again after the soonest of ``requeue_after`` that is set, and holds for ``settle``.

    ``None`` (plainly done) when no delay is set and there is nothing to settle.
    """
    waits = [t for t in requeue_after if t]
    if not waits and settle is None:
        return None
    return Result(requeue_after=min(waits) if waits else None, settle=settle)


class TerminalError(Exception):
    """A failure that retrying cannot fix; the object is left alone until it changes."""


class Reconciler(Protocol):
    """One concern's reconcile function."""

    async def reconcile(self, request: Request) -> Result | None:
        """Drive the object named by ``request`` towards its desired state."""
        ...


@runtime_checkable
class ForgetsNamespaces(Protocol):
    """A reconciler that keeps something per namespace in memory (metric series, windows) and can drop it."""

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Drop what is kept for the namespaces ``leaving`` accepts: another replica reconciles them now."""
        ...
