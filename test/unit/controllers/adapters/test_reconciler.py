"""The adapter reconciler through FakeKube and a fake engine: loads, labels, intents, backoff, Events, condition."""

from __future__ import annotations

import json
from typing import Any

from kthena_py.controllers.adapters.engine import EngineCallFailed
from kthena_py.controllers.adapters.reconciler import AdapterReconciler
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.resources import PODS
from kthena_py.plan.adapters.desired import Adapter, adapter_label
from kthena_py.plan.adapters.endpoint import LoadEndpoint
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import FakeKube, RecordedEvents
from kthena_py.vocab.conditions import ADAPTERS_LOADED
from kthena_py.vocab.labels import (
    ADAPTERS_FIELD_MANAGER,
    ENTRY_VALUE,
    LORA_ADAPTERS,
    LORA_ENDPOINT,
    LORA_LOADING,
    LORA_RESTARTS,
    SERVING_ENTRY,
    SERVING_NAME,
)

REQUEST = Request("ns", "llm")
FIN = Adapter("fin", "/models/fin")
LAW = Adapter("law", "/models/law")


class FakeEngine:
    def __init__(self) -> None:
        self.loaded: dict[str, dict[str, str]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.refuse: dict[str, str] = {}
        self.probes = 0
        self.refuse_unload: set[str] = set()
        self.kube: FakeKube | None = None
        self.loading_seen: list[str | None] = []

    async def load(self, ip: str, endpoint: LoadEndpoint, adapter: Adapter) -> None:
        self.calls.append((ip, "load", adapter.name))
        if self.kube is not None:  # what the pod said while the load was under way
            pod = next(p for p in self.kube.objects(PODS, "ns") if p["status"]["podIP"] == ip)
            self.loading_seen.append((pod["metadata"].get("annotations") or {}).get(LORA_LOADING))
        if adapter.source in self.refuse:
            raise EngineCallFailed(self.refuse[adapter.source])
        self.loaded.setdefault(ip, {})[adapter.name] = adapter.source

    async def unload(self, ip: str, endpoint: LoadEndpoint, name: str) -> None:
        self.calls.append((ip, "unload", name))
        if name in self.refuse_unload:
            raise EngineCallFailed(f"{name} is busy")
        self.loaded.get(ip, {}).pop(name, None)

    async def inventory(self, ip: str, port: int) -> dict[str, str] | None:
        self.probes += 1
        return dict(self.loaded.get(ip, {}))


def ms_doc(adapters: list[Adapter]) -> dict[str, Any]:
    return {
        "apiVersion": MODELSERVINGS.api_version,
        "kind": "ModelServing",
        "metadata": {
            "name": "llm",
            "namespace": "ns",
            "uid": "ms-uid",
            "generation": 1,
            "annotations": {
                LORA_ADAPTERS: json.dumps([{"name": a.name, "source": a.source} for a in adapters]),
                LORA_ENDPOINT: "engine",
            },
        },
        "spec": {"replicas": 2, "template": {"roles": []}},
    }


def pod_doc(name: str, ip: str, *, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {SERVING_NAME: "llm", SERVING_ENTRY: ENTRY_VALUE},
            "ownerReferences": [
                {
                    "apiVersion": MODELSERVINGS.api_version,
                    "kind": "ModelServing",
                    "name": "llm",
                    "uid": "ms-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "engine", "image": "x"}]},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "engine", "restartCount": restarts, "ready": ready}],
        },
    }


class Scene:
    def __init__(self, adapters: list[Adapter], pods: list[dict[str, Any]]) -> None:
        self.kube = FakeKube()
        self.kube.put(MODELSERVINGS, ms_doc(adapters))
        for pod in pods:
            self.kube.put(PODS, pod)
        self.cache = SharedCache(self.kube, namespace="ns")
        self.cache.informer(MODELSERVINGS)
        self.cache.informer(PODS)
        self.kube.attach(self.cache)
        self.events = RecordedEvents()
        self.engine = FakeEngine()
        self.now = 1000.0
        self.reconciler = AdapterReconciler(
            self.kube, self.cache, self.events, self.engine, wall_clock=lambda: self.now
        )

    def labels(self, name: str) -> dict[str, str]:
        pod = self.kube.peek(PODS, name, "ns") or {}
        return {k: v for k, v in (pod["metadata"].get("labels") or {}).items() if k.startswith("adapter.")}

    def annotations(self, name: str) -> dict[str, str]:
        return dict((self.kube.peek(PODS, name, "ns") or {})["metadata"].get("annotations") or {})

    def condition(self) -> dict[str, Any] | None:
        status = (self.kube.peek(MODELSERVINGS, "llm", "ns") or {}).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == ADAPTERS_LOADED), None)


async def test_loads_on_ready_pods_label_them_and_report_the_condition() -> None:
    scene = Scene([FIN, LAW], [pod_doc("a", "10.0.0.1"), pod_doc("b", "10.0.0.2", ready=False)])
    scene.engine.kube = scene.kube
    result = await scene.reconciler.reconcile(REQUEST)
    assert result is None
    assert scene.engine.calls == [("10.0.0.1", "load", "fin"), ("10.0.0.1", "load", "law")]
    # The intent was on the pod while each load was under way, and is gone after.
    assert [json.loads(s or "{}").keys() for s in scene.engine.loading_seen] == [{"fin"}, {"law"}]
    assert scene.labels("a") == {adapter_label("fin"): FIN.digest, adapter_label("law"): LAW.digest}
    assert LORA_LOADING not in scene.annotations("a") and scene.annotations("a")[LORA_RESTARTS] == "0"
    assert scene.labels("b") == {}
    condition = scene.condition()
    assert condition is not None and condition["status"] == "True"
    assert condition["message"] == "adapters loaded on 1/1 pods"
    patches = [c for c in scene.kube.calls if c.verb == "patch" and c.rt is PODS]
    assert patches and all(c.options.get("field_manager") == ADAPTERS_FIELD_MANAGER for c in patches)
    # Converged: another pass makes no call and no write.
    before = len(scene.kube.calls)
    await scene.reconciler.reconcile(REQUEST)
    assert len(scene.engine.calls) == 2 and not [c for c in scene.kube.calls[before:] if c.verb != "get"]


async def test_a_refused_load_backs_off_with_a_warning_naming_pod_adapter_and_message() -> None:
    scene = Scene([FIN], [pod_doc("a", "10.0.0.1")])
    scene.engine.refuse[FIN.source] = "no adapter_config.json"
    result = await scene.reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after is not None and 0.9 <= result.requeue_after <= 1.0
    [event] = scene.events.events
    assert event.type == "Warning" and event.reason == "AdapterLoadFailed"
    assert "pod a" in event.message and "adapter fin" in event.message and "no adapter_config.json" in event.message
    condition = scene.condition()
    assert condition is not None and condition["status"] == "False" and condition["reason"] == "AdapterLoadFailed"
    assert "a: fin: no adapter_config.json" in condition["message"]
    assert LORA_LOADING not in scene.annotations("a")
    await scene.reconciler.reconcile(REQUEST)  # within the backoff: no call
    assert len(scene.engine.calls) == 1
    scene.now += 1.0
    await scene.reconciler.reconcile(REQUEST)
    assert len(scene.engine.calls) == 2 and "attempt 2, next in 2s" in scene.events.events[-1].message


async def test_a_restart_drops_the_labels_and_reloads() -> None:
    scene = Scene([FIN], [pod_doc("a", "10.0.0.1")])
    await scene.reconciler.reconcile(REQUEST)
    restarted = pod_doc("a", "10.0.0.1", restarts=1)
    restarted["metadata"]["labels"] = scene.kube.peek(PODS, "a", "ns")["metadata"]["labels"]  # type: ignore[index]
    restarted["metadata"]["annotations"] = scene.annotations("a")
    scene.kube.put(PODS, restarted)
    scene.engine.loaded.clear()
    await scene.reconciler.reconcile(REQUEST)
    assert [c[1:] for c in scene.engine.calls] == [("load", "fin"), ("load", "fin")]
    assert scene.labels("a") == {adapter_label("fin"): FIN.digest} and scene.annotations("a")[LORA_RESTARTS] == "1"


async def test_an_adapter_loaded_without_its_label_is_adopted_and_a_removed_one_unloaded() -> None:
    scene = Scene([FIN], [pod_doc("a", "10.0.0.1")])
    scene.engine.loaded["10.0.0.1"] = {"fin": FIN.source}  # loaded by a manager killed before its label write
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls == [] and scene.labels("a") == {adapter_label("fin"): FIN.digest}
    scene.kube.put(MODELSERVINGS, ms_doc([]))
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls == [("10.0.0.1", "unload", "fin")] and scene.labels("a") == {}
    assert scene.condition() is None


class SlowEngine(FakeEngine):
    """Loads that take a while, counting how many are in flight at once (per pod and in all)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: dict[str, int] = {}
        self.most_per_pod = 0
        self.most = 0

    async def load(self, ip: str, endpoint: LoadEndpoint, adapter: Adapter) -> None:
        import asyncio

        self.in_flight[ip] = self.in_flight.get(ip, 0) + 1
        self.most_per_pod = max(self.most_per_pod, self.in_flight[ip])
        self.most = max(self.most, sum(self.in_flight.values()))
        await asyncio.sleep(0.01)
        self.in_flight[ip] -= 1
        await super().load(ip, endpoint, adapter)


async def test_loads_are_bounded_per_pod_and_per_modelserving_and_counted() -> None:
    from kthena_py.runtime.metrics import REGISTRY

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, {"namespace": "ns", "modelserving": "llm", **labels}) or 0.0

    adapters = [Adapter(f"a{i}", f"/models/a{i}") for i in range(3)]
    scene = Scene(adapters, [pod_doc(f"p{i}", f"10.0.0.{i}") for i in range(5)])
    engine = SlowEngine()
    scene.reconciler.engine = engine
    scene.reconciler.max_loads = 2
    before = sample("kthena_adapter_calls_total", call="load", result="ok")
    await scene.reconciler.reconcile(REQUEST)
    assert len(engine.calls) == 15
    assert engine.most_per_pod == 1 and engine.most == 2
    assert sample("kthena_adapter_calls_total", call="load", result="ok") - before == 15
    assert sample("kthena_adapter_pods", state="loaded") == 5 and sample("kthena_adapter_pods", state="pending") == 0


async def test_a_changed_source_is_unloaded_then_loaded_and_not_loaded_over_a_failed_unload() -> None:
    scene = Scene([FIN], [pod_doc("a", "10.0.0.1")])
    await scene.reconciler.reconcile(REQUEST)
    fin2 = Adapter("fin", "/models/fin-v2")
    scene.kube.put(MODELSERVINGS, ms_doc([fin2]))
    scene.engine.refuse_unload.add("fin")
    await scene.reconciler.reconcile(REQUEST)
    assert [c[1:] for c in scene.engine.calls] == [("load", "fin"), ("unload", "fin")]
    assert scene.events.events[-1].reason == "AdapterUnloadFailed" and "fin is busy" in scene.events.events[-1].message
    assert scene.labels("a") == {adapter_label("fin"): FIN.digest}  # still the old source, as the engine has it
    scene.engine.refuse_unload.clear()
    await scene.reconciler.reconcile(REQUEST)  # within the backoff: nothing
    assert len(scene.engine.calls) == 2
    scene.now += 1.0
    await scene.reconciler.reconcile(REQUEST)
    assert [c[1:] for c in scene.engine.calls][2:] == [("unload", "fin"), ("load", "fin")]
    assert scene.labels("a") == {adapter_label("fin"): fin2.digest} and scene.engine.loaded["10.0.0.1"] == {
        "fin": fin2.source
    }


def with_intents(pod: dict[str, Any], intents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    pod["metadata"]["annotations"] = {LORA_LOADING: json.dumps(intents), LORA_RESTARTS: "0"}
    return pod


async def test_the_intent_names_this_process_as_its_writer() -> None:
    scene = Scene([FIN], [pod_doc("a", "10.0.0.1")])
    scene.engine.kube = scene.kube
    await scene.reconciler.reconcile(REQUEST)
    [seen] = scene.engine.loading_seen
    assert json.loads(seen or "{}") == {
        "fin": {"digest": FIN.digest, "since": 1000.0, "owner": scene.reconciler.identity}
    }
    assert scene.reconciler.identity != AdapterReconciler(scene.kube, scene.cache, scene.events, scene.engine).identity


async def test_a_dead_managers_intent_is_waited_for_within_the_grace_then_sent_once() -> None:
    intent = {"fin": {"digest": FIN.digest, "since": 1000.0 - 5, "owner": "dead"}}
    scene = Scene([FIN], [with_intents(pod_doc("a", "10.0.0.1"), intent)])
    result = await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls == [] and scene.engine.probes == 1
    assert result is not None and result.requeue_after == 1.0  # the engine is asked again in a second
    scene.now = 1000.0 - 5 + 30  # the grace is over and the engine still does not list it: never sent
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls == [("10.0.0.1", "load", "fin")]
    assert scene.labels("a") == {adapter_label("fin"): FIN.digest} and LORA_LOADING not in scene.annotations("a")
    await scene.reconciler.reconcile(REQUEST)
    assert len(scene.engine.calls) == 1


async def test_a_dead_managers_intent_that_landed_is_labelled_without_a_load() -> None:
    intent = {"fin": {"digest": FIN.digest, "since": 1000.0 - 200, "owner": "dead"}}
    scene = Scene([FIN], [with_intents(pod_doc("a", "10.0.0.1"), intent)])
    scene.engine.loaded["10.0.0.1"] = {"fin": FIN.source}
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls == [] and scene.labels("a") == {adapter_label("fin"): FIN.digest}
    assert LORA_LOADING not in scene.annotations("a")


async def test_an_adapter_removed_while_its_load_was_in_doubt_is_unloaded_once_it_shows_up() -> None:
    intent = {"law": {"digest": LAW.digest, "since": 1000.0 - 2, "owner": "dead"}}
    scene = Scene([FIN], [with_intents(pod_doc("a", "10.0.0.1"), intent)])
    await scene.reconciler.reconcile(REQUEST)  # law left the set; its load is in doubt: kept, not unloaded yet
    assert scene.engine.calls == [("10.0.0.1", "load", "fin")]
    assert set(json.loads(scene.annotations("a")[LORA_LOADING])) == {"law"}
    scene.engine.loaded["10.0.0.1"]["law"] = LAW.source  # the dead manager's load lands
    scene.now += 1.0
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls[1:] == [("10.0.0.1", "unload", "law")]
    assert scene.engine.loaded["10.0.0.1"] == {"fin": FIN.source}
    assert scene.labels("a") == {adapter_label("fin"): FIN.digest} and LORA_LOADING not in scene.annotations("a")
    await scene.reconciler.reconcile(REQUEST)
    assert len(scene.engine.calls) == 2


async def test_an_in_doubt_load_of_a_removed_adapter_that_never_lands_is_forgotten() -> None:
    intent = {"law": {"digest": LAW.digest, "since": 1000.0 - 2, "owner": "dead"}}
    scene = Scene([], [with_intents(pod_doc("a", "10.0.0.1"), intent)])
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls == [] and LORA_LOADING in scene.annotations("a")
    scene.now += 30.0
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls == [] and LORA_LOADING not in scene.annotations("a")


async def test_a_refused_unload_of_a_landed_orphan_keeps_its_intent_and_retries() -> None:
    intent = {"law": {"digest": LAW.digest, "since": 1000.0 - 2, "owner": "dead"}}
    scene = Scene([], [with_intents(pod_doc("a", "10.0.0.1"), intent)])
    scene.engine.loaded["10.0.0.1"] = {"law": LAW.source}
    scene.engine.refuse_unload.add("law")
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls == [("10.0.0.1", "unload", "law")] and LORA_LOADING in scene.annotations("a")
    assert scene.events.events[-1].reason == "AdapterUnloadFailed"
    scene.engine.refuse_unload.clear()
    scene.now += 1.0
    await scene.reconciler.reconcile(REQUEST)
    assert scene.engine.calls[1:] == [("10.0.0.1", "unload", "law")] and LORA_LOADING not in scene.annotations("a")
