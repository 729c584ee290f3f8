"""The probe and metrics server, exercised in-process on loopback."""

from __future__ import annotations

import aiohttp
import pytest

from kthena_py.runtime import metrics
from kthena_py.runtime.httpserver import ProbeServer, parse_address


def test_parse_address() -> None:
    assert parse_address("0") is None
    assert parse_address("") is None
    assert parse_address("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_address(":9000") == ("0.0.0.0", 9000)
    assert parse_address("[::1]:81") == ("::1", 81)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address("localhost")


async def test_probes_and_metrics_on_separate_ports() -> None:
    ready = False
    server = ProbeServer()
    server.add_readiness_check("cache", lambda: ready)
    metrics.init_controller_metrics("probe-test", 3)
    await server.start(health_address="127.0.0.1:0", metrics_address="127.0.0.1:0")
    try:
        hport = server.bound["health"][1]
        mport = server.bound["metrics"][1]
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{hport}/healthz") as r:
                assert r.status == 200
            async with s.get(f"http://127.0.0.1:{hport}/readyz") as r:
                assert r.status == 503 and "cache" in await r.text()
            ready = True
            async with s.get(f"http://127.0.0.1:{hport}/readyz") as r:
                assert r.status == 200
            async with s.get(f"http://127.0.0.1:{mport}/metrics") as r:
                body = await r.text()
                assert r.status == 200
                assert 'controller_runtime_max_concurrent_reconciles{controller="probe-test"} 3.0' in body
                assert "process_cpu_seconds_total" in body
            async with s.get(f"http://127.0.0.1:{hport}/metrics") as r:
                assert r.status == 404
    finally:
        await server.stop()
