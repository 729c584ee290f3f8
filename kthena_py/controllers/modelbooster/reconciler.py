"""The ModelBooster reconciler: expand the booster, bring its children in line, report a status.

Flow of one reconcile:

1. Read the booster from the cache; a deleted one is left to the garbage collector, a migrated one
   (:data:`~kthena_py.plan.modelbooster.naming.ANNOTATION_MIGRATED`) is left alone.
2. Expand it (:func:`~kthena_py.plan.modelbooster.expand`). A booster that cannot be expanded (an unsupported
   backend type, a bad port or cacheURI, ...) gets ``Failed=True`` with Kthena's message and a Warning Event,
   nothing else is touched, and it is not retried until it changes.
3. Plan the child writes from the cache (:func:`~kthena_py.plan.modelbooster.plan_children`) and apply them.
   When Kthena's networking CRDs are not served, only the ModelServing is written and a Warning Event says
   why (once per generation). A failed write, or a child with the booster's name that the booster does not
   control, sets ``Failed=True`` and is retried with backoff.
4. Write the status: ``Initialized``, ``Active`` (the ModelServing is ``Available``), ``Failed`` cleared,
   ``Prefetch`` for a booster with the prefetch opt-in, and ``observedGeneration``, which is advanced only here,
   after the children were written.

A prefetch opt-in that cannot be honoured (a ``cacheURI`` or download settings a ModelCache cannot take) is not
an error: the booster keeps Kthena's per-pod downloader, ``Prefetch=False/PrefetchUnsupported`` says why, and a
Warning Event of that reason is recorded once per change of that message (the reconcile ends normally, so
nothing is retried until the booster changes).

Guarantees: every decision comes from the cache and pure planners; a converged booster costs no write.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pydantic
import structlog

from kthena_py.kube import KubeApi
from kthena_py.kube.objects import KubeObject, annotations_of, controller_ref, is_deleting, meta
from kthena_py.plan.modelbooster import (
    ChildPlan,
    Children,
    ExpandError,
    booster_status,
    expand,
    plan_children,
    unsupported_backend_type,
)
from kthena_py.plan.modelbooster.naming import ANNOTATION_MIGRATED
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request, Result, TerminalError
from kthena_py.vocab.conditions import AVAILABLE, PREFETCH, REASON_INVALID_SPEC, REASON_PREFETCH_UNSUPPORTED
from kthena_py.vocab.times import format_time

from ..resources import MODELBOOSTERS, MODELSERVINGS
from .apply import ChildApplier, ChildWriteError, write_status
from .observe import MODEL_CACHE_CRD, NETWORKING_CRDS, crd_served, observe, parse_booster
from .settings import ImageSource

__all__ = ["BoosterReconciler"]

log = structlog.get_logger("kthena_py.modelbooster")


def _rfc3339(seconds: float) -> str:
    return format_time(seconds)


def _available(ms: KubeObject | None) -> bool:
    conditions = ((ms or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == AVAILABLE and c.get("status") == "True" for c in conditions)


def _schema_problem(exc: pydantic.ValidationError) -> str:
    first = exc.errors()[0]
    path = ".".join(str(part) for part in first["loc"])
    return f"invalid spec: {path}: {first['msg']}"


class BoosterReconciler:
    """Keeps one ModelBooster's ModelServing, ModelServer and ModelRoute in line with it."""

    def __init__(
        self,
        client: KubeApi,
        cache: SharedCache,
        recorder: EventSink,
        images: ImageSource,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.cache = cache
        self.recorder = recorder
        self.images = images
        self.applier = ChildApplier(client, recorder, cache)
        self._now = wall_clock

    async def reconcile(self, request: Request) -> Result | None:
        """Expand one booster, write its children and its status."""
        obj = self.cache.get(MODELBOOSTERS, request.name, request.namespace)
        if obj is None or is_deleting(obj) or ANNOTATION_MIGRATED in annotations_of(obj):
            return None
        generation = int(meta(obj).get("generation") or 0)
        problem = unsupported_backend_type(obj)
        if problem is None:
            try:
                booster = parse_booster(obj)
                served = crd_served(self.cache, MODEL_CACHE_CRD)
                children = expand(booster, await self.images.images(), model_cache_served=served)
            except pydantic.ValidationError as exc:
                problem = _schema_problem(exc)
            except ExpandError as exc:
                problem = str(exc)
        if problem is not None:
            self.recorder.event(obj, "Warning", REASON_INVALID_SPEC, problem)
            await self._status(obj, generation, None, failure=problem, observed=generation)
            raise TerminalError(problem)
        self._prefetch_unsupported(obj, children)
        plan = plan_children(booster.uid, children, observe(self.cache, booster, children))
        first_look = (obj.get("status") or {}).get("observedGeneration") != generation
        if plan.unserved and first_look:
            self._networking_missing(obj, plan)
        try:
            if plan.foreign:
                raise ChildWriteError("; ".join(plan.foreign))
            writes = await self.applier.apply(obj, plan)
        except ChildWriteError as exc:
            await self._status(
                obj, generation, plan.modelserving, failure=exc.message, observed=None, children=children
            )
            raise
        if plan.waiting:
            log.info("waiting for children", waiting=list(plan.waiting))
        if writes:
            log.info("children written", writes=writes)
        ms = self.cache.get(MODELSERVINGS, children.modelserving["metadata"]["name"], booster.namespace)
        owner = controller_ref(ms) if ms is not None else None
        mine = ms if owner is not None and owner.get("uid") == booster.uid else None
        await self._status(obj, generation, mine, failure=None, observed=generation, children=children)
        return None

    def _prefetch_unsupported(self, obj: KubeObject, children: Children) -> None:
        """Record the Warning Event of an opt-in that cannot be honoured, unless the status already says it."""
        problem = children.prefetch.problem
        if problem is None:
            return
        conditions = (obj.get("status") or {}).get("conditions") or []
        said = any(
            c.get("type") == PREFETCH and c.get("status") == "False" and str(c.get("message", "")).startswith(problem)
            for c in conditions
        )
        if not said:
            self.recorder.event(
                obj, "Warning", REASON_PREFETCH_UNSUPPORTED, f"{problem}; the pods keep the per-pod downloader"
            )

    def _networking_missing(self, obj: KubeObject, plan: ChildPlan) -> None:
        crds = ", ".join(NETWORKING_CRDS[kind] for kind in plan.unserved)
        kinds = " and ".join(plan.unserved)
        self.recorder.event(
            obj,
            "Warning",
            "NetworkingCRDsMissing",
            f"the router CRDs ({crds}) are not installed: the ModelServing is created, the {kinds} are not; "
            "install Kthena's networking CRDs and they follow",
        )

    async def _status(
        self,
        obj: KubeObject,
        generation: int,
        ms: KubeObject | None,
        *,
        failure: str | None,
        observed: int | None,
        children: Children | None = None,
    ) -> None:
        status = booster_status(
            obj.get("status"),
            generation=generation,
            observed_generation=observed,
            available=_available(ms),
            failure=failure,
            now=_rfc3339(self._now()),
            prefetch=None if children is None else (children.prefetch, children.modelserving["metadata"]["name"]),
        )
        await write_status(self.client, obj, status)
