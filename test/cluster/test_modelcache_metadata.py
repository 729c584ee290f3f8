"""A staged GGUF model's metadata reaches the ModelCache status (cluster tier, the real parts).

The fake hub serves a synthetic GGUF (written by :mod:`kthena_py.testing.artifacts.gguf`) and a ``config.json``;
the download pod runs ``kthena-py download`` on a mini-kubelet node, its result carries what the header and the
config say, and the manager writes it into ``status.gguf`` / ``status.modelConfig``. Every wait is bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kthena_py.controllers.resources import MODELCACHES
from kthena_py.kube import KubeClient
from kthena_py.testing.artifacts import ArtifactServer, HubRepo
from kthena_py.testing.artifacts.gguf import llama_like
from kthena_py.testing.kubelet import MiniKubelet

from .mcutil import RUNNER, hub_secret, modelcache, placement, running_manager, wait_cache
from .test_modelcache import CLAIM_STORAGE, bound_claim

pytestmark = pytest.mark.cluster


async def test_a_staged_gguf_and_config_show_in_the_status(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    make_mini_kubelet: Callable[..., MiniKubelet],
    make_hostpath_volume: Callable[..., str],
) -> None:
    kubelet = make_mini_kubelet(runner=RUNNER)
    await bound_claim(kube, namespace, make_hostpath_volume)
    weights = llama_like(
        architecture="qwen2",
        name="Tiny Qwen",
        license="mit",
        context_length=32768,
        embedding_length=896,
        block_count=24,
        head_count=14,
        head_count_kv=2,
        file_type=18,
        vocabulary=2000,
        tensor_count=290,
        trailer=bytes(range(256)) * 256,
    )
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }
    repo = HubRepo(
        "acme/tiny-gguf",
        {"tiny-qwen-Q6_K.gguf": weights, "config.json": json.dumps(config).encode()},
        lfs={"tiny-qwen-Q6_K.gguf"},
    )
    async with ArtifactServer() as server:
        server.add_repo(repo)
        await hub_secret(kube, namespace, server)
        doc = modelcache("tiny-gguf", repo, CLAIM_STORAGE, placement=placement([kubelet.node.name]))
        async with running_manager(kubeconfig, namespace, tmp_path / "manager.log"):
            await kube.create(MODELCACHES, doc, namespace)
            mc = await wait_cache(kube, namespace, "tiny-gguf", "Ready")

    status = mc["status"]
    assert status["gguf"] == {
        "fileVersion": 3,
        "architecture": "qwen2",
        "modelName": "Tiny Qwen",
        "license": "mit",
        "contextLength": 32768,
        "embeddingSize": 896,
        "layerCount": 24,
        "headCount": 14,
        "headCountKV": 2,
        "quantization": "Q6_K",
        "tensorCount": 290,
    }
    assert status["modelConfig"] == {
        "architecture": "Qwen2ForCausalLM",
        "modelType": "qwen2",
        "contextLength": 32768,
        "torchDtype": "bfloat16",
    }
    assert sorted(f["name"] for f in status["files"]) == ["config.json", "tiny-qwen-Q6_K.gguf"]
