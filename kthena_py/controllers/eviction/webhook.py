"""The eviction endpoint: a validating admission handler for ``pods/eviction`` CREATE.

Guarantees:

* Disabled (``--enable-eviction-webhook`` not given), it admits every eviction without reading anything, so a
  webhook configuration left behind never blocks a drain.
* Admitted without spending any budget: requests that are not pod evictions, pods outside the manager's
  namespace scope, pods that carry no ``modelserving.volcano.sh/name`` label (or, when not found, whose name
  no protected ModelServing in the cache would give a pod), pods not
  controlled by that ModelServing (UID), ModelServings without ``rolloutStrategy.evictionStrategy``, and the
  cases :func:`~kthena_py.plan.modelserving.eviction.decide` allows for free.
* Every protected eviction is decided on the cluster as it is: under the per-ModelServing lock, the tracker,
  then the ModelServing's pods, Services and revisions are read from the API server, in that order, so the pods
  seen are at least as new as every grant the tracker records (the condition for releasing a recovered unit, see
  :func:`~kthena_py.plan.modelserving.eviction.prune`). The target is the pod of that list with the requested
  name: the API server evicts whichever pod has the name when it acts, so the record must name the newest
  incarnation (a read made before waiting for the lock may name one that is already gone). The informer cache,
  which may lag, is never the basis of a grant. A grant is admitted only once the tracker write that records it
  succeeded with the ``resourceVersion`` the decision read
  (:class:`~kthena_py.controllers.eviction.tracker.TrackerStore`); on a conflict the decision is made again from
  fresh reads. Concurrent requests for one ModelServing are serialised within a replica; across replicas the
  tracker's concurrency check does it. So two replicas, or two drains, never both spend the last allowed
  disruption, and a restarted manager honours earlier grants.
* The API server looks the pod up only after the webhook answered, and evicts whichever pod has the name by
  then. A pod that is not found (gone, perhaps being re-created under its name) is therefore decided like a pod
  that is not ready, and recorded without a UID; every grant holds its unit's record for
  :data:`~kthena_py.plan.modelserving.eviction.IN_FLIGHT_SECONDS`, the longest the API server may still act.
* A denial is HTTP 429 ``TooManyRequests`` (``kubectl drain`` retries it) with Kthena's message; it is counted
  in ``kthena_eviction_requests_total`` and recorded as a Warning Event ``EvictionDenied`` on the ModelServing
  (events of one ModelServing within a second are one Event, repeats increase its count). Failures to read or
  write the cluster deny with the reason in the message, well within the webhook's 5 s timeout. Dry-run
  evictions get the same answer and write nothing.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import replace

import pydantic
import structlog

from kthena_py.api.modelserving import EvictionStrategySpec, ModelServing
from kthena_py.kube import ApiError, KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, labels_of, meta, name_of
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.types import MSRef
from kthena_py.plan.modelserving.eviction import (
    Target,
    Verdict,
    decide,
    prune,
    target_budget,
    target_by_name,
    target_of,
    unit_index,
)
from kthena_py.plan.modelserving.eviction import budget as reasons
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.webhook import AdmissionRequest, AdmissionResponse
from kthena_py.vocab.owners import controller_uid

from ..resources import MODELSERVINGS
from ..servingview import ms_ref, parse_modelserving
from .metrics import REQUESTS, TRACKER_WRITES
from .tracker import TrackerConflict, TrackerStore, owned_entries
from .view import observe_live, planning_state

__all__ = ["DEFAULT_TTL", "EVICTION_PATH", "FIELD_MANAGER", "EvictionWebhook"]

EVICTION_PATH = "/validate-eviction"
FIELD_MANAGER = "kthena-py-eviction-webhook"
DEFAULT_TTL = 60.0
EVENT_REASON = "EvictionDenied"

log = structlog.get_logger("kthena_py.eviction")


class EvictionWebhook:
    """Decides evictions against the eviction budgets (see the module docstring).

    Args:
        client: The API client.
        cache: The manager's informer cache (ModelServings and their pods and revisions).
        recorder: Where denial events go.
        enabled: ``False`` admits everything.
        ttl: Seconds a granted disruption stays recorded at most (``--eviction-tracker-ttl``).
        wall_clock: Epoch seconds.
        deadline: Seconds one request may spend deciding again after conflicts.
        answer_within: Seconds after which a request is denied (429, so drains retry) rather than left to the
            API server's webhook timeout (5 s), which fails the eviction with an error ``kubectl drain`` does
            not retry.
    """

    def __init__(
        self,
        client: KubeApi,
        cache: SharedCache,
        recorder: EventSink,
        *,
        enabled: bool,
        ttl: float = DEFAULT_TTL,
        wall_clock: Callable[[], float] = time.time,
        deadline: float = 2.5,
        answer_within: float = 4.0,
    ) -> None:
        self.client = client
        self.cache = cache
        self.recorder = recorder
        self.enabled = enabled
        self.ttl = ttl
        self.store = TrackerStore(client, FIELD_MANAGER)
        self._now = wall_clock
        self._deadline = deadline
        self._answer_within = answer_within
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    async def __call__(self, request: AdmissionRequest) -> AdmissionResponse:
        """Answer one AdmissionReview."""
        try:
            async with asyncio.timeout(self._answer_within):
                ms_obj, verdict = await self._verdict(request)
        except TimeoutError:
            ms_obj = None
            verdict = self._failed(reasons.LOOKUP_FAILED, f"no decision within {self._answer_within:g}s; retry")
        REQUESTS.labels("allowed" if verdict.allowed else "denied", verdict.reason).inc()
        if verdict.allowed:
            if verdict.record:
                log.info(
                    "eviction granted",
                    namespace=request.namespace,
                    pod=request.name,
                    reason=verdict.reason,
                    unit=verdict.record,
                    ready=verdict.ready,
                    min_available=verdict.min_available,
                    dry_run=request.dry_run,
                )
            return AdmissionResponse.allow()
        log.info("eviction denied", namespace=request.namespace, pod=request.name, reason=verdict.reason)
        if ms_obj is not None and not request.dry_run:
            self.recorder.event(ms_obj, "Warning", EVENT_REASON, f"{verdict.message} (pod {request.name})")
        return AdmissionResponse.deny(verdict.message, code=429, reason="TooManyRequests")

    async def _namer_of(self, namespace: str, pod_name: str) -> str | None:
        """The protected ModelServing one of whose pods would have this name (for a pod not found).

        Listed from the API server, not the cache: every replica answers evictions for every namespace, and a
        sharded replica's cache may not hold this one's ModelServings (a pod not found is rare: the cost is small).
        """
        for obj in (await self.client.list_all(MODELSERVINGS, namespace)).items:
            spec = obj.get("spec") or {}
            if not (spec.get("rolloutStrategy") or {}).get("evictionStrategy"):
                continue
            roles = [str(r.get("name")) for r in (spec.get("template") or {}).get("roles") or [] if isinstance(r, dict)]
            ms = str(meta(obj).get("name"))
            if target_by_name(ms, roles, pod_name) is not None:
                return ms
        return None

    @staticmethod
    def _free(reason: str, message: str) -> tuple[KubeObject | None, Verdict]:
        return None, Verdict(True, reason, message, {})

    async def _verdict(self, request: AdmissionRequest) -> tuple[KubeObject | None, Verdict]:
        if not self.enabled:
            return self._free(reasons.DISABLED, "the eviction webhook is disabled")
        if (
            request.operation != "CREATE"
            or request.sub_resource != "eviction"
            or request.resource.get("resource") != "pods"
        ):
            return self._free(reasons.NOT_OWNED, "not a pod eviction")
        namespace = request.namespace
        name = request.name or str(meta(request.object if isinstance(request.object, dict) else {}).get("name") or "")
        if self.cache.namespace and namespace != self.cache.namespace:
            return self._free(reasons.NOT_OWNED, "outside the manager's namespace")
        pod: KubeObject | None
        try:
            pod = await self.client.get(PODS, name, namespace)
        except NotFound:
            pod = None
        except ApiError as exc:
            return None, self._failed(reasons.LOOKUP_FAILED, f"failed to get pod {namespace}/{name}: {exc}")
        try:
            ms_name = (
                labels_of(pod).get(naming.LABEL_NAME) if pod is not None else await self._namer_of(namespace, name)
            )
        except ApiError as exc:
            return None, self._failed(reasons.LOOKUP_FAILED, f"failed to list ModelServings in {namespace}: {exc}")
        if not ms_name:
            return self._free(reasons.NOT_OWNED, "pod not managed by a ModelServing" if pod else "pod not found")
        ms_obj = self.cache.get(MODELSERVINGS, ms_name, namespace)
        if ms_obj is None:
            try:
                ms_obj = await self.client.get(MODELSERVINGS, ms_name, namespace)
            except NotFound:
                return self._free(reasons.NOT_OWNED, "ModelServing not found")
            except ApiError as exc:
                return None, self._failed(reasons.LOOKUP_FAILED, f"failed to get ModelServing {ms_name}: {exc}")
        if pod is not None and controller_uid(pod) != meta(ms_obj).get("uid"):
            return self._free(reasons.NOT_OWNED, "pod not controlled by the ModelServing")
        try:
            ms = parse_modelserving(ms_obj)
        except pydantic.ValidationError:
            return self._free(reasons.NO_STRATEGY, "the ModelServing's spec cannot be read")
        strategy = ms.spec.rollout_strategy.eviction_strategy if ms.spec.rollout_strategy else None
        if strategy is None:
            return self._free(reasons.NO_STRATEGY, "no evictionStrategy")
        roles = [r.name for r in ms.spec.template.roles]
        target = target_of(pod) if pod is not None else target_by_name(ms_name, roles, name)
        if target is None:
            return self._free(reasons.NOT_OWNED, "pod without ServingGroup and role labels")
        ref = ms_ref(ms_obj)
        key = (namespace, ms_name)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                return ms_obj, await self._decide_protected(request, ms_obj, ms, ref, strategy, target)
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def _decide_protected(
        self,
        request: AdmissionRequest,
        ms_obj: KubeObject,
        ms: ModelServing,
        ref: MSRef,
        strategy: EvictionStrategySpec,
        target: Target,
    ) -> Verdict:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._deadline
        last_error = ""
        while True:
            try:
                tracker = await self.store.read(ref)
                observed = await observe_live(self.client, self.cache, ms_obj, ref)  # listed after the tracker
                # The pod as listed now, not as read before waiting for the lock: the API server evicts the pod
                # that has the name when it acts, and the record must name that incarnation.
                listed = next((target_of(p) for p in observed.pods if name_of(p) == target.pod_name), None)
                # Gone, perhaps about to be re-created: whatever the API server finds is granted, so recorded.
                target = listed if listed is not None else replace(target, pod_uid="", pod_ready=False)
                state = planning_state(ms, ref, observed)
                budget = target_budget(state, strategy, target)
                if budget is None or budget.total <= 0:
                    return decide(budget, ref.namespace, target, {}, now=self._now(), ttl=self.ttl)
            except ApiError as exc:
                return self._failed(reasons.LOOKUP_FAILED, f"failed to read ModelServing {ref.name}: {exc}")
            now = self._now()
            entries = prune(owned_entries(tracker, ref), unit_index(state), now)
            verdict = decide(budget, ref.namespace, target, entries, now=now, ttl=self.ttl)
            if not verdict.allowed or verdict.record is None or request.dry_run:
                return verdict
            try:
                await self.store.write(ref, tracker, verdict.entries)
            except TrackerConflict as exc:
                TRACKER_WRITES.labels("conflict").inc()
                last_error = str(exc)
            except ApiError as exc:
                TRACKER_WRITES.labels("error").inc()
                return self._failed(reasons.TRACKER_ERROR, self._tracker_message(ref.name, str(exc)))
            else:
                TRACKER_WRITES.labels("ok").inc()
                return verdict
            if loop.time() >= give_up:
                return self._failed(reasons.TRACKER_CONFLICT, self._tracker_message(ref.name, last_error))
            await asyncio.sleep(random.uniform(0.005, 0.05))  # let the other writer finish; then decide again

    @staticmethod
    def _tracker_message(ms: str, error: str) -> str:
        return f"Eviction denied: failed to update ModelServing {ms} disruption tracker: {error}."

    @staticmethod
    def _failed(reason: str, message: str) -> Verdict:
        if not message.startswith("Eviction denied"):
            message = f"Eviction denied: {message}"
        return Verdict(False, reason, message, {})
