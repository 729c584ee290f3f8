"""Helpers for the ModelBooster tests in the cluster tier: booster manifests, the networking CRDs, waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kthena_py.controllers.resources import MODELBOOSTERS, MODELROUTES, MODELSERVERS, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import EVENTS
from kthena_py.testing.controlplane import EnvTest
from kthena_py.testing.controlplane.process import wait_for
from kthena_py.testing.wait import eventually

CRD_DIR = Path(__file__).resolve().parent.parent / "crds"
NETWORKING_CRDS = sorted(CRD_DIR.glob("networking.serving.volcano.sh_*.yaml"))
CRD_NAMES = ("modelservers.networking.serving.volcano.sh", "modelroutes.networking.serving.volcano.sh")
_CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
UID_LABEL = "workload.serving.volcano.sh/model-uid"
CHILDREN = {"ModelServing": MODELSERVINGS, "ModelServer": MODELSERVERS, "ModelRoute": MODELROUTES}


def booster(
    name: str = "llm",
    *,
    replicas: int = 1,
    image: str = "vllm/vllm-openai:v0.10.1",
    pods: int = 1,
    model_name: str | None = None,
) -> KubeObject:
    """An aggregated vLLM booster: ``replicas`` ServingGroups of one entry pod (plus ``pods - 1`` Ray workers)."""
    spec: dict[str, Any] = {
        "backend": {
            "name": "b1",
            "type": "vLLM",
            "modelURI": "hf://Qwen/Qwen2.5-0.5B-Instruct",
            "replicas": replicas,
            "workers": [
                {
                    "type": "server",
                    "image": image,
                    "replicas": 1,
                    "pods": pods,
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                    "config": {"max-model-len": 4096},
                }
            ],
        }
    }
    if model_name is not None:
        spec["name"] = model_name
    return {"metadata": {"name": name}, "spec": spec}


def pd_booster(name: str = "pd") -> KubeObject:
    """A disaggregated booster: one prefill and one decode instance per ServingGroup."""
    worker = {"image": "vllm/vllm-openai:v0.10.1", "replicas": 1, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {
        "metadata": {"name": name},
        "spec": {
            "backend": {
                "name": "b1",
                "type": "vLLMDisaggregated",
                "modelURI": "hf://Qwen/Qwen2.5-0.5B-Instruct",
                "replicas": 1,
                "workers": [{"type": "prefill", **worker}, {"type": "decode", **worker}],
            }
        },
    }


def _crds_gone(tier: EnvTest) -> bool:
    return all(tier.client.raw("GET", f"{_CRD_PATH}/{name}")[0] == 404 for name in CRD_NAMES)


def remove_networking_crds(tier: EnvTest) -> None:
    """Delete the networking CRDs (if installed) and wait until the API server no longer has them."""
    for name in CRD_NAMES:
        tier.client.delete(f"{_CRD_PATH}/{name}")
    wait_for("networking CRDs deleted", lambda: True if _crds_gone(tier) else None, timeout=120, interval=0.2)


def conditions(obj: KubeObject) -> dict[str, KubeObject]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def wait_active(kube: KubeClient, namespace: str, name: str, timeout: float = 180) -> KubeObject:
    """Wait until the booster has ``Active=True`` and has observed its generation."""

    async def check() -> KubeObject | None:
        mb = await kube.get(MODELBOOSTERS, name, namespace)
        active = conditions(mb).get("Active", {}).get("status") == "True"
        current = (mb.get("status") or {}).get("observedGeneration") == mb["metadata"]["generation"]
        return mb if active and current else None

    result: KubeObject = await eventually(check, timeout=timeout, description=f"ModelBooster {name} Active")
    return result


async def wait_observed(kube: KubeClient, namespace: str, name: str, generation: int, timeout: float = 120) -> None:
    """Wait until the booster's ``status.observedGeneration`` reached ``generation``."""

    async def check() -> bool:
        mb = await kube.get(MODELBOOSTERS, name, namespace)
        return int((mb.get("status") or {}).get("observedGeneration") or 0) >= generation

    await eventually(check, timeout=timeout, description=f"ModelBooster {name} observed generation {generation}")


async def children(kube: KubeClient, namespace: str, uid: str) -> dict[str, list[KubeObject]]:
    """The live ModelServings, ModelServers and ModelRoutes labelled with a booster's uid."""
    out: dict[str, list[KubeObject]] = {}
    for kind, rt in CHILDREN.items():
        items = (await kube.list(rt, namespace, label_selector=f"{UID_LABEL}={uid}")).items
        out[kind] = [o for o in items if not o["metadata"].get("deletionTimestamp")]
    return out


async def booster_events(kube: KubeClient, namespace: str, name: str) -> dict[str, list[str]]:
    """Reason -> messages of the Events about ModelBooster ``name``."""
    selector = f"involvedObject.kind=ModelBooster,involvedObject.name={name}"
    out: dict[str, list[str]] = {}
    for event in (await kube.list(EVENTS, namespace, field_selector=selector)).items:
        out.setdefault(event["reason"], []).append(event["message"])
    return out
