"""Run a control-plane tier in the foreground: ``python -m kthena_py.testing.controlplane``.

Commands:

``up --tier envtest|cluster --dir DIR [--crds PATH ...] [--nodes N] [--gpu-product P] [--pod-cidr CIDR]``
    Start the tier in DIR, write ``DIR/state.json`` (pids, ports, kubeconfig path), print the
    kubeconfig path on stdout, then stay in the foreground until SIGINT or SIGTERM and stop every
    component. If a component dies meanwhile, everything is stopped and the exit status is 1.

``down --dir DIR``
    Stop a tier started by ``up`` in DIR from another shell: SIGTERM to the ``up`` process, and
    then, as a fallback (e.g. ``up`` was SIGKILLed), SIGTERM/SIGKILL to each recorded component
    process group. A recorded pid is only signalled if its start time still matches, so a recycled
    pid is never hit.

Guarantees: no component outlives ``up`` when ``up`` ends through a signal, an error or a
dead component; logs stay in ``DIR/logs``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from kthena_py.testing.controlplane.cluster import DEFAULT_GPU_PRODUCT, DEFAULT_POD_CIDR, ClusterTier
from kthena_py.testing.controlplane.envtest import EnvTest
from kthena_py.testing.controlplane.process import ProcessExitedError, process_start_ticks


class _Terminated(Exception):
    """SIGINT or SIGTERM arrived."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise _Terminated(signal.Signals(signum).name)


def _alive(pid: int | None, start_ticks: int | None) -> bool:
    return pid is not None and start_ticks is not None and process_start_ticks(pid) == start_ticks


def _write_state(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def _up(args: argparse.Namespace) -> int:
    run_dir = Path(args.dir).resolve()
    state_path = run_dir / "state.json"
    if state_path.exists():
        old = json.loads(state_path.read_text())
        sup = old.get("supervisor", {})
        if not old.get("stopped") and _alive(sup.get("pid"), sup.get("start_ticks")):
            print(
                f"a control plane is already running in {run_dir} (pid {sup['pid']}); use `down`",
                file=sys.stderr,
            )
            return 2
    tier: EnvTest
    if args.tier == "cluster":
        tier = ClusterTier(
            run_dir, crds=args.crds, nodes=args.nodes, gpu_product=args.gpu_product, pod_cidr=args.pod_cidr
        )
    else:
        tier = EnvTest(run_dir, crds=args.crds)
    # Explicitly for SIGINT too: a shell starts background jobs with SIGINT ignored.
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    status = 0
    try:
        print(f"starting the {args.tier} tier in {run_dir} (logs: {tier.log_dir})", file=sys.stderr)
        tier.start()
        state = {
            **tier.state(),
            "supervisor": {"pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid())},
            "stopped": False,
        }
        _write_state(state_path, state)
        print(
            f"ready in {tier.startup_seconds:.1f}s; export KUBECONFIG={tier.kubeconfig_path}; "
            "Ctrl-C (or `down`) stops it",
            file=sys.stderr,
        )
        print(tier.kubeconfig_path, flush=True)
        while True:
            time.sleep(1.0)
            tier.check_alive()
    except (KeyboardInterrupt, _Terminated) as e:
        print(f"stopping ({e or 'interrupted'})", file=sys.stderr)
    except ProcessExitedError as e:
        print(f"error: {e}", file=sys.stderr)
        status = 1
    finally:
        # A second signal during shutdown must not leave children behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        tier.stop()
        if state_path.exists():
            with contextlib.suppress(OSError, ValueError):
                _write_state(state_path, {**json.loads(state_path.read_text()), "stopped": True})
    return status


def _signal_until_gone(pid: int, start_ticks: int | None, *, group: bool, timeout: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _alive(pid, start_ticks):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while _alive(pid, start_ticks) and time.monotonic() < deadline:
            time.sleep(0.2)


def _down(args: argparse.Namespace) -> int:
    state_path = Path(args.dir).resolve() / "state.json"
    if not state_path.exists():
        print(f"no state.json in {state_path.parent}", file=sys.stderr)
        return 1
    state = json.loads(state_path.read_text())
    sup = state.get("supervisor", {})
    if sup.get("pid"):
        _signal_until_gone(sup["pid"], sup.get("start_ticks"), group=False, timeout=60.0)
    for info in state.get("processes", {}).values():
        if info.get("pid"):
            _signal_until_gone(info["pid"], info.get("start_ticks"), group=True, timeout=15.0)
    _write_state(state_path, {**state, "stopped": True})
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m kthena_py.testing.controlplane", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a tier and stay in the foreground")
    up.add_argument("--tier", choices=("envtest", "cluster"), default="envtest")
    up.add_argument("--dir", required=True, help="run directory (certificates, kubeconfig, logs, state.json)")
    up.add_argument("--crds", nargs="*", default=[], metavar="PATH", help="CRD files or directories to install")
    up.add_argument("--nodes", type=int, default=4, help="fake nodes (cluster tier)")
    up.add_argument("--gpu-product", default=DEFAULT_GPU_PRODUCT, help="nvidia.com/gpu.product of the fake nodes")
    up.add_argument("--pod-cidr", default=DEFAULT_POD_CIDR, help="kwok pod IP range (cluster tier)")
    down = sub.add_parser("down", help="stop a tier started by `up` in --dir")
    down.add_argument("--dir", required=True)
    args = parser.parse_args(argv)
    return _up(args) if args.command == "up" else _down(args)


if __name__ == "__main__":
    sys.exit(main())
