"""Refused child writes of a ModelServing: per-child backoff, Warning events, and a failure condition.

Guarantees:

* **Every refusal is visible.** A child write (create, delete, update of a Pod, Service, PodGroup or
  ControllerRevision) that the API server refuses (any error answer or transport failure; a delete that
  finds nothing, or a precondition that no longer holds, is not a refusal) becomes a
  :class:`ChildFailure`. The applier records it as a Warning Event (``FailedCreate``, ``FailedDelete``,
  ``FailedUpdate``; the message names the child and carries the API server's message), which the
  recorder coalesces, and :class:`FailureCondition` sets a condition on the ModelServing naming every
  refused child and its cause (``ReplicaFailure`` for the ServingGroup reconciler, like a Deployment's;
  ``PodGroupFailure`` for the gang reconciler). A name held by an object of another owner (a predecessor
  of the same name that has not gone yet) is reported the same way, as a create that waits for it.
* **The condition is owned, not shared.** It is written by server-side apply on the status subresource under its own
  field manager (:meth:`~kthena_py.runtime.statuswrite.StatusWriter.apply`; conditions are a list-map keyed by
  ``type``), so it never drops or overwrites what other reconcilers own, and it is written only when it changes: set
  (``True``, the reason of the first failure) on failure, removed once a reconcile of the ModelServing has no
  refused or backing-off child. A ModelServing on which every reconcile fails therefore still gets a status.
* **Bounded retries** (:class:`FailureTracker`): a refused write of a child is not retried before
  ``min(BACKOFF_BASE * 2**(n-1), BACKOFF_MAX)`` seconds (1 s, 2 s, 4 s ... 60 s) have passed since its
  n-th consecutive refusal, whatever triggers the reconcile in between (the deletes the refusal caused,
  pod updates, a resync); a success forgets it. The backoff is per child and per body: a changed body
  (the user fixed the template) is tried at once. Once the cause goes away (a quota freed) the child is
  created at the next step, so within ``BACKOFF_MAX`` seconds at most.
* The tracker is memory for pacing only, lost harmlessly on restart (the first retry then comes at
  once); what the planner needs to know (which children were refused, so that a partly created unit is
  completed rather than torn down) is read back from the condition in the cluster
  (:func:`refused_pods`), joined with the tracker's view.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from kthena_py.kube import ApiError, KubeApi
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.runtime.clock import Clock, RealClock
from kthena_py.runtime.statuswrite import StatusWriter
from kthena_py.vocab.conditions import (
    GANG_FAILURE,
    REASON_FAILED_CREATE,
    REASON_FAILED_DELETE,
    REASON_FAILED_UPDATE,
    REASON_NO_FAILURE,
    REPLICA_FAILURE,
)
from kthena_py.vocab.times import format_time

from ..resources import MODELSERVINGS

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_MAX",
    "GANG_FAILURE",
    "REPLICA_FAILURE",
    "ChildFailure",
    "FailureCondition",
    "FailureTracker",
    "Verb",
    "body_digest",
    "condition_of",
    "refused_pods",
]

BACKOFF_BASE = 1.0
"""Seconds before the first retry of a refused child write."""
BACKOFF_MAX = 60.0
"""Longest wait between two attempts of a refused child write."""
MAX_MESSAGE = 8192
"""Longest condition message; further failures are summarised as ``... and N more``."""

Verb = Literal["create", "delete", "update"]
_REASONS: dict[str, str] = {
    "create": REASON_FAILED_CREATE,
    "delete": REASON_FAILED_DELETE,
    "update": REASON_FAILED_UPDATE,
}
_ORDER = {"create": 0, "delete": 1, "update": 2}
_SEPARATOR = "; "
_REFUSED_POD = re.compile(r"(?:^|; )create Pod (\S+?): ")

log = structlog.get_logger("kthena_py.modelserving.failures")


@dataclass(frozen=True)
class ChildFailure:
    """One refused write of a child object."""

    verb: Verb
    kind: str
    name: str
    cause: str
    """The API server's message (or why the write could not be made)."""

    @classmethod
    def of(cls, verb: Verb, kind: str, name: str, error: ApiError) -> ChildFailure:
        """The failure of ``verb`` on ``kind/name`` answered by ``error``."""
        cause = error.message or str(error)
        if error.status:
            cause = f"{error.status} {error.reason}: {cause}"
        return cls(verb, kind, name, cause)

    @property
    def reason(self) -> str:
        """``FailedCreate``, ``FailedDelete`` or ``FailedUpdate``."""
        return _REASONS[self.verb]

    def describe(self) -> str:
        """``create Pod <name>: <cause>``."""
        return f"{self.verb} {self.kind} {self.name}: {self.cause}"


def body_digest(body: Mapping[str, Any]) -> str:
    """A digest of a request body (a changed body is a new attempt, not a retry)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class _Entry:
    failure: ChildFailure
    digest: str
    refusals: int
    next_at: float


_Key = tuple[str, str, str, str]


class FailureTracker:
    """Per-child exponential backoff of refused writes (see the module docstring).

    Args:
        clock: Monotonic time source.
        base: First delay in seconds.
        max_delay: Longest delay in seconds.
        max_entries: Children remembered at most (the oldest are forgotten first).
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        base: float = BACKOFF_BASE,
        max_delay: float = BACKOFF_MAX,
        max_entries: int = 10_000,
    ) -> None:
        self._clock = clock or RealClock()
        self.base = base
        self.max_delay = max_delay
        self._max_entries = max_entries
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._by_owner: dict[str, set[_Key]] = {}

    def remembers(self, owner: str, verb: Verb, kind: str, name: str) -> bool:
        """Whether a refusal of this write is remembered (only then does :meth:`backing_off` need its digest)."""
        return (owner, verb, kind, name) in self._entries

    def backing_off(self, owner: str, verb: Verb, kind: str, name: str, digest: str = "") -> ChildFailure | None:
        """The last failure of this write if it must not be retried yet, else ``None`` (go ahead)."""
        key = (owner, verb, kind, name)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.digest != digest:
            self._forget(key)  # a different body: a new attempt
            return None
        return entry.failure if self._clock.now() < entry.next_at else None

    def refused(self, owner: str, failure: ChildFailure, digest: str = "") -> float:
        """Count a refusal; return the seconds until the write may be tried again."""
        key = (owner, failure.verb, failure.kind, failure.name)
        entry = self._entries.pop(key, None)
        refusals = entry.refusals + 1 if entry is not None and entry.digest == digest else 1
        delay = float(min(self.base * 2.0 ** min(refusals - 1, 64), self.max_delay))
        self._entries[key] = _Entry(failure, digest, refusals, self._clock.now() + delay)
        self._by_owner.setdefault(owner, set()).add(key)
        while len(self._entries) > self._max_entries:
            self._forget(next(iter(self._entries)))
        return delay

    def succeeded(self, owner: str, verb: Verb, kind: str, name: str) -> None:
        """Forget the backoff of a write that went through."""
        self._forget((owner, verb, kind, name))

    def refusals(self, owner: str, verb: Verb, kind: str, name: str) -> int:
        """Consecutive refusals of this write so far."""
        entry = self._entries.get((owner, verb, kind, name))
        return entry.refusals if entry is not None else 0

    def retry_after(self, owner: str) -> float | None:
        """Seconds until the earliest backing-off write of ``owner`` may be retried (``None``: none waits)."""
        now = self._clock.now()
        waits = [
            self._entries[key].next_at - now
            for key in self._by_owner.get(owner, ())
            if self._entries[key].next_at > now
        ]
        return min(waits) if waits else None

    def refused_names(self, owner: str, kind: str) -> frozenset[str]:
        """Names of ``kind`` children of ``owner`` whose last creation was refused."""
        return frozenset(key[3] for key in self._by_owner.get(owner, ()) if key[1] == "create" and key[2] == kind)

    def forget_owner(self, owner: str) -> None:
        """Drop everything remembered about ``owner`` (it was deleted)."""
        for key in list(self._by_owner.get(owner, ())):
            self._forget(key)

    def _forget(self, key: _Key) -> None:
        if self._entries.pop(key, None) is None:
            return
        keys = self._by_owner.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_owner[key[0]]


def condition_of(obj: KubeObject, type_: str) -> KubeObject | None:
    """The condition ``type_`` of a cached object's status, if any."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == type_:
            return condition
    return None


def refused_pods(obj: KubeObject, type_: str = REPLICA_FAILURE) -> frozenset[str]:
    """Names of the pods whose creation the failure condition of ``obj`` reports as refused."""
    condition = condition_of(obj, type_)
    if condition is None or condition.get("status") != "True":
        return frozenset()
    return frozenset(_REFUSED_POD.findall(str(condition.get("message") or "")))


def _message(failures: Sequence[ChildFailure]) -> str:
    parts: list[str] = []
    length = 0
    ordered = sorted(failures, key=lambda f: (_ORDER[f.verb], f.kind != "Pod", f.kind, f.name))
    for i, failure in enumerate(ordered):
        text = failure.describe()
        if length + len(text) + len(_SEPARATOR) > MAX_MESSAGE:
            parts.append(f"... and {len(ordered) - i} more")
            break
        parts.append(text)
        length += len(text) + len(_SEPARATOR)
    return _SEPARATOR.join(parts)


def _format_time(now: float) -> str:
    return format_time(now)


class FailureCondition:
    """Sets and removes one failure condition type on ModelServings, under its own field manager."""

    def __init__(self, client: KubeApi, type_: str, field_manager: str) -> None:
        self.client = client
        self.type = type_
        self.field_manager = field_manager
        self.writer = StatusWriter(client, MODELSERVINGS, field_manager)

    def desired(self, ms: KubeObject, failures: Sequence[ChildFailure], now: float) -> KubeObject | None:
        """The condition to hold for ``failures`` (``None``: no condition at all)."""
        if not failures:
            return None
        unique = list(dict.fromkeys(failures))
        ordered = sorted(unique, key=lambda f: (_ORDER[f.verb], f.kind != "Pod", f.kind, f.name))
        previous = condition_of(ms, self.type)
        since = (
            previous.get("lastTransitionTime")
            if previous is not None and previous.get("status") == "True" and previous.get("lastTransitionTime")
            else _format_time(now)
        )
        return {
            "type": self.type,
            "status": "True",
            "reason": ordered[0].reason,
            "message": _message(ordered),
            "lastTransitionTime": since,
            "observedGeneration": int(meta(ms).get("generation") or 0),
        }

    async def report(self, ms: KubeObject, failures: Iterable[ChildFailure], now: float) -> KubeObject | None:
        """Make the condition on ``ms`` (as cached) reflect ``failures``; return the written object, if any.

        Raises:
            ApiError: The write failed (other than the ModelServing being gone).
        """
        wanted = self.desired(ms, list(failures), now)
        current = condition_of(ms, self.type)
        if wanted is None and (current is None or current.get("status") != "True"):
            return None
        if wanted is not None and current is not None and _same(wanted, current):
            return None
        written = await self._apply(ms, wanted)
        if wanted is None and written is not None:
            left = condition_of(written, self.type)
            if left is not None and left.get("status") == "True":
                # Another manager co-owns the entry, so dropping ours did not remove it: say it is over.
                resolved = {
                    "type": self.type,
                    "status": "False",
                    "reason": REASON_NO_FAILURE,
                    "message": "no child write is refused",
                    "lastTransitionTime": _format_time(now),
                    "observedGeneration": int(meta(ms).get("generation") or 0),
                }
                written = await self._apply(ms, resolved)
        return written

    async def _apply(self, ms: KubeObject, condition: KubeObject | None) -> KubeObject | None:
        # :meth:`report` decides when a write is due: an empty share gives the condition up, which no cached
        # status can show as held.
        share = {"conditions": [condition] if condition is not None else []}
        try:
            return (await self.writer.apply(ms, share, always=True)).object
        except ApiError as exc:
            log.warning("cannot write the failure condition", condition=self.type, error=str(exc))
            raise


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    keys = ("status", "reason", "message", "observedGeneration")
    return all(a.get(k) == b.get(k) for k in keys)
