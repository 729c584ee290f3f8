"""The full decision of one pass: windows, panic mode, behaviour, bounds, restarts.

Kthena conformance (reference §6.6):

* Homogeneous, current 1, one pod with gauge ``load 10``, target 1, tolerance 0, bounds [1, 10], "empty
  behaviour" -> 10 holds. Kthena's empty behaviour is a zero-valued Go struct (no limits); the equivalent here
  is periods of 0 (our defaults are the CRD defaults, which limit the first step to 2).
* ``load 1`` without ``# TYPE``, tolerance 100 -> no change holds, for another reason: Kthena drops the untyped
  family, we read it as a gauge at target.
"""

from __future__ import annotations

from kthena_py.plan.autoscaling import (
    Behavior,
    ExternalSample,
    MetricTarget,
    PanicPolicy,
    PodSample,
    ScaleUpPolicy,
    ScalingSpec,
    Scrape,
    StablePolicy,
    WindowState,
    decide,
    parse_exposition,
    pod_sample,
    record_applied,
)

UNLIMITED = Behavior(ScaleUpPolicy(StablePolicy(period=0)), StablePolicy(period=0))


def spec(
    *,
    metrics: tuple[MetricTarget, ...] = (MetricTarget("rps", 10),),
    min_replicas: int = 0,
    max_replicas: int = 20,
    tolerance_percent: int = 0,
    behavior: Behavior = UNLIMITED,
    stable_window: float = 60.0,
    panic_window: float = 6.0,
) -> ScalingSpec:
    """A target on ``rps`` (10 per replica) in [0, 20] without tolerance or limits, unless told otherwise."""
    return ScalingSpec(metrics, min_replicas, max_replicas, tolerance_percent, behavior, stable_window, panic_window)


def test_kthena_controller_vector() -> None:
    ready = {"pod-0": Scrape(100.0, parse_exposition("# TYPE load gauge\nload 10\n"))}
    samples = {"load": pod_sample("load", ready, {})}
    s = spec(metrics=(MetricTarget("load", 1),), min_replicas=1, max_replicas=10)
    assert decide(s, 1, 100.0, samples).desired == 10


def test_untyped_family_reads_as_a_gauge() -> None:
    ready = {"pod-0": Scrape(100.0, parse_exposition("load 1\n"))}
    s = spec(metrics=(MetricTarget("load", 1),), min_replicas=1, max_replicas=10, tolerance_percent=100)
    assert decide(s, 1, 100.0, {"load": pod_sample("load", ready, {})}).desired == 1


def test_scale_from_zero_with_prometheus() -> None:
    panic = Behavior(ScaleUpPolicy(StablePolicy(), PanicPolicy()))
    decision = decide(spec(behavior=panic), 0, 100.0, {"rps": ExternalSample(35)})
    assert (decision.desired, decision.mode) == (4, "Panic")
    stable_only = decide(spec(behavior=Behavior()), 0, 100.0, {"rps": ExternalSample(35)})
    assert (stable_only.desired, stable_only.mode) == (1, "Stable")  # CRD defaults: 1 instance per 15 s
    assert decide(spec(behavior=Behavior()), 0, 100.0, {"rps": ExternalSample(0)}).desired == 0


def test_no_data_holds_within_bounds() -> None:
    decision = decide(spec(min_replicas=2), 1, 100.0, {})
    assert decision.desired == 2
    assert decision.recommended is None
    assert any("no recommendation" in r for r in decision.reasons)
    assert decide(spec(), 7, 100.0, {"rps": None}).desired == 7


def test_panic_mode_is_entered_at_the_threshold_and_held() -> None:
    s = spec(
        behavior=Behavior(
            ScaleUpPolicy(
                StablePolicy(period=0), PanicPolicy(percent=1000, panic_threshold_percent=200, panic_mode_hold=60)
            ),
            StablePolicy(period=0),
        ),
        stable_window=60.0,
        panic_window=6.0,
    )
    state: WindowState | None = None
    # 4 replicas at 10 per replica each: 100% of target
    d = decide(s, 4, 0.0, {"rps": ExternalSample(40)}, state)
    assert (d.desired, d.mode) == (4, "Stable")
    # 80 = 200% of target per replica: panic, and the panic window (6 s) sees only the burst
    d = decide(s, 4, 15.0, {"rps": ExternalSample(80)}, d.state)
    assert (d.desired, d.mode) == (8, "Panic")
    # load falls: still panic until 15 + 60, never scaling down
    d = decide(s, 8, 30.0, {"rps": ExternalSample(10)}, d.state)
    assert (d.desired, d.mode) == (8, "Panic")
    d = decide(s, 8, 75.0, {"rps": ExternalSample(10)}, d.state)
    assert (d.desired, d.mode) == (8, "Panic")
    d = decide(s, 8, 90.0, {"rps": ExternalSample(10)}, d.state)
    assert d.mode == "Stable" and d.desired < 8
    # just below the threshold (199%) never panics
    d = decide(s, 4, 0.0, {"rps": ExternalSample(79.6)})
    assert d.mode == "Stable"


def test_hold_zero_disables_panic() -> None:
    s = spec(behavior=Behavior(ScaleUpPolicy(StablePolicy(period=0), PanicPolicy(panic_mode_hold=0))))
    assert decide(s, 1, 0.0, {"rps": ExternalSample(1000)}).mode == "Stable"


def test_stable_window_averages_and_panic_window_reacts() -> None:
    s = spec(tolerance_percent=0)
    d = decide(s, 2, 0.0, {"rps": ExternalSample(20)})
    d = decide(s, 2, 15.0, {"rps": ExternalSample(20)}, d.state)
    d = decide(s, 2, 30.0, {"rps": ExternalSample(20)}, d.state)
    d = decide(s, 2, 45.0, {"rps": ExternalSample(100)}, d.state)
    assert d.recommended == 4  # mean of 20, 20, 20, 100 = 40 -> 4 replicas, not 10


def test_lost_history_delays_scale_down_by_one_stabilization_window() -> None:
    s = spec(behavior=Behavior(ScaleUpPolicy(StablePolicy(period=0)), StablePolicy(period=0, stabilization_window=60)))
    d = decide(s, 10, 0.0, {"rps": ExternalSample(20)})
    assert d.desired == 10 and "seeded" in d.reasons[0]
    d = decide(s, 10, 30.0, {"rps": ExternalSample(20)}, d.state)
    assert d.desired == 10
    d = decide(s, 10, 61.0, {"rps": ExternalSample(20)}, d.state)
    assert d.desired == 2


def test_persisted_history_survives_a_cache_loss() -> None:
    s = spec(behavior=Behavior(ScaleUpPolicy(StablePolicy(period=0)), StablePolicy(period=0, stabilization_window=60)))
    d = decide(s, 10, 0.0, {"rps": ExternalSample(100)})
    d = decide(s, 10, 15.0, {"rps": ExternalSample(20)}, d.state)
    assert d.desired == 10  # stabilized by the recommendation of 10 at t=0 (and the seed)
    persisted = WindowState.from_dict(d.state.to_dict(include_metrics=False))
    d = decide(s, 10, 30.0, {"rps": ExternalSample(20)}, persisted)
    assert d.desired == 10
    assert len(d.state.metrics.entries) == 1  # windows restarted from this pass


def test_counters_are_missing_for_one_pass_after_a_cache_loss() -> None:
    s = spec(metrics=(MetricTarget("req", 5),), min_replicas=1)
    text = "# TYPE req_total counter\nreq_total {}\n"
    first = {"p": Scrape(0.0, parse_exposition(text.format(100)))}
    second = {"p": Scrape(15.0, parse_exposition(text.format(400)))}
    d = decide(s, 3, 0.0, {"req": pod_sample("req", first, {})})
    assert d.desired == 3 and d.recommended is None
    d = decide(s, 3, 15.0, {"req": pod_sample("req", second, first)}, d.state)
    assert d.desired == 4  # 300 requests / 15 s = 20 rps / 5 per replica


def test_unready_pods_never_block_scale_down() -> None:
    s = spec(metrics=(MetricTarget("load", 10),))
    d = decide(s, 5, 0.0, {"load": PodSample(total=30.0, reporting=4, unready=1)})
    assert d.desired == 3  # Kthena keeps 5 (reference §7.4)


def test_record_applied_replaces_the_applied_count() -> None:
    s = spec(behavior=Behavior(ScaleUpPolicy(StablePolicy(instances=1, percent=0, period=60))))
    d = decide(s, 2, 0.0, {"rps": ExternalSample(100)})
    assert d.desired == 3
    state = record_applied(d.state, s, 0.0, 6)
    assert state.history.replicas[-1] == (0.0, 6)
    assert decide(s, 6, 10.0, {"rps": ExternalSample(100)}, state).desired == 7


def test_bounds_win_over_behaviour() -> None:
    s = spec(min_replicas=5, behavior=Behavior())
    d = decide(s, 1, 0.0, {"rps": ExternalSample(10)})
    assert d.desired == 5 and d.allowed == (5, 5)
    assert any("bounds" in r for r in d.reasons)
