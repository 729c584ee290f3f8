"""A recording event sink: what unit tests pass where controllers take an :class:`~kthena_py.runtime.events.EventSink`.

Guarantees: every event is kept, in the order recorded, with the involved object's kind, namespace, name and UID
as it was when recorded; nothing is joined or dropped (joining is :class:`~kthena_py.runtime.events.EventRecorder`'s
business, tested on its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kthena_py.runtime.events import EventType

__all__ = ["RecordedEvent", "RecordedEvents"]


@dataclass(frozen=True)
class RecordedEvent:
    """One recorded event."""

    kind: str
    namespace: str
    name: str
    uid: str
    type: EventType
    reason: str
    message: str


@dataclass
class RecordedEvents:
    """An :class:`~kthena_py.runtime.events.EventSink` that keeps what it is given."""

    events: list[RecordedEvent] = field(default_factory=list)

    def event(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str, *, join: bool = True) -> None:
        """Keep one event."""
        md = obj.get("metadata") or {}
        self.events.append(
            RecordedEvent(
                str(obj.get("kind", "")),
                str(md.get("namespace", "")),
                str(md.get("name", "")),
                str(md.get("uid", "")),
                type_,
                reason,
                message,
            )
        )

    def reasons(self) -> list[str]:
        """The reasons recorded, in order."""
        return [e.reason for e in self.events]
