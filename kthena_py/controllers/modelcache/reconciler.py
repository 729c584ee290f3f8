"""The ModelCache reconciler: stage a cache's model with Jobs, report its status, clean up on deletion.

Flow of one reconcile (every decision is made by :mod:`kthena_py.plan.modelcache`; this layer reads and writes):

1. Read the cache from the informer cache; a cache that is gone is forgotten (its metric series removed).
2. A deleting cache: if it still has the finalizer, observe, :func:`~kthena_py.plan.modelcache.plan_deletion`,
   apply (cleanup Jobs, stopping download Jobs), record the Events, and remove the finalizer when the plan
   says so. A spec the model cannot parse never holds the finalizer: it is removed with a Warning.
3. A live cache: add the finalizer if it is missing; observe (Jobs with their pods, claim, nodes,
   ModelServings); scrape the progress of running download pods (bounded, failures ignored); probe the source
   when its revalidation is due (:mod:`.revalidate`: bounded, never raises); plan; apply the
   deletes and creates (before creating the cleanup Job of a superseded copy, the pods' mounts are read live
   and the plan made again, :mod:`.retirement`; a refused write: Warning Event, a refused create also
   ``Progressing=False``/``FailedCreate`` in the status and the plan's Events, then the engine's backoff);
   write the status if it changed; record the plan's Events; update the metrics; look again after the plan's
   ``requeue_after``.

Guarantees: the status, the Jobs and their names are functions of the cluster's state, so a restarted manager
on a converged cache makes no write, and one restarted mid-download finds the running Job instead of starting
another.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pydantic
import structlog

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import PHASE_READY, DownloadProgress, ModelCache
from kthena_py.kube import ApiError, KubeApi
from kthena_py.kube.objects import KubeObject, is_deleting, meta
from kthena_py.plan.modelcache import (
    DOWNLOAD,
    Event,
    Observed,
    PlanSettings,
    fingerprint,
    plan_cache,
    plan_deletion,
    uses_claim,
)
from kthena_py.plan.modelcache.metadata import model_labels
from kthena_py.plan.modelcache.refresh import due
from kthena_py.plan.modelcache.refusal import refused_status
from kthena_py.plan.modelcache.retire import RETIRE_WHY
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request, Result, TerminalError
from kthena_py.vocab.conditions import REASON_INVALID_SPEC, REASON_RETIRED, REASON_RETIREMENT_FAILED
from kthena_py.vocab.labels import MODEL_CACHE_FINALIZER
from kthena_py.vocab.times import parse_time

from ..resources import MODELCACHES
from . import metrics
from .apply import ChildWriteError, apply_changes, set_finalizer, write_status
from .attestation import report_attestation
from .observe import observe, parse_cache
from .progress import ProgressSource, scrape_all
from .retirement import live_mounts
from .revalidate import Prober, probe_fields

__all__ = ["CacheReconciler"]

log = structlog.get_logger("kthena_py.modelcache")
RETIREMENT_OUTCOMES = {REASON_RETIRED: "retired", REASON_RETIREMENT_FAILED: "failed"}


class CacheReconciler:
    """Keeps one ModelCache's Jobs, claim, status and finalizer in line with it."""

    def __init__(
        self,
        client: KubeApi,
        cache: SharedCache,
        recorder: EventSink,
        settings: PlanSettings,
        progress: ProgressSource,
        *,
        wall_clock: Callable[[], float] = time.time,
        prober: Prober | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        self.recorder = recorder
        self.settings = settings
        self.progress = progress
        self._now = wall_clock
        self.prober = prober

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Another replica reconciles the namespaces ``leaving`` accepts: drop what is kept for them here."""
        metrics.forget_namespaces(leaving)

    async def reconcile(self, request: Request) -> Result | None:
        """Reconcile the ModelCache ``request`` names."""
        obj = self.cache.get(MODELCACHES, request.name, request.namespace)
        if obj is None:
            metrics.forget(request.namespace, request.name)
            return None
        try:
            mc = parse_cache(obj)
        except pydantic.ValidationError as exc:
            return await self._invalid(obj, exc)
        if is_deleting(obj):
            return await self._delete(obj, mc)
        patched = await set_finalizer(self.client, obj, True)
        if patched is not None:
            self.cache.record_write(MODELCACHES, patched)  # read our own write, even while the watch lags
            obj = patched
        return await self._stage(obj, mc)

    async def _invalid(self, obj: KubeObject, exc: pydantic.ValidationError) -> Result | None:
        first = exc.errors()[0]
        problem = f"invalid spec: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
        if is_deleting(obj):
            await set_finalizer(self.client, obj, False)  # never held by a spec we cannot read
            return None
        self.recorder.event(obj, "Warning", REASON_INVALID_SPEC, problem)
        raise TerminalError(problem)

    async def _scrape(self, mc: ModelCache, observed: Observed) -> dict[str, DownloadProgress]:
        fp = fingerprint(mc.spec)
        targets = {
            job.name: job.pod.ip
            for job in observed.jobs
            if job.kind == DOWNLOAD
            and job.fingerprint == fp
            and job.state == "active"
            and job.pod is not None
            and job.pod.phase == "Running"
            and job.pod.ip
        }
        if not targets:
            return {}
        return await scrape_all(self.progress, targets, self.settings.job.progress_port)

    async def _stage(self, obj: KubeObject, mc: ModelCache) -> Result | None:
        observed = await observe(self.client, self.cache, mc)
        progress = await self._scrape(mc, observed)
        if progress:
            observed = dataclasses.replace(observed, progress=progress)
        probe_at = self._now()
        if self.prober is not None and due(mc, probe_at):  # refresh: revalidate the source when due
            probe = await self.prober.probe(mc, probe_at)
            if probe is not None:
                log.info("modelcache revalidated", cache=f"{mc.namespace}/{mc.name}", **probe_fields(probe))
                observed = dataclasses.replace(observed, probe=probe)
        now = self._now()
        plan = plan_cache(mc, observed, self.settings, now)
        claim = uses_claim(mc)
        if claim is not None and any(c.why == RETIRE_WHY for c in plan.creates):
            # retire: confirm with every pod of the namespace (not only the cached ones) before removing a copy
            observed = dataclasses.replace(observed, mounts=await live_mounts(self.client, mc.namespace, claim))
            plan = plan_cache(mc, observed, self.settings, now)
        if plan.retiring:
            log.debug("modelcache copies wait to be retired", cache=f"{mc.namespace}/{mc.name}", waiting=plan.retiring)
        try:
            done = await apply_changes(self.client, self.recorder, obj, plan.creates, plan.deletes)
        except ChildWriteError as exc:
            if exc.verb == "create" and await self._refused(obj, plan.status, exc.message, now):
                self._record(obj, mc, plan.events)  # the Events of the status just written (else they are lost)
            raise
        if done:
            log.info("modelcache children written", cache=f"{mc.namespace}/{mc.name}", writes=done)
        written = await write_status(self.client, obj, plan.status)
        self._record(obj, mc, plan.events)
        self._metrics(mc, observed, plan.status)
        if written:
            log.info(
                "modelcache status",
                cache=f"{mc.namespace}/{mc.name}",
                phase=plan.status.get("phase"),
                job=plan.status.get("jobName"),
            )
        return Result(requeue_after=plan.requeue_after) if plan.requeue_after else None

    def _record(self, obj: KubeObject, mc: ModelCache, events: tuple[Event, ...]) -> None:
        for event in events:
            self.recorder.event(obj, "Warning" if event.type == "Warning" else "Normal", event.reason, event.message)
            if event.reason in RETIREMENT_OUTCOMES:  # retire: one count per copy retired (or removal failed)
                metrics.RETIREMENTS.labels(RETIREMENT_OUTCOMES[event.reason]).inc()
                log.info("modelcache copy retirement", cache=f"{mc.namespace}/{mc.name}", message=event.message)

    async def _refused(self, obj: KubeObject, planned: dict[str, object], message: str, now: float) -> bool:
        """Write the planned status with ``Progressing=False``/``FailedCreate``; whether the status now says it.

        A failed write is only logged: the refusal itself is what propagates.
        """
        stored = obj.get("status") or {}
        try:
            await write_status(self.client, obj, refused_status(planned, stored, message, now))
        except ApiError as exc:
            log.warning("cannot record the refused create in the status", error=str(exc), refusal=message)
            return False
        return True

    def _metrics(self, mc: ModelCache, observed: Observed, status: dict[str, object]) -> None:
        phase = str(status.get("phase") or "")
        metrics.set_phase(mc.namespace, mc.name, phase)
        report_attestation(mc, status)
        size = status.get("sizeBytes")
        if isinstance(size, int):
            metrics.BYTES.labels(mc.namespace, mc.name).set(size)
        metrics.set_model(mc.namespace, mc.name, model_labels(status))
        before = to_dict(mc.status).get("phase") if mc.status is not None else None
        if phase == PHASE_READY and before != PHASE_READY:
            job = next((j for j in observed.jobs if j.name == status.get("jobName")), None)
            if job is not None and job.finished_at is not None:
                metrics.DOWNLOAD_SECONDS.observe(max(0.0, job.finished_at - job.created_at))

    async def _delete(self, obj: KubeObject, mc: ModelCache) -> Result | None:
        if MODEL_CACHE_FINALIZER not in (meta(obj).get("finalizers") or []):
            return None
        observed = await observe(self.client, self.cache, mc, attestation=False)
        now = self._now()
        deleted_at = parse_time(meta(obj).get("deletionTimestamp")) or now
        plan = plan_deletion(mc, observed, self.settings, now, deleted_at)
        try:
            await apply_changes(self.client, self.recorder, obj, plan.creates, plan.deletes)
        except Exception:
            if now < deleted_at + self.settings.cleanup_timeout:
                raise
            log.warning(
                "cleanup writes failed past the bound; removing the finalizer", cache=f"{mc.namespace}/{mc.name}"
            )
        for event in plan.events:
            self.recorder.event(obj, "Warning" if event.type == "Warning" else "Normal", event.reason, event.message)
        if plan.remove_finalizer:
            await set_finalizer(self.client, obj, False)
            metrics.forget(mc.namespace, mc.name)
            log.info("modelcache finalizer removed", cache=f"{mc.namespace}/{mc.name}")
            return None
        return Result(requeue_after=max(0.5, plan.requeue_after)) if plan.requeue_after else None
