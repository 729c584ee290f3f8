"""The manager never loads the download clients: ``import kthena_py.main`` and the manager's argument parsing
leave huggingface_hub, boto3 and botocore unimported; the download command loads them only for its sources, and a
hub download loads the hub client's API module only to read an answer other than the listing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kthena_py.testing.artifacts import ArtifactServer, HubRepo

from .conftest import child_env

CLIENTS = ("huggingface_hub", "boto3", "botocore", "tqdm")

_PROBE = """
import json, sys
import kthena_py.main
from kthena_py.main import build_parser
args = build_parser().parse_args(sys.argv[1:])
loaded = sorted(m for m in {CLIENTS!r} if m in sys.modules)
print(json.dumps(loaded))
"""


@pytest.mark.parametrize(
    "argv",
    [["manager"], ["manager", "--controllers=modelserving"], ["download", "-s", "org/repo"], ["status", "x"]],
)
def test_parsing_loads_no_download_client(argv: list[str]) -> None:
    probe = _PROBE.replace("{CLIENTS!r}", repr(CLIENTS))
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_a_local_download_loads_no_hub_or_s3_client(tmp_path: object) -> None:
    probe = (
        "import sys, json\nfrom kthena_py.main import main\n"
        f"code = main(['download', '-s', {sys.executable!r}, '-o', {str(tmp_path)!r}])\n"
        "print(json.dumps([code, sorted(m for m in ('huggingface_hub', 'boto3', 'botocore') if m in sys.modules)]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    code, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert code == 0 and loaded == []


_HUB_PROBE = """
import json, sys
from kthena_py.main import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(m for m in ("huggingface_hub.hf_api", "httpx2") if m in sys.modules)]))
"""


async def _hub_run(server: ArtifactServer, source: str, out: str) -> tuple[int, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _HUB_PROBE,
        "download",
        "-s",
        source,
        "-o",
        out,
        env=child_env({"HF_ENDPOINT": server.url}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, _ = await asyncio.wait_for(proc.communicate(), 60)
    code, loaded = json.loads(stdout.decode().strip().splitlines()[-1])
    return code, loaded


async def test_a_hub_download_loads_the_hub_client_only_to_read_a_failure(
    server: ArtifactServer, tmp_path: Path
) -> None:
    server.add_repo(HubRepo("org/model", {"config.json": b"{}", "w.bin": b"x" * 5000}, lfs={"w.bin"}))
    assert await _hub_run(server, "hf://org/model", str(tmp_path / "ok")) == (0, [])
    assert server.counts[("GET", "/api/models/org/model")] == 1
    code, loaded = await _hub_run(server, "hf://org/missing", str(tmp_path / "missing"))
    assert code == 5 and "huggingface_hub.hf_api" in loaded
    assert server.counts[("GET", "/api/models/org/missing")] == 2  # ours, then the hub client's
