"""A sharded replica that gives namespaces away stops exporting their series and drops what it kept for them.

Each holder of per-object series is given objects in two namespaces, asked to forget one, and read back through
the registry: the other namespace's series stay as they were.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from kthena_py.controllers import register_all
from kthena_py.controllers.adapters import metrics as adapter_metrics
from kthena_py.controllers.autoscaling.history import HistoryStore
from kthena_py.controllers.autoscaling.metrics import CURRENT_REPLICAS, METRIC_VALUE, PolicySeries
from kthena_py.controllers.eviction.metrics import READY_UNITS, BudgetSeries
from kthena_py.controllers.modelcache import metrics as cache_metrics
from kthena_py.controllers.modelserving.metrics import WaitingSeries
from kthena_py.controllers.modelserving.modelcache import GATED, _GatedSeries
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.metrics import REGISTRY, label_sets
from kthena_py.runtime.reconcile import ForgetsNamespaces
from kthena_py.testing.fake import FakeKube


def leaving_a(namespace: str) -> bool:
    return namespace == "fg-a"


def namespaces(gauge: Gauge) -> set[str]:
    return {labels["namespace"] for labels in label_sets(gauge)}


def test_waiting_counts_drop_the_modelservings_given_away() -> None:
    gauge = Gauge("fg_waiting", "test", ("reason", "resource"), registry=CollectorRegistry())
    series = WaitingSeries(gauge)
    series.set("fg-a", "one", ("InsufficientGPU", "nvidia.com/gpu"))
    series.set("fg-b", "two", ("InsufficientGPU", "nvidia.com/gpu"))
    series.forget_namespaces(leaving_a)
    assert [(s.labels, s.value) for f in gauge.collect() for s in f.samples] == [
        ({"reason": "InsufficientGPU", "resource": "nvidia.com/gpu"}, 1.0)
    ]


def test_gated_counts_drop_the_modelservings_given_away() -> None:
    series = _GatedSeries()
    series.set(("fg-a", "one"), "FgReason")
    series.set(("fg-b", "two"), "FgReason")
    series.forget_namespaces(leaving_a)
    assert REGISTRY.get_sample_value("kthena_modelserving_model_cache_gated", {"reason": "FgReason"}) == 1.0
    series.forget_namespaces(lambda ns: True)
    assert not [labels for labels in label_sets(GATED) if labels.get("reason") == "FgReason"]


def test_budget_gauges_of_the_namespaces_given_away_are_removed() -> None:
    series = BudgetSeries()
    series.set("fg-a", "ms", {"*": (2, 1, 1)})
    series.set("fg-b", "ms", {"*": (3, 2, 1)})
    series.forget_namespaces(leaving_a)
    assert {"fg-b"} <= namespaces(READY_UNITS) and "fg-a" not in namespaces(READY_UNITS)
    series.forget_namespaces(lambda ns: ns == "fg-b")


def test_policy_gauges_and_memories_of_the_namespaces_given_away_are_dropped() -> None:
    series = PolicySeries()
    for ns in ("fg-a", "fg-b"):
        series.target(ns, "p", "t", current=1, desired=2, panic=False)
        series.metric(ns, "p", "t", "m", 0.5)
    series.forget_namespaces(leaving_a)
    for gauge in (CURRENT_REPLICAS, METRIC_VALUE):
        assert "fg-b" in namespaces(gauge) and "fg-a" not in namespaces(gauge)
    series.forget_namespaces(lambda ns: ns == "fg-b")
    store = HistoryStore()
    for ns in ("fg-a", "fg-b"):
        store.open({"metadata": {"namespace": ns, "name": "p", "uid": f"u-{ns}"}})
    store.forget_namespaces(leaving_a)
    assert len(store) == 1


def test_modelcache_and_adapter_series_of_the_namespaces_given_away_are_removed() -> None:
    for ns in ("fg-a", "fg-b"):
        cache_metrics.set_phase(ns, "c", "Ready")
        cache_metrics.set_model(ns, "c", ("llama", "bf16", "8192"))
        adapter_metrics.set_pods(ns, "ms", 1, 0)
    cache_metrics.forget_namespaces(leaving_a)
    adapter_metrics.forget_namespaces(leaving_a)
    for gauge in (cache_metrics.PHASE, cache_metrics.MODEL_INFO, adapter_metrics.PODS):
        assert "fg-b" in namespaces(gauge) and "fg-a" not in namespaces(gauge)
    cache_metrics.forget_namespaces(lambda ns: ns == "fg-b")
    adapter_metrics.forget_namespaces(lambda ns: ns == "fg-b")


def test_every_reconciler_that_keeps_series_forgets_on_a_release() -> None:
    manager = Manager(FakeKube())
    register_all(manager, eviction_budget=True)
    forgetting = {
        type(c.reconciler).__name__ for c in manager.controllers if isinstance(c.reconciler, ForgetsNamespaces)
    }
    assert {
        "ScheduledReconciler",
        "ModelCacheGateReconciler",
        "EvictionBudgetReconciler",
        "TargetReconciler",
        "HeterogeneousReconciler",
        "CacheReconciler",
        "AdapterReconciler",
    } <= forgetting
