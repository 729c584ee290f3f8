"""``--direct-io`` through a real ``kthena-py download`` process: the run says what it chose, and the bytes
are the same whatever it chose."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from kthena_py.download.filesystems import direct_io_allowed, output_filesystem

from .conftest import run_download

SIZE = 64 * 1024 * 1024 + 12_345  # over the large-file threshold, with an unaligned tail


def _writing_line(stderr: str) -> dict[str, object]:
    for line in stderr.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("event") == "writing":
            return doc
    raise AssertionError(f"no 'writing' log line in:\n{stderr}")


@pytest.mark.parametrize("mode", ["auto", "on", "off"])
async def test_the_run_reports_its_choice_and_writes_the_same_bytes(tmp_path: Path, mode: str) -> None:
    data = os.urandom(SIZE)
    source = tmp_path / "model.bin"
    source.write_bytes(data)
    out = tmp_path / "out"
    digest = hashlib.sha256(data).hexdigest()
    args = ["-s", str(source), "-o", str(out), "--direct-io", mode, "--sha256", digest, "--log-format", "json"]
    run = await run_download(args)
    assert run.code == 0, run.output
    line = _writing_line(run.stderr)
    out.mkdir(exist_ok=True)
    assert line["direct_io"] is direct_io_allowed(mode, output_filesystem(str(out)))  # type: ignore[arg-type]
    assert (out / "model.bin").read_bytes() == data
