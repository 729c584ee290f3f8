"""The command line imports heavy libraries only for the subcommands that use them.

Each case runs ``kthena-py`` in a fresh interpreter and lists the heavy top-level packages it imported (the
start-up time itself is measured by ``bench/startup.py``, never asserted). The subcommand modules are held to
the rule in :mod:`kthena_py.cli`: nothing but the standard library at module level.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "examples" / "modelserving-pd.yaml")
POLICY = str(ROOT / "examples" / "autoscaling" / "homogeneous.yaml")
HETERO = str(ROOT / "examples" / "autoscaling" / "heterogeneous.yaml")
TRACE = str(ROOT / "examples" / "autoscaling" / "load.csv")
HEAVY = {
    "scipy",
    "numpy",
    "matplotlib",
    "kubernetes_asyncio",
    "aiohttp",
    "pydantic",
    "structlog",
    "cryptography",
    "yaml",
}

_PROBE = """
import json, sys
from kthena_py.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""


def imported(*argv: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], cwd=ROOT, capture_output=True, text=True, check=False, timeout=120
    )
    modules = set(json.loads(result.stderr.strip().splitlines()[-1]))
    return modules & HEAVY


def test_help_imports_nothing_heavy() -> None:
    assert imported("--help") == set()
    assert imported("manager", "--help") == set()
    assert imported("status", "--help") == set()


def test_validate_needs_only_the_models_and_yaml() -> None:
    assert imported("validate", "-f", SAMPLE) <= {"pydantic", "yaml"}


def test_render_needs_no_client_and_no_solver() -> None:
    assert not imported("render", "-f", SAMPLE) & {"scipy", "matplotlib", "kubernetes_asyncio", "aiohttp"}


def test_rollout_plan_drives_the_in_memory_store_without_a_client() -> None:
    assert not imported("rollout", "plan", "-f", SAMPLE, "--to", SAMPLE) & {"kubernetes_asyncio", "aiohttp"}


def test_scipy_only_for_the_milp_cross_check_and_matplotlib_only_for_plot(tmp_path: Path) -> None:
    assert not imported("autoscaler", "simulate", "-f", POLICY, "--trace", TRACE) & {"scipy", "matplotlib"}
    assert "scipy" not in imported("optimize", "-f", HETERO, "--total", "4")
    assert "scipy" in imported("optimize", "-f", HETERO, "--total", "4", "--algorithm", "milp")
    pytest.importorskip("matplotlib")
    plotted = imported("autoscaler", "simulate", "-f", POLICY, "--trace", TRACE, "--plot", str(tmp_path / "p.png"))
    assert "matplotlib" in plotted
    assert (tmp_path / "p.png").stat().st_size > 0


def test_the_manager_flag_choices_are_those_of_the_modules_it_imports_late() -> None:
    from kthena_py.cli import manager
    from kthena_py.controllers.admission import CERT_MODES
    from kthena_py.runtime.logconfig import LEVELS

    assert manager.CERT_MODES == CERT_MODES
    assert manager.LOG_LEVELS == LEVELS


_MANAGER_PROBE = """
import json, sys
from kthena_py.controllers import admission, register_all
from kthena_py.controllers.modelcache import Settings
from kthena_py.controllers.selection import CONTROLLERS
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.testing.fake import FakeKube

manager = Manager(FakeKube(), ManagerOptions(health_probe_bind_address="0", metrics_bind_address="0"))
register_all(manager, controllers=CONTROLLERS, eviction_budget=True, modelcache_settings=Settings())
served = admission.register(manager, int(sys.argv[1]), None, "self", namespace="kthena-system")
print(json.dumps([served is not None, "cryptography" in sys.modules]))
"""


@pytest.mark.parametrize(("port", "expected"), [(0, [False, False]), (9443, [True, True])])
def test_the_manager_loads_cryptography_only_to_make_webhook_certificates(port: int, expected: list[bool]) -> None:
    """Every controller registered; ``cryptography`` (about 8 MiB resident) comes in with the ``self`` certificates
    of the webhook server, not with the attestation code every ModelCache planner imports."""
    result = subprocess.run(
        [sys.executable, "-c", _MANAGER_PROBE, str(port)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected
