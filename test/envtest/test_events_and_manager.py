"""The event recorder and the real `kthena-py manager` process against a real apiserver."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import CONFIGMAPS, EVENTS
from kthena_py.runtime.eventcorrelator import COMBINED_PREFIX, EventCorrelator
from kthena_py.runtime.events import EventRecorder
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest


async def test_events_are_aggregated(kube: KubeClient, namespace: str) -> None:
    cm = await kube.create(CONFIGMAPS, {"metadata": {"name": "subject"}}, namespace)
    cm.setdefault("apiVersion", "v1")
    cm.setdefault("kind", "ConfigMap")
    rec = EventRecorder(kube, "test-component")
    for _ in range(3):
        rec.event(cm, "Warning", "SomethingOdd", "the same message")
        await rec.flush()
    rec.event(cm, "Normal", "Other", "another message")
    await rec.flush()
    events = (await kube.list(EVENTS, namespace)).items
    by_reason = {e["reason"]: e for e in events}
    assert set(by_reason) == {"SomethingOdd", "Other"}
    odd = by_reason["SomethingOdd"]
    assert odd["count"] == 3 and odd["type"] == "Warning"
    assert odd["involvedObject"]["uid"] == cm["metadata"]["uid"]
    assert odd["source"]["component"] == "test-component"


async def test_similar_events_are_combined_and_a_burst_is_filtered(kube: KubeClient, namespace: str) -> None:
    cm = await kube.create(CONFIGMAPS, {"metadata": {"name": "stormy"}}, namespace)
    cm.setdefault("apiVersion", "v1")
    cm.setdefault("kind", "ConfigMap")
    rec = EventRecorder(kube, "storm-component", coalesce_seconds=0.0, correlator=EventCorrelator(burst=12))
    for i in range(14):
        rec.event(cm, "Normal", "RoleCreating", f"Role a/a-{i} is now Creating", join=False)
        await rec.flush()
    events = (await kube.list(EVENTS, namespace)).items
    plain = sorted(e["message"] for e in events if not e["message"].startswith(COMBINED_PREFIX))
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert plain == sorted(f"Role a/a-{i} is now Creating" for i in range(9))
    # the 10th-12th are one Event whose count the API server stored; the 13th and 14th spent no more of the burst
    assert len(combined) == 1
    assert combined[0]["count"] == 3
    assert combined[0]["message"] == COMBINED_PREFIX + "Role a/a-11 is now Creating"
    assert combined[0]["involvedObject"]["uid"] == cm["metadata"]["uid"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_manager_process_probes_metrics_and_sigterm(kubeconfig: Path, namespace: str) -> None:
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
            async with s.get(f"http://127.0.0.1:{health}/healthz") as r:
                assert r.status == 200
            async with s.get(f"http://127.0.0.1:{metrics}/metrics") as r:
                body = await r.text()
            assert 'controller_runtime_max_concurrent_reconciles{controller="modelserving"}' in body
            assert "workqueue_depth{" in body and "rest_client_requests_total{" in body
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0
        lines = [yaml.safe_load(line) for line in out.decode().splitlines() if line.startswith("{")]
        assert any(line.get("event") == "shutting down" for line in lines), "structured JSON log lines expected"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_unreachable_apiserver_is_a_one_line_error(tmp_path: Path, kubeconfig: Path) -> None:
    cfg = yaml.safe_load(kubeconfig.read_text())
    cfg["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{_free_port()}"
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text(yaml.safe_dump(cfg))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "manager",
        "--kubeconfig",
        str(bad),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ},
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    text = err.decode().strip().splitlines()
    assert text[-1].startswith("kthena-py: error: cannot reach the API server")
    assert "Traceback" not in err.decode()
