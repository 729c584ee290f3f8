"""The manager never loads the download clients: ``import kthena_py.main`` and the manager's argument parsing
leave huggingface_hub, boto3 and botocore unimported; the download command loads them only for its sources."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
