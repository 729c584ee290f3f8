"""hack/build-kthena.sh refuses clearly when it has no Kthena source, and never builds from a wrong tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "build-kthena.sh"


def run(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KTHENA")}
    base["KTHENA_PY_BIN_CACHE"] = str(tmp_path / "cache")
    return subprocess.run(["bash", str(SCRIPT)], env=base | env, capture_output=True, text=True, timeout=60)


def test_without_a_source_it_says_what_to_set(tmp_path: Path) -> None:
    out = run({}, tmp_path)
    assert out.returncode != 0
    assert "set KTHENA_SRC" in out.stderr and "KTHENA_GIT_DIR" in out.stderr


def test_a_directory_that_is_not_kthena_is_refused(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    out = run({"KTHENA_SRC": str(tmp_path / "src")}, tmp_path)
    assert out.returncode != 0
    assert "is not a Kthena source tree" in out.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").glob("kthena-*"))
