"""``kthena-py rollout status|history|undo`` against the cluster tier, with the manager running in-process.

The commands run as real subprocesses (``python -m kthena_py rollout ...``) with the tier's kubeconfig, the way a
user runs them; the claims are checked on the cluster's objects (pod images and revision labels), not only on
what the commands print.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.testing.controlplane.kwokstages import BAD_IMAGE_PREFIX
from kthena_py.testing.wait import eventually

from .msutil import live_pods, modelserving, role, running_manager, wait_available

pytestmark = pytest.mark.cluster

REVISION = "modelserving.volcano.sh/revision"
BAD = f"{BAD_IMAGE_PREFIX}engine:missing"


def _rolling(name: str, replicas: int, **config: Any) -> KubeObject:
    doc = modelserving(name, replicas=replicas, roles=[role("decode")])
    doc["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": config}
    return doc


async def _set_image(kube: KubeClient, namespace: str, name: str, image: str) -> None:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    roles = ms["spec"]["template"]["roles"]
    for r in roles:
        r["entryTemplate"]["spec"]["containers"][0]["image"] = image
    await kube.patch(MODELSERVINGS, name, {"spec": {"template": {"roles": roles}}}, namespace)


async def _cli(kubeconfig: Path, namespace: str, *argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "rollout",
        *argv,
        "-n",
        namespace,
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _run(kubeconfig: Path, namespace: str, *argv: str, timeout: float = 120) -> tuple[int, str, str]:
    proc = await _cli(kubeconfig, namespace, *argv)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _pods(kube: KubeClient, namespace: str, name: str) -> dict[str, tuple[str, str]]:
    live = await live_pods(kube, namespace, name)
    return {n: (p["spec"]["containers"][0]["image"], p["metadata"]["labels"][REVISION]) for n, p in live.items()}


async def _update_condition(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    return next((c for c in (ms.get("status") or {}).get("conditions") or [] if c["type"] == "UpdateInProgress"), {})


async def test_status_follows_a_stalled_rollout_until_it_completes(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _rolling("st", 3, maxUnavailable=1), namespace)
        await wait_available(kube, namespace, "st", 3)
        code, out, err = await _run(kubeconfig, namespace, "status", "st", "--watch=false")
        assert code == 0, err
        assert out.startswith('modelserving "st" successfully rolled out (3 of 3 ServingGroups updated, 3 available')
        await _set_image(kube, namespace, "st", BAD)

        async def stalled() -> bool:
            return bool((await _update_condition(kube, namespace, "st")).get("reason") == "UpdateStalled")

        await eventually(stalled, timeout=180, description="st UpdateInProgress UpdateStalled")
        code, out, _ = await _run(kubeconfig, namespace, "status", "st", "--watch=false")
        assert code == 1 and "UpdateStalled" in out
        code, out, err = await _run(kubeconfig, namespace, "status", "st", "--timeout", "2s")
        assert code == 1 and "timed out waiting for the rollout of st to finish" in err
        follower = await _cli(kubeconfig, namespace, "status", "st", "--timeout", "5m")
        assert follower.stdout is not None
        first = (await asyncio.wait_for(follower.stdout.readline(), 120)).decode()
        assert first.startswith('Waiting for modelserving "st" rollout to finish') and "UpdateStalled" in first
        await asyncio.sleep(2)
        assert follower.returncode is None  # still following the stalled rollout
        await _set_image(kube, namespace, "st", "nginx:1.28")
        out_bytes, err_bytes = await asyncio.wait_for(follower.communicate(), 300)
        lines = out_bytes.decode().splitlines()
        assert follower.returncode == 0, err_bytes.decode()
        assert lines[-1].startswith('modelserving "st" successfully rolled out (3 of 3 ServingGroups updated')
        images = {image for image, _ in (await _pods(kube, namespace, "st")).values()}
        assert images == {"nginx:1.28"}


async def test_history_lists_revisions_and_undo_returns_every_group(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _rolling("un", 3, maxUnavailable=2), namespace)
        first = (await wait_available(kube, namespace, "un", 3))["status"]["currentRevision"]
        await _set_image(kube, namespace, "un", "nginx:1.28")
        code, out, err = await _run(kubeconfig, namespace, "status", "un", "--timeout", "5m")
        assert code == 0, err
        second = (await wait_available(kube, namespace, "un", 3))["status"]["currentRevision"]
        assert second != first
        assert set((await _pods(kube, namespace, "un")).values()) == {("nginx:1.28", second)}

        code, out, err = await _run(kubeconfig, namespace, "history", "un")
        assert code == 0, err
        rows = [line.split() for line in out.splitlines()]
        assert rows[0] == ["REVISION", "HASH", "STATUS", "PODS", "IMAGES", "CHANGE"]
        assert [row[:4] for row in rows[1:]] == [["1", first, "-", "0"], ["2", second, "current,update", "3"]]
        assert out.splitlines()[2].endswith("decode=nginx:1.28  decode: image nginx:1.27 -> nginx:1.28")
        code, out, err = await _run(kubeconfig, namespace, "history", "un", "--revision", "1")
        assert code == 0, err
        assert f"hash: {first}" in out and "image: nginx:1.27" in out

        # A role scaled since the first revision keeps its current replicas through the undo.
        ms = await kube.get(MODELSERVINGS, "un", namespace)
        roles = ms["spec"]["template"]["roles"]
        roles[0]["replicas"] = 2
        await kube.patch(MODELSERVINGS, "un", {"spec": {"template": {"roles": roles}}}, namespace)
        await wait_available(kube, namespace, "un", 3)
        code, out, err = await _run(kubeconfig, namespace, "undo", "un")
        assert code == 0, err
        assert out.splitlines() == [
            f'modelserving "un" rolled back to revision 1 ({first})',
            "  decode: image nginx:1.28 -> nginx:1.27",
        ]
        code, out, err = await _run(kubeconfig, namespace, "status", "un", "--timeout", "5m")
        assert code == 0, err

        async def all_back() -> bool:
            pods = await _pods(kube, namespace, "un")
            return len(pods) == 6 and set(pods.values()) == {("nginx:1.27", first)}

        await eventually(all_back, timeout=180, description="every group back on the first revision")
        ms = await wait_available(kube, namespace, "un", 3)
        assert ms["status"]["currentRevision"] == ms["status"]["updateRevision"] == first
        assert ms["spec"]["template"]["roles"][0]["replicas"] == 2
        code, out, err = await _run(kubeconfig, namespace, "undo", "un", "--to-revision", "1")
        assert code == 0 and "skipped rollback" in out, err
        code, out, _ = await _run(kubeconfig, namespace, "undo", "un", "--to-revision", "9")
        assert code == 1
        code, out, _ = await _run(kubeconfig, namespace, "history", "missing")
        assert code == 1
