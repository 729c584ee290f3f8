"""An in-memory Kubernetes API server and event sink for unit tests: the other side of the cluster seam.

Guarantees: :class:`FakeKube` satisfies :class:`~kthena_py.kube.api.WatchApi` (so it is accepted wherever the
controllers take a client) with the API semantics its module lists, and feeds real
:class:`~kthena_py.runtime.cache.SharedCache` stores as watches would; :class:`RecordedEvents` satisfies
:class:`~kthena_py.runtime.events.EventSink` and keeps every event in order. Nothing here is imported by the
manager.
"""

from typing import TYPE_CHECKING

from .events import RecordedEvent, RecordedEvents
from .server import Call, FakeKube, Interceptor, Verb

if TYPE_CHECKING:  # mypy --strict proves the fakes fit the seam
    from kthena_py.kube.api import WatchApi
    from kthena_py.runtime.events import EventSink

    _api: WatchApi = FakeKube()
    _sink: EventSink = RecordedEvents()

__all__ = ["Call", "FakeKube", "Interceptor", "RecordedEvent", "RecordedEvents", "Verb"]
