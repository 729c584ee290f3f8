"""Shared machinery of the autoscaling reconcilers: settings, dependencies, the common reconcile flow.

Flow of one reconcile (:meth:`PolicyReconciler.reconcile`), for a policy this reconciler handles:

1. read the policy from the cache; a deleted one drops its memory and gauge series;
2. parse and validate it (Kthena's webhook rules); an invalid policy gets ``Ready=False/InvalidSpec``, a
   Warning event and is not requeued (its next change triggers a reconcile);
3. run one pass (:meth:`PolicyReconciler.run_pass`: collect, decide, apply, checkpoint), which states only what its
   target type does differently: the units it collects (:meth:`PolicyReconciler.collect_units` collects, accounts
   and remembers them alike for every pass), the planner it asks, the writes it makes, and the status it reports
   (a refused write is reported alike for every pass, by :meth:`PolicyReconciler.scale_refused`);
4. write the status if it changed, with a Warning event when a condition turns False (not on every pass);
5. requeue after the sync period minus the time the pass took, so passes are one period apart.

Guarantees: no exception of a pass escapes except bugs (the engine counts and retries those); API errors of the
apply step are reported in the status and retried at the next pass, not in a tight backoff loop, so a
failing target never multiplies the scrapes.
"""

from __future__ import annotations

import asyncio
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import pydantic
import structlog

from kthena_py.api.autoscaling import AutoscalingPolicy
from kthena_py.api.validation.autoscaling import validate_autoscalingpolicy
from kthena_py.api.validation.errors import aggregate_message
from kthena_py.kube import ApiError, KubeApi
from kthena_py.kube.objects import KubeObject, annotations_of, is_deleting, meta
from kthena_py.kube.resources import PODS
from kthena_py.plan.autoscaling import ExternalReading, MetricTarget, Mode, ScalingSpec, WindowState
from kthena_py.runtime.cache import CacheReader, SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.reconcile import Request, Result
from kthena_py.vocab.conditions import (
    REASON_ALL_METRICS_AVAILABLE,
    REASON_FIXED_REPLICAS,
    REASON_INVALID_SPEC,
    REASON_NO_METRICS,
    REASON_RECONCILED,
    REASON_SCALE_FAILED,
    REASON_SOME_METRICS_MISSING,
    REASON_TARGET_INVALID,
    REASON_TARGET_NOT_FOUND,
)

from ..resources import AUTOSCALINGPOLICIES
from .collector import NAME_LABEL, Backend, Collected, Scraper, collect
from .convert import PolicyError, TargetKey, parse_policy, target_refs
from .history import HISTORY_ANNOTATION, HistoryStore, PolicyMemory
from .metrics import COLLECT_SECONDS, SCRAPE_ERRORS, PolicySeries
from .status import (
    FAILED_RESCALE,
    METRICS_AVAILABLE,
    READY,
    SCALE_FAILED,
    TARGET_FOUND,
    ConditionUpdate,
    build_status,
    condition_of,
    problem_status,
    rfc3339,
    write_status,
)

__all__ = [
    "DEFAULT_SYNC_PERIOD",
    "ENV_SYNC_PERIOD",
    "Deps",
    "Outcome",
    "PolicyReconciler",
    "Settings",
    "describe_metrics",
    "metrics_condition",
    "pods_of",
    "reconciled",
    "spec_replicas",
    "target_found",
    "target_invalid",
    "target_missing",
]

DEFAULT_SYNC_PERIOD = 15.0
ENV_SYNC_PERIOD = "KTHENA_PY_AUTOSCALER_SYNC_PERIOD"

log = structlog.get_logger("kthena_py.autoscaling")


@dataclass(frozen=True)
class Settings:
    """Tunables of the autoscaling controllers.

    Attributes:
        sync_period: Seconds between two passes of one policy (Kthena: 15).
        scrape_timeout: Seconds per pod scrape (Kthena: 3).
        scrape_concurrency: Pod scrapes of one pass in flight at once.
        collect_deadline: Seconds for all scrapes of one pass.
        query_timeout: Seconds per Prometheus query (Kthena: 3).
    """

    sync_period: float = DEFAULT_SYNC_PERIOD
    scrape_timeout: float = 3.0
    scrape_concurrency: int = 32
    collect_deadline: float = 10.0
    query_timeout: float = 3.0

    @classmethod
    def from_env(cls, sync_period: float | None = None, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings; the period comes from ``sync_period``, else ``$KTHENA_PY_AUTOSCALER_SYNC_PERIOD``.

        A missing, unparsable or non-positive period falls back to 15 s (Kthena's rule for its flag). The
        collection deadline is two thirds of the period, between the scrape timeout and 10 s.
        """
        value = sync_period
        if value is None:
            raw = (os.environ if environ is None else environ).get(ENV_SYNC_PERIOD, "")
            try:
                value = float(raw) if raw.strip() else None
            except ValueError:
                log.warning("ignoring an unparsable sync period", variable=ENV_SYNC_PERIOD, value=raw)
        if value is None or not value > 0:
            value = DEFAULT_SYNC_PERIOD
        scrape_timeout = 3.0
        return cls(sync_period=value, collect_deadline=max(scrape_timeout, min(10.0, value * 2 / 3)))


@dataclass
class Deps:
    """What both autoscaling reconcilers use (one instance shared by both)."""

    client: KubeApi
    cache: SharedCache
    recorder: EventSink
    scraper: Scraper
    settings: Settings = field(default_factory=Settings)
    series: PolicySeries = field(default_factory=PolicySeries)
    wall_clock: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    same_namespace_targets: Callable[[], bool] = lambda: False
    """Whether to refuse targets outside the policy's namespace (the manager's cache holds only its own ranges)."""


@dataclass
class Outcome:
    """What a pass reports for the status.

    Attributes:
        conditions: Condition updates.
        target: The target status field (``{"homogeneousStatus": ...}`` etc.; ``None`` keeps the old one,
            ``{}`` drops it).
        requeue: Whether to come back after the sync period.
    """

    conditions: list[ConditionUpdate]
    target: dict[str, Any] | None = None
    requeue: bool = True


def spec_replicas(obj: Mapping[str, Any] | None) -> int:
    """``spec.replicas`` of a ModelServing, or ``replicas`` of a role entry (absent counts as 1, like Kthena)."""
    value = (obj or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def pods_of(cache: CacheReader, key: TargetKey) -> list[KubeObject]:
    """Pods of the target's namespace labelled with its name (from the cache's label index)."""
    return cache.by_label(PODS, NAME_LABEL, key.name, key.namespace)


def target_found() -> ConditionUpdate:
    """``TargetFound=True``."""
    return ConditionUpdate(TARGET_FOUND, "True", TARGET_FOUND, "target model serving and roles found")


def reconciled(target: Literal["homogeneous", "heterogeneous", "disaggregated"]) -> ConditionUpdate:
    """``Ready=True``, with Kthena's message.

    Kthena writes ``disaggregated autoscaling policy reconciled``; the target types it writes no status for
    follow the same pattern.
    """
    return ConditionUpdate(READY, "True", REASON_RECONCILED, f"{target} autoscaling policy reconciled")


def target_missing(keys: list[TargetKey]) -> Outcome:
    """The outcome when a target ModelServing does not exist (come back at the next period)."""
    names = ", ".join(str(k) for k in keys)
    message = f"model serving {names} not found"
    return Outcome(
        [
            ConditionUpdate(TARGET_FOUND, "False", REASON_TARGET_NOT_FOUND, message),
            ConditionUpdate(READY, "False", REASON_TARGET_NOT_FOUND, message),
        ],
        target={},
    )


def target_invalid(message: str, *, requeue: bool = True) -> Outcome:
    """The outcome when a target exists but cannot be scaled as configured (or its reference is unusable)."""
    return Outcome(
        [
            ConditionUpdate(TARGET_FOUND, "False", REASON_TARGET_INVALID, message),
            ConditionUpdate(READY, "False", REASON_TARGET_INVALID, message),
        ],
        target={},
        requeue=requeue,
    )


def metrics_condition(units: Mapping[str, Collected | None]) -> ConditionUpdate:
    """``MetricsAvailable`` over the units of a pass (``None``: a fixed unit that needs no metrics).

    Messages name the missing metrics and why, never values, so that a steady state writes nothing.
    """
    collected = {unit: c for unit, c in units.items() if c is not None}
    if not collected:
        return ConditionUpdate(METRICS_AVAILABLE, "True", REASON_FIXED_REPLICAS, "no scaling unit needs metrics")
    empty: list[str] = []
    partial: list[str] = []
    for unit, collection in sorted(collected.items()):
        prefix = f"{unit}: " if unit else ""
        missing = [r for r in collection.reports if r.sample is None]
        why = "; ".join(f"{r.name}: {r.error or r.detail}" for r in missing)
        if missing and len(missing) == len(collection.reports):
            empty.append(f"{prefix}no metric has data ({why})")
        elif missing:
            partial.append(f"{prefix}{why}")
    if empty:
        return ConditionUpdate(METRICS_AVAILABLE, "False", REASON_NO_METRICS, "; ".join(empty + partial))
    if partial:
        return ConditionUpdate(METRICS_AVAILABLE, "True", REASON_SOME_METRICS_MISSING, "; ".join(partial))
    count = sum(len(c.reports) for c in collected.values())
    return ConditionUpdate(METRICS_AVAILABLE, "True", REASON_ALL_METRICS_AVAILABLE, f"all {count} metrics have data")


def describe_metrics(spec: ScalingSpec, state: WindowState, now: float, mode: Mode) -> tuple[str, dict[str, float]]:
    """Describe the metric values a decision used (the window of its mode), for events and gauges.

    Returns:
        A message like ``rps=250 per replica over 3 replicas (target 100); ...`` and the values by metric.
    """
    length = spec.panic_window if mode == "Panic" else spec.stable_window
    parts: list[str] = []
    values: dict[str, float] = {}
    for metric in spec.metrics:
        reading = state.metrics.reading(metric.name, now, length, spec.quantile)
        target = f"{float(metric.exact_target):.6g}"
        if reading is None:
            parts.append(f"{metric.name}: no data")
        elif isinstance(reading, ExternalReading):
            values[metric.name] = reading.value
            parts.append(f"{metric.name}={reading.value:.6g} (target {target})")
        else:
            values[metric.name] = reading.average
            parts.append(
                f"{metric.name}={reading.average:.6g} per replica over {reading.reporting} replicas (target {target})"
            )
    return "; ".join(parts), values


class PolicyReconciler(ABC):
    """The common reconcile flow; subclasses implement :meth:`run_pass` for their target types."""

    controller: ClassVar[str]
    field_manager: ClassVar[str]
    target_types: ClassVar[frozenset[str]]

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = HistoryStore()

    @abstractmethod
    async def run_pass(self, obj: KubeObject, policy: AutoscalingPolicy) -> Outcome:
        """Collect, decide and apply for one validated policy; report what happened."""

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Another replica reconciles the namespaces ``leaving`` accepts: drop what is kept for them here."""
        self.store.forget_namespaces(leaving)
        self.deps.series.forget_namespaces(leaving)

    async def reconcile(self, request: Request) -> Result | None:
        """One pass for the policy ``request`` names (see the module docstring)."""
        deps = self.deps
        obj = deps.cache.get(AUTOSCALINGPOLICIES, request.name, request.namespace)
        if obj is None or is_deleting(obj):
            self.store.forget(request.namespace, request.name)
            deps.series.forget(request.namespace, request.name)
            return None
        kind, _ = target_refs(obj)
        if kind not in self.target_types:
            self.store.forget(request.namespace, request.name)
            return None
        started = deps.monotonic()
        try:
            policy = parse_policy(obj)
            errors = validate_autoscalingpolicy(policy)
            if errors:
                raise PolicyError(aggregate_message(errors))
            outcome = await self.run_pass(obj, policy)
        except pydantic.ValidationError as err:
            outcome = self.invalid(f"spec cannot be read: {err}")
        except PolicyError as err:
            outcome = self.invalid(str(err))
        await self.finish(obj, outcome)
        if not outcome.requeue:
            return None
        return Result(requeue_after=max(0.1, deps.settings.sync_period - (deps.monotonic() - started)))

    @staticmethod
    def invalid(message: str) -> Outcome:
        """The outcome for a policy the planners cannot use."""
        return Outcome([ConditionUpdate(READY, "False", REASON_INVALID_SPEC, message)], target={}, requeue=False)

    async def finish(self, obj: KubeObject, outcome: Outcome) -> None:
        """Write the status (when changed) and the Warning events of conditions that turned False."""
        md = meta(obj)
        old = obj.get("status") or {}
        now = rfc3339(self.deps.wall_clock())
        status = build_status(
            old,
            generation=int(md.get("generation") or 0),
            conditions=outcome.conditions,
            now=now,
            target=outcome.target,
        )
        reasons: set[str] = set()
        for update in outcome.conditions:
            bad = problem_status(update.type)
            if update.status != bad or update.reason in reasons or update.reason == SCALE_FAILED:
                continue  # (a refused scale write has its own FailedRescale event, at every refusal)
            before = condition_of(old, update.type)
            if before is None or before.get("status") != bad or before.get("reason") != update.reason:
                reasons.add(update.reason)
                self.deps.recorder.event(obj, "Warning", update.reason, update.message)
        try:
            await write_status(self.deps.client, obj, status, self.field_manager)
        except ApiError as err:
            log.warning("cannot write the policy status", error=str(err))

    # -- helpers for subclasses -----------------------------------------------------------------------------

    async def collect_units(
        self,
        obj: KubeObject,
        memory: PolicyMemory,
        units: Mapping[str, tuple[Sequence[Backend], Sequence[MetricTarget]]],
    ) -> dict[str, Collected]:
        """Collect the scaling units of one pass concurrently, each from its backends with its last scrapes.

        Once every collection ended, each is accounted (:meth:`collected`, with the time the whole collection took)
        and its scrape memory kept for the next pass, in the order of ``units``.

        Args:
            obj: The policy.
            memory: The policy's memory.
            units: ``{history unit: (backends, metric targets)}``.

        Returns:
            The collection of each unit.
        """
        deps = self.deps
        started = deps.monotonic()
        results = await asyncio.gather(
            *(
                collect(
                    deps.scraper,
                    backends,
                    metrics,
                    memory.scrapes.get(unit, {}),
                    deadline=deps.settings.collect_deadline,
                    query_timeout=deps.settings.query_timeout,
                )
                for unit, (backends, metrics) in units.items()
            )
        )
        elapsed = deps.monotonic() - started
        collections = dict(zip(units, results, strict=True))
        for unit, collection in collections.items():
            self.collected(obj, collection, elapsed)
            memory.scrapes[unit] = collection.memory
        return collections

    def scale_refused(self, obj: KubeObject, conditions: list[ConditionUpdate], message: str) -> Outcome:
        """The outcome of a pass whose scale write was refused (the target status stays as it was).

        Records a ``FailedRescale`` Warning event and adds ``Ready=False/ScaleFailed`` to ``conditions``, both with
        ``message``.
        """
        self.deps.recorder.event(obj, "Warning", FAILED_RESCALE, message)
        conditions.append(ConditionUpdate(READY, "False", REASON_SCALE_FAILED, message))
        return Outcome(conditions, target=None)

    def collected(self, obj: KubeObject, collection: Collected, seconds: float) -> None:
        """Account for one collection in the Prometheus metrics and the log."""
        md = meta(obj)
        namespace, name = str(md.get("namespace", "")), str(md.get("name", ""))
        COLLECT_SECONDS.labels(self.controller).observe(seconds)
        if collection.pod_errors:
            SCRAPE_ERRORS.labels(namespace, name, "pod").inc(collection.pod_errors)
        if collection.query_errors:
            SCRAPE_ERRORS.labels(namespace, name, "prometheus").inc(collection.query_errors)
        for report in collection.reports:
            if report.error:
                log.info("metric incomplete", metric=report.name, detail=report.detail, error=report.error)

    async def checkpoint(self, obj: KubeObject, memory: PolicyMemory) -> None:
        """Write the history annotation if it is due (a failure is retried by the next pass)."""
        value = self.store.due(memory)
        if value is None:
            return
        if annotations_of(obj).get(HISTORY_ANNOTATION) == value:
            self.store.written(memory, value)
            return
        md = meta(obj)
        try:
            await self.deps.client.patch(
                AUTOSCALINGPOLICIES,
                str(md.get("name")),
                {"metadata": {"uid": md.get("uid"), "annotations": {HISTORY_ANNOTATION: value}}},
                str(md.get("namespace")),
                field_manager=self.field_manager,
            )
        except ApiError as err:
            log.warning("cannot checkpoint the scaling history", error=str(err))
            return
        self.store.written(memory, value)
