"""Which Event writes go out, and in what form: client-go's event correlator, as a pure state machine.

Kthena's Go manager records Events through client-go, whose correlator does two things before anything is sent.
This module does the same, with the same defaults, so a storm about one object costs the API server what it costs
under Kthena:

* **Similar Events are combined.** Writes about one object with the same type and reason but different messages
  are counted per object, type and reason. From the ``max_similar``-th distinct message seen within
  ``similar_window`` seconds (10 within 10 minutes), a write is sent as the one combined Event of that object,
  type and reason, its message prefixed with :data:`COMBINED_PREFIX` (client-go's wording); repeats then raise
  that Event's count. The window restarts when no similar write came for ``similar_window`` seconds.
* **A burst per object, then a slow refill.** Every write that would be sent, combined or not, takes a token from a
  bucket per object and type holding ``burst`` tokens (25) and refilled at ``refill_per_second`` (one every five
  minutes). With no token left, the write is filtered: not sent, and counted by the caller.

Guarantees:

* Pure: no I/O, no clock (``now`` is passed in, in seconds), no asyncio. The same calls give the same verdicts.
* Bounded memory: at most ``max_keys`` objects (4,096, client-go's figure) are remembered by each of the two
  stages; the least recently seen is forgotten first, which only makes the next write about it pass as if new.
* The state is a rate limiter's, not the cluster's: a restart forgets it and lets a fresh burst through, as
  client-go does. Nothing a reconcile decides depends on it.

Differences from client-go:

* Once the threshold is reached, the least recently seen distinct message is forgotten; client-go forgets an
  arbitrary one. Here the same writes always get the same verdicts.
* The combined Event is named from the object, type and reason, not from the time, so a later storm raises the
  same Event's count (the recorder names Events without memory, see :mod:`kthena_py.runtime.events`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

__all__ = [
    "COMBINED_PREFIX",
    "DEFAULT_BURST",
    "DEFAULT_MAX_KEYS",
    "DEFAULT_MAX_SIMILAR",
    "DEFAULT_REFILL_PER_SECOND",
    "DEFAULT_SIMILAR_WINDOW",
    "EventCorrelator",
    "ObjectKey",
    "Recent",
    "Verdict",
]

COMBINED_PREFIX: Final = "(combined from similar events): "
"""How a combined Event's message starts (client-go's wording, which tools may match)."""
DEFAULT_MAX_SIMILAR: Final = 10
"""Distinct messages per object, type and reason within the window from which writes are combined."""
DEFAULT_SIMILAR_WINDOW: Final = 600.0
"""Seconds without a similar write after which the count of distinct messages restarts."""
DEFAULT_BURST: Final = 25
"""Writes per object and type let through at once."""
DEFAULT_REFILL_PER_SECOND: Final = 1.0 / 300.0
"""Tokens a bucket regains a second: one write every five minutes once the burst is spent."""
DEFAULT_MAX_KEYS: Final = 4096
"""Objects each stage remembers."""

ObjectKey = tuple[str, ...]
"""What names the involved object: e.g. apiVersion, kind, namespace, name, UID."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one write: send it (with ``message``, ``combined`` when it is the combined Event) or not."""

    send: bool
    message: str
    combined: bool = False


class Recent(Generic[K, V]):
    """A mapping that keeps at most ``size`` keys, forgetting the least recently used."""

    def __init__(self, size: int) -> None:
        self._size = max(1, size)
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or None."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Set ``key`` (the most recently used), forgetting the least recently used beyond the size."""
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def pop(self, key: K) -> V | None:
        """Forget ``key``; its value, or None."""
        return self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(slots=True)
class _Similar:
    """Distinct messages seen about one object, type and reason (oldest first), and when the last came."""

    messages: dict[str, None] = field(default_factory=dict)
    last: float = 0.0


@dataclass(slots=True)
class _Bucket:
    """A token bucket: tokens left at ``at``."""

    tokens: float
    at: float


class EventCorrelator:
    """Decides, write by write, what client-go's correlator would do (see the module docstring).

    Args:
        max_similar: Distinct messages within the window from which writes are combined (0: never combine).
        similar_window: Seconds without a similar write after which the count restarts.
        burst: Tokens per object and type (0: never filter).
        refill_per_second: Tokens regained a second.
        max_keys: Objects remembered by each stage.
    """

    def __init__(
        self,
        *,
        max_similar: int = DEFAULT_MAX_SIMILAR,
        similar_window: float = DEFAULT_SIMILAR_WINDOW,
        burst: int = DEFAULT_BURST,
        refill_per_second: float = DEFAULT_REFILL_PER_SECOND,
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        self._max_similar = max_similar
        self._window = similar_window
        self._burst = burst
        self._refill = refill_per_second
        self._similar: Recent[tuple[ObjectKey, str, str], _Similar] = Recent(max_keys)
        self._buckets: Recent[tuple[ObjectKey, str], _Bucket] = Recent(max_keys)

    def correlate(self, obj: ObjectKey, type_: str, reason: str, message: str, now: float) -> Verdict:
        """The verdict on one write about ``obj`` at ``now`` (seconds, any monotonic origin); updates the state."""
        combined = self._combine(obj, type_, reason, message, now)
        text = COMBINED_PREFIX + message if combined else message
        return Verdict(send=self._take_token(obj, type_, now), message=text, combined=combined)

    def _combine(self, obj: ObjectKey, type_: str, reason: str, message: str, now: float) -> bool:
        if self._max_similar <= 0:
            return False
        key = (obj, type_, reason)
        record = self._similar.get(key)
        if record is None or now - record.last > self._window:
            record = _Similar()
        record.messages.pop(message, None)
        record.messages[message] = None
        record.last = now
        self._similar.put(key, record)
        if len(record.messages) < self._max_similar:
            return False
        del record.messages[next(iter(record.messages))]
        return True

    def _take_token(self, obj: ObjectKey, type_: str, now: float) -> bool:
        if self._burst <= 0:
            return True
        key = (obj, type_)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(tokens=float(self._burst), at=now)
        else:
            bucket.tokens = min(float(self._burst), bucket.tokens + max(0.0, now - bucket.at) * self._refill)
            bucket.at = max(bucket.at, now)
        self._buckets.put(key, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True
