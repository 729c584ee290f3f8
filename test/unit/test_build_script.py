"""hack/build-controlplane.sh picks a Go that can build the modules, whatever Go the machine has.

A stand-in ``go`` first on PATH reports an older version (everything else it hands to the real go), and
the script is asked for component ``go`` only, so nothing is built. The old-Go path (< 1.21: fetch the
``golang.org/toolchain`` module with the old go and put it on PATH) downloads ~70 MB and is exercised by
hand (see docs/testing.md); here: the three decisions and their messages, and an unknown component.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "build-controlplane.sh"
REAL_GO = shutil.which("go")

pytestmark = pytest.mark.skipif(REAL_GO is None, reason="the build script needs some Go on PATH")


def _real_version() -> str:
    assert REAL_GO is not None
    out = subprocess.run([REAL_GO, "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout
    return out.strip().removeprefix("go")


def _run(tmp_path: Path, reported: str | None, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if reported is not None:
        # Reports `reported`; with GOTOOLCHAIN other than local, behaves like a Go >= 1.21 that switched.
        (bin_dir / "go").write_text(
            "#!/bin/sh\n"
            'if [ "$1" = version ] && [ "${GOTOOLCHAIN:-local}" = local ]; then\n'
            f'  echo "go version go{reported} linux/amd64"; exit 0\n'
            "fi\n"
            f'exec env GOTOOLCHAIN=local "{REAL_GO}" "$@"\n'
        )
        (bin_dir / "go").chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    if reported is None:  # no Go at all: a PATH with nothing but what the script needs before it looks for go
        for tool in ("mkdir",):
            found = shutil.which(tool)
            assert found is not None
            (bin_dir / tool).symlink_to(found)
        path = str(bin_dir)
    full_env = {**os.environ, "PATH": path, "KTHENA_PY_BIN_CACHE": str(tmp_path / "cache"), **env}
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run([bash, str(SCRIPT), *args], capture_output=True, text=True, env=full_env, timeout=120)


def test_a_new_enough_go_is_used_as_it_is(tmp_path: Path) -> None:
    result = _run(tmp_path, "1.26.0", "go")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(tmp_path / "cache")
    assert result.stderr == ""  # nothing to build, nothing to say


def test_go_1_21_or_newer_but_too_old_switches_toolchain_through_the_module_proxy(tmp_path: Path) -> None:
    # The toolchain asked for is the real go's own version, so the switch downloads nothing here.
    result = _run(tmp_path, "1.22.2", "go", GO_TOOLCHAIN=_real_version())
    assert result.returncode == 0, result.stderr
    assert f"Go 1.22.2 is older than the 1.26.0 the modules need: using Go {_real_version()}" in result.stderr


def test_no_go_at_all_is_a_clear_error(tmp_path: Path) -> None:
    result = _run(tmp_path, None, "go")
    assert result.returncode == 1
    assert "no 'go' on PATH: install any Go" in result.stderr


def test_unknown_components_are_refused_before_anything_runs(tmp_path: Path) -> None:
    result = _run(tmp_path, "1.26.0", "etcd", "kubeapiserver")
    assert result.returncode == 1
    assert "unknown component: kubeapiserver (known: go etcd kwok volcano kube kubectl helm)" in result.stderr
    assert not (tmp_path / "cache" / "logs").exists()
