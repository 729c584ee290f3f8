"""``kthena-py manager --controllers``: the real manager process runs only the controllers the flag enables."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _run(kubeconfig: Path, namespace: str, controllers: str) -> tuple[str, list[dict[str, object]]]:
    """Start the manager with ``--controllers=controllers``; return its /metrics once ready and its log lines."""
    health, metrics = _free_port(), _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "manager",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        namespace,
        f"--controllers={controllers}",
        "--health-probe-bind-address",
        f"127.0.0.1:{health}",
        "--metrics-bind-address",
        f"127.0.0.1:{metrics}",
        "--webhook-port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with aiohttp.ClientSession() as s:

            async def ready() -> bool:
                try:
                    async with s.get(f"http://127.0.0.1:{health}/readyz") as r:
                        return r.status == 200
                except aiohttp.ClientError:
                    return False

            await eventually(ready, timeout=60, description="manager ready")
            async with s.get(f"http://127.0.0.1:{metrics}/metrics") as r:
                body = await r.text()
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0
        return body, [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _reconcilers(metrics: str) -> set[str]:
    prefix = 'controller_runtime_max_concurrent_reconciles{controller="'
    return {line[len(prefix) :].split('"', 1)[0] for line in metrics.splitlines() if line.startswith(prefix)}


async def test_modelserving_only(kubeconfig: Path, namespace: str) -> None:
    metrics, log = await _run(kubeconfig, namespace, "modelserving")
    assert _reconcilers(metrics) == {
        "modelserving",
        "modelserving-rollout",
        "modelserving-gang",
        "modelserving-scheduling",
        "modelserving-modelcache",
        "modelserving-adapters",
    }
    (start,) = [line for line in log if line.get("event") == "starting manager"]
    assert start["controllers"] == [
        "modelserving",
        "modelserving-rollout",
        "modelserving-gang",
        "modelserving-scheduling",
        "modelserving-modelcache",
        "modelserving-adapters",
    ]
    assert start["disabled"] == ["modelbooster", "autoscaler", "modelcache", "modelpool"]
    assert start["event_loop"] == "uvloop"  # the default (--event-loop auto) where uvloop is installed


async def test_all_but_the_autoscaler(kubeconfig: Path, namespace: str) -> None:
    metrics, _ = await _run(kubeconfig, namespace, "*,-autoscaler")
    assert _reconcilers(metrics) == {
        "modelserving",
        "modelserving-rollout",
        "modelserving-gang",
        "modelserving-scheduling",
        "modelserving-modelcache",
        "modelserving-adapters",
        "modelbooster",
        "modelcache",
        "modelpool",
    }
