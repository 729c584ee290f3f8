"""Pure autoscaling planners for AutoscalingPolicy: metrics in, replica decisions out (no I/O, no clock).

Modules:

* :mod:`.spec`: frozen inputs mirroring the API (metrics, behaviour, bounds, ratio constraint, cost params);
* :mod:`.promtext`: Prometheus text parsing, counter/histogram increases, ``histogram_quantile``;
* :mod:`.observe`: one pass of scrapes -> per-metric samples;
* :mod:`.window`: stable/panic sample windows, scaling history, serialisable :class:`WindowState`;
* :mod:`.recommend`: desired replicas per metric (tolerance, HPA missing-pod rules), max over metrics;
* :mod:`.behavior`: stabilization windows and rate limits;
* :mod:`.decide`: the full decision of one pass (panic mode, behaviour, bounds, the wake-up guard);
* :mod:`.wake`: a target raised from zero by someone else (the activator) stays up one stable window;
* :mod:`.ratio` and :mod:`.disaggregated`: per-role decisions and the exact ratio repair;
* :mod:`.optimizer`: the heterogeneous split (Kthena's greedy, and the budget-respecting optimum);
* :mod:`.simulate`: trace replay with a virtual clock.

Controller contract (how a controller keeps the state level-based, without an in-memory shadow store):

1. Each pass, per scaling unit (a homogeneous target; the total of a heterogeneous target; each non-fixed
   role), scrape the ready entry pods (one "pod" per scaling unit replica: sum a serving group's entry pods
   first), parse with :func:`parse_exposition`, and build samples with :func:`pod_sample` against the
   previous pass's scrapes (an in-memory cache keyed by pod UID); Prometheus values go through
   :func:`external_sample`. Timestamps are wall-clock seconds (``time.time()``) so that persisted history
   stays meaningful across restarts.
2. The state is ``WindowState(metrics=<in-memory cache>, history=<persisted>)``. The history is the source of
   truth: it is read from the object (annotation or status, written with
   ``state.to_dict(include_metrics=False)``) on every pass, so a restart or a leader change loses nothing but
   the cache. Malformed or missing history: start from ``WindowState()``.
3. Call :func:`decide` (or :func:`decide_disaggregated`; for a heterogeneous target, ``decide`` on totals then
   :func:`optimize` on ``decision.desired``), apply ``desired``, and persist the new history only after the
   patch succeeded (a failed patch leaves the old history, so the next pass recomputes from it).

Degraded behaviour when the cache is lost: the stable and panic windows restart with the next pass (their
averages cover only the passes since), and counters and histograms have no value for exactly one pass (they
need two scrapes); when no metric has data the pass holds the current count. When the history is lost, it is
reseeded with the current count: no scale-down before one ``scaleDown.stabilizationWindow`` has passed, and
rate limits measured from the current count.
"""

from kthena_py.plan.autoscaling.behavior import (
    Correction,
    correct,
    panic_ceiling,
    scale_down_floor,
    scale_up_ceiling,
    stabilize,
)
from kthena_py.plan.autoscaling.decide import Decision, Mode, decide, record_applied
from kthena_py.plan.autoscaling.disaggregated import (
    DisaggregatedDecision,
    RoleDecision,
    decide_disaggregated,
    role_metrics,
)
from kthena_py.plan.autoscaling.observe import Scrape, external_sample, pod_sample
from kthena_py.plan.autoscaling.optimizer import (
    allocation_cost,
    budget,
    clamp_total,
    kthena_blocks,
    kthena_greedy,
    min_cost,
    min_cost_allocation,
    optimize,
    optimize_milp,
)
from kthena_py.plan.autoscaling.promtext import (
    ExpositionError,
    FamilyValue,
    Histogram,
    Scalar,
    Unsupported,
    counter_increase,
    find_family,
    histogram_increase,
    histogram_quantile,
    merge_histograms,
    parse_exposition,
)
from kthena_py.plan.autoscaling.ratio import RatioResult, format_ratio, ratio_feasible, repair_ratio
from kthena_py.plan.autoscaling.recommend import (
    UNBOUNDED,
    MetricRecommendation,
    Recommendation,
    recommend,
    recommend_metric,
    utilization,
)
from kthena_py.plan.autoscaling.simulate import TimelinePoint, TracePoint, simulate
from kthena_py.plan.autoscaling.spec import (
    Behavior,
    CostParam,
    MetricTarget,
    Number,
    PanicPolicy,
    RatioConstraint,
    RoleSpec,
    ScaleUpPolicy,
    ScalingSpec,
    SelectPolicy,
    StablePolicy,
    exact,
)
from kthena_py.plan.autoscaling.wake import guard_zero, woken_at
from kthena_py.plan.autoscaling.window import (
    ExternalReading,
    ExternalSample,
    HistogramSample,
    MetricSample,
    MetricWindow,
    PodReading,
    PodSample,
    Reading,
    ScalingHistory,
    WindowEntry,
    WindowState,
)

__all__ = [
    "UNBOUNDED",
    "Behavior",
    "Correction",
    "CostParam",
    "Decision",
    "DisaggregatedDecision",
    "ExpositionError",
    "ExternalReading",
    "ExternalSample",
    "FamilyValue",
    "Histogram",
    "HistogramSample",
    "MetricRecommendation",
    "MetricSample",
    "MetricTarget",
    "MetricWindow",
    "Mode",
    "Number",
    "PanicPolicy",
    "PodReading",
    "PodSample",
    "RatioConstraint",
    "RatioResult",
    "Reading",
    "Recommendation",
    "RoleDecision",
    "RoleSpec",
    "Scalar",
    "ScaleUpPolicy",
    "ScalingHistory",
    "ScalingSpec",
    "Scrape",
    "SelectPolicy",
    "StablePolicy",
    "TimelinePoint",
    "TracePoint",
    "Unsupported",
    "WindowEntry",
    "WindowState",
    "allocation_cost",
    "budget",
    "clamp_total",
    "correct",
    "counter_increase",
    "decide",
    "decide_disaggregated",
    "exact",
    "external_sample",
    "find_family",
    "format_ratio",
    "guard_zero",
    "histogram_increase",
    "histogram_quantile",
    "kthena_blocks",
    "kthena_greedy",
    "merge_histograms",
    "min_cost",
    "min_cost_allocation",
    "optimize",
    "optimize_milp",
    "panic_ceiling",
    "parse_exposition",
    "pod_sample",
    "ratio_feasible",
    "recommend",
    "recommend_metric",
    "record_applied",
    "repair_ratio",
    "role_metrics",
    "scale_down_floor",
    "scale_up_ceiling",
    "simulate",
    "stabilize",
    "utilization",
    "woken_at",
]
