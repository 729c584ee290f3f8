"""``kthena-py status`` for ModelPools as a process against a real kube-apiserver.

The pool, its members' ModelServings and one member's pod are created for real (statuses through the ``status``
subresource); the command reads them with the kubeconfig it is given.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers.resources import MODELPOOLS, MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelpool.demand import demand_annotation, format_demand_time

pytestmark = pytest.mark.envtest


def _ms(name: str, replicas: int) -> dict[str, Any]:
    container = {"name": "engine", "image": "vllm/vllm-openai:v0.10.1"}
    role = {
        "name": "server",
        "replicas": 1,
        "workerReplicas": 0,
        "entryTemplate": {"spec": {"containers": [container]}},
    }
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "template": {"roles": [role]}},
    }


async def _run(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "status",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


async def test_a_pool_is_shown_with_its_members_live_state_and_listed(
    kube: KubeClient, kubeconfig: Path, namespace: str
) -> None:
    await kube.create(MODELSERVINGS, _ms("llama", 1), namespace)
    await kube.create(MODELSERVINGS, _ms("qwen", 0), namespace)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llama-0-server-0-0", "labels": {"modelserving.volcano.sh/name": "llama"}},
        "spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.10.1"}]},
    }
    await kube.create(PODS, pod, namespace)
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    await kube.patch(PODS, "llama-0-server-0-0", {"status": ready}, namespace, subresource="status")
    pool = {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelPool",
        "metadata": {"name": "gpu0", "annotations": {demand_annotation("qwen"): format_demand_time(1.8e9)}},
        "spec": {"members": [{"modelServingRef": {"name": m}} for m in ("llama", "qwen", "gone")], "default": "llama"},
    }
    await kube.create(MODELPOOLS, pool, namespace)
    status = {
        "phase": "Ready",
        "residentMember": "llama",
        "residentMembers": ["llama"],
        "lastSwap": {"to": "llama", "durationSeconds": 20},
    }
    await kube.patch(MODELPOOLS, "gpu0", {"status": status}, namespace, subresource="status")

    code, out, err = await _run(kubeconfig, "gpu0", "-n", namespace, "-o", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert (doc["phase"], doc["residentMembers"], doc["swapBudget"], doc["slots"]) == ("Ready", ["llama"], "300s", 1)
    members = {m["name"]: (m["phase"], m["resident"], m["replicas"], m["podsReady"], m["pods"]) for m in doc["members"]}
    assert members == {
        "llama": ("Ready", True, 1, 1, 1),
        "qwen": ("Stopped", False, 0, 0, 0),
        "gone": ("Missing", False, None, 0, 0),
    }
    assert doc["members"][1]["lastRequestSecondsAgo"] is not None

    code, out, err = await _run(kubeconfig, "-n", namespace)
    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split() == ["MODELPOOL", "RESIDENT", "PENDING", "PHASE", "SLOTS", "MEMBERS", "LAST", "SWAP"]
    assert row.split() == ["gpu0", "llama", "-", "Ready", "1", "llama,qwen,gone", "(free)->llama", "20.0s"]

    code, out, err = await _run(kubeconfig, "modelpool/nope", "-n", namespace)
    assert (code, out) == (1, "")
    assert err == f'kthena-py: error: modelpool "nope" not found in namespace {namespace}\n'
