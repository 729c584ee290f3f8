"""The ``ModelCached`` condition of ModelServings that name a ModelCache (controller ``modelserving-modelcache``).

The gate itself holds in the planners (every ModelServing reconciler plans from the same observation, which carries
it: :func:`~kthena_py.controllers.servingview.observe`); this reconciler only reports it.

Guarantees:

* **Owned, not shared**: the condition is written by server-side apply on the status subresource under
  :data:`FIELD_MANAGER` (``kthena-py-modelcache-gate``), alone in its share, so the other reconcilers' conditions
  and fields stay theirs; it is written only when it differs from the cached one (a converged cluster costs no
  write). When the annotation goes, the share becomes empty and the condition is removed.
* Decided purely by :func:`~kthena_py.plan.modelserving.groups.modelcached.decide_model_cached`; a transition's
  Event (a Warning when the cache fails or a template conflicts, a Normal when it turns Ready) is recorded only
  after the write that made it succeeded.
* ``kthena_modelserving_model_cache_gated{reason}`` counts the ModelServings whose gate is closed, by reason.
* A refused write is raised, so the controller engine retries it with the key's backoff; a ModelServing without
  the annotation and without the condition costs a dictionary lookup.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Final

import pydantic
import structlog
from prometheus_client import Gauge

from kthena_py.api.common import Condition
from kthena_py.kube import KubeApi
from kthena_py.kube.objects import KubeObject, is_deleting, meta
from kthena_py.plan.modelserving.groups.modelcached import decide_model_cached
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.runtime.statuswrite import StatusWriter
from kthena_py.vocab.conditions import MODEL_CACHED

from ..resources import MODELSERVINGS
from ..servingview import model_cache_gate
from .failures import condition_of

__all__ = ["FIELD_MANAGER", "GATED", "ModelCacheGateReconciler"]

FIELD_MANAGER = "kthena-py-modelcache-gate"

GATED: Final = Gauge(
    "kthena_modelserving_model_cache_gated",
    "ModelServings whose pods wait for their ModelCache (the serving gate is closed), by the ModelCached reason.",
    ("reason",),
    registry=REGISTRY,
)

log = structlog.get_logger("kthena_py.modelserving.modelcache")


class _GatedSeries:
    """The closed gates by ModelServing key, exported as counts per reason (a series at 0 is removed)."""

    def __init__(self) -> None:
        self._reasons: dict[tuple[str, str], str] = {}

    def set(self, key: tuple[str, str], reason: str | None) -> None:
        old = self._reasons.pop(key, None)
        if reason is not None:
            self._reasons[key] = reason
        for changed in {r for r in (old, reason) if r is not None}:
            count = sum(1 for r in self._reasons.values() if r == changed)
            if count:
                GATED.labels(changed).set(count)
            else:
                with contextlib.suppress(KeyError):
                    GATED.remove(changed)

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        for key in [key for key in self._reasons if leaving(key[0])]:
            self.set(key, None)


class ModelCacheGateReconciler:
    """Keeps the ``ModelCached`` condition of one ModelServing in line with its ModelCache."""

    def __init__(
        self, client: KubeApi, cache: SharedCache, recorder: EventSink, *, wall_clock: Callable[[], float] = time.time
    ) -> None:
        self.cache = cache
        self.recorder = recorder
        self.writer = StatusWriter(client, MODELSERVINGS, FIELD_MANAGER)
        self._now = wall_clock
        self.series = _GatedSeries()

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Another replica reconciles the namespaces ``leaving`` accepts: drop what is kept for them here."""
        self.series.forget_namespaces(leaving)

    async def reconcile(self, request: Request) -> Result | None:
        """Write the condition of one ModelServing (or remove it when the annotation went)."""
        key = (request.namespace, request.name)
        obj = self.cache.get(MODELSERVINGS, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            self.series.set(key, None)
            return None
        try:
            gate = model_cache_gate(self.cache, obj)
        except pydantic.ValidationError:
            return None  # reported by the ServingGroup reconciler
        previous = condition_of(obj, MODEL_CACHED)
        if gate is None:
            self.series.set(key, None)
            if previous is not None:
                await self._write(obj, [], always=True)
            return None
        self.series.set(key, None if gate.open else gate.reason)
        old = _parsed(previous)
        decision = decide_model_cached(gate, old, int(meta(obj).get("generation") or 0), self._now())
        written = await self._write(obj, [decision.condition])
        if written and decision.event is not None:
            event = decision.event
            self.recorder.event(obj, event.type, event.reason, event.message, join=False)
        if written:
            log.info(
                "wrote the ModelCached condition",
                namespace=request.namespace,
                name=request.name,
                cache=gate.name,
                status=decision.condition["status"],
                reason=gate.reason,
                was=old.reason if old is not None else None,
            )
        return None

    async def _write(self, obj: KubeObject, conditions: list[KubeObject], *, always: bool = False) -> bool:
        outcome = await self.writer.apply(obj, {"conditions": conditions}, always=always)
        if outcome.written and outcome.object is not None:
            self.cache.record_write(MODELSERVINGS, outcome.object)
        return outcome.written


def _parsed(condition: KubeObject | None) -> Condition | None:
    if condition is None:
        return None
    try:
        return Condition.model_validate(condition)
    except pydantic.ValidationError:
        return None
