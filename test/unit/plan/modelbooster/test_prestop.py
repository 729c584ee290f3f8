"""The engine's preStop drain script, run by the real ``sh`` and ``curl`` against a loopback /metrics server."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kthena_py.plan.modelbooster.modelserving import prestop_script

BUSY = 'vllm:num_requests_running{model_name="m"} 1.0\nvllm:num_requests_waiting{model_name="m"} 2.0\n'
IDLE = '# HELP x\nvllm:num_requests_running{model_name="m"} 0.0\nvllm:num_requests_waiting{model_name="m"} 0.0\n'


class _Metrics(ThreadingHTTPServer):
    bodies: list[str]
    hits: int = 0


class _Handler(BaseHTTPRequestHandler):
    server: _Metrics

    def do_GET(self) -> None:
        body = self.server.bodies[min(self.server.hits, len(self.server.bodies) - 1)].encode()
        self.server.hits += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def metrics() -> Iterator[_Metrics]:
    server = _Metrics(("127.0.0.1", 0), _Handler)
    server.bodies = [IDLE]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _run(port: int) -> int:
    script = prestop_script(port).replace("http://localhost:", "http://127.0.0.1:")
    return subprocess.run(["/bin/sh", "-c", script], timeout=60, check=False).returncode


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_exits_when_the_engine_is_down() -> None:
    assert _run(_free_port()) == 0


def test_waits_while_requests_run_then_exits_when_idle(metrics: _Metrics) -> None:
    metrics.bodies = [BUSY, IDLE]
    assert _run(metrics.server_address[1]) == 0
    assert metrics.hits == 2
