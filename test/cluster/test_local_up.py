"""README command 1, ``hack/local-up.sh --exit-when-ready``, end to end, without a kubectl on PATH.

The script runs as a user would run it (in its own state directory, on free loopback ports), with a
``kubectl`` first on PATH that fails if called: the script must use the one the build script put in the cache.
It must show that admission is on (an invalid copy of the sample refused with the webhook's message), that
the sample becomes Available, and where metrics, probes and logs are; the manager logs for a person.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_local_up_shows_admission_and_the_sample_available(tmp_path: Path, kubectl_path: Path) -> None:
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "kubectl").write_text("#!/bin/sh\necho 'not this kubectl' >&2\nexit 97\n")
    (fake / "kubectl").chmod(0o755)
    ports = {"METRICS_PORT": _free_port(), "PROBE_PORT": _free_port(), "WEBHOOK_PORT": _free_port()}
    env = {
        **os.environ,
        **{k: str(v) for k, v in ports.items()},
        "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
        "KTHENA_LOCAL_DIR": str(tmp_path / "local"),
        "PYTHON": sys.executable,
    }
    env.pop("KUBECONFIG", None)
    result = subprocess.run(
        ["bash", str(ROOT / "hack" / "local-up.sh"), "--exit-when-ready"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = result.stdout + result.stderr
    log = tmp_path / "local" / "logs" / "manager.log"
    assert result.returncode == 0, output[-6000:] + (log.read_text()[-4000:] if log.exists() else "")
    assert "not this kubectl" not in output
    assert "admission is on" in output
    assert "spec.template.roles[0].workerReplicas: Invalid value: -1: workerReplicas must be a non-negative" in output
    assert "modelserving/llama-pd is Available" in output
    assert f"http://127.0.0.1:{ports['METRICS_PORT']}/metrics" in output
    assert f"http://127.0.0.1:{ports['PROBE_PORT']}/readyz" in output
    assert str(log) in output
    first = log.read_text().splitlines()[0]
    assert "[info" in first and "starting manager" in first and not first.startswith("{")  # console, not JSON
    assert (tmp_path / "local" / "bin" / "kubectl").resolve() == kubectl_path.resolve()
