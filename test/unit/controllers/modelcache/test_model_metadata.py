"""The ModelCache reconciler with a result that carries model metadata: the status shows it, the model-info gauge
has one series for it (replaced when the model changes, removed with the cache)."""

from __future__ import annotations

import json

from kthena_py.controllers.modelcache import metrics
from kthena_py.controllers.resources import MODELCACHES
from kthena_py.kube.resources import PERSISTENT_VOLUME_CLAIMS
from kthena_py.runtime.metrics import REGISTRY

from .test_reconciler import CLAIM, SHA, World, _cache

GGUF = {"architecture": "llama", "contextLength": 4096, "quantization": "Q4_K_M", "layerCount": 22}


def _ok_with_metadata() -> str:
    files = [{"name": "m-Q4_K_M.gguf", "size": 1024, "sha256": SHA}]
    return json.dumps({"ok": True, "files": files, "gguf": GGUF, "modelConfig": {"modelType": "llama"}})


def _info(namespace: str, name: str, *labels: str) -> float | None:
    keys = ("architecture", "quantization", "context_length")
    return REGISTRY.get_sample_value(
        "kthena_modelcache_model_info", {"namespace": namespace, "name": name, **dict(zip(keys, labels, strict=True))}
    )


async def test_the_status_and_the_gauge_show_the_staged_model() -> None:
    world = World((MODELCACHES, _cache()), (PERSISTENT_VOLUME_CLAIMS, CLAIM))
    await world.reconcile()
    (job,) = world.jobs()
    world.run_job(job, "succeeded", _ok_with_metadata())
    await world.reconcile()
    status = world.mc()["status"]
    assert status["phase"] == "Ready" and status["gguf"] == GGUF and status["modelConfig"] == {"modelType": "llama"}
    assert _info("ns", "llama", "llama", "Q4_K_M", "4096") == 1.0
    world.restart()  # converged: nothing written again, the gauge is rebuilt from the status
    await world.reconcile()
    assert world.writes() == [] and _info("ns", "llama", "llama", "Q4_K_M", "4096") == 1.0


def test_the_gauge_replaces_a_changed_model_and_forgets_a_deleted_cache() -> None:
    metrics.set_model("other", "c", ("llama", "Q4_K_M", "4096"))
    metrics.set_model("other", "c", ("qwen2", "Q8_0", "32768"))
    assert _info("other", "c", "llama", "Q4_K_M", "4096") is None
    assert _info("other", "c", "qwen2", "Q8_0", "32768") == 1.0
    metrics.set_model("other", "c", None)
    assert _info("other", "c", "qwen2", "Q8_0", "32768") is None
    metrics.set_model("other", "d", ("gpt2", "", ""))
    metrics.forget("other", "d")
    assert _info("other", "d", "gpt2", "", "") is None
