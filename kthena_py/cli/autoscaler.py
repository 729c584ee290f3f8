"""``kthena-py autoscaler``: its flags; the work is done by :mod:`kthena_py.cli.simulate` (imported on use).

``kthena-py autoscaler simulate -f POLICY.yaml --trace LOAD.csv [--plot out.png]`` replays a load trace through a
policy's decision code and prints the replica timeline (see :mod:`kthena_py.cli.simulate` for the trace format).
"""

from __future__ import annotations

import argparse
import math

__all__ = ["add_parser", "run_simulate"]


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"not a finite number: {value!r}")
    return seconds


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``autoscaler`` and its ``simulate`` subcommand."""
    p = sub.add_parser("autoscaler", help="autoscaling tools (simulate a policy against a load trace)")
    inner = p.add_subparsers(dest="autoscaler_command", required=True, metavar="COMMAND")
    s = inner.add_parser(
        "simulate",
        help="replay a load trace through a policy and print the replica timeline",
        description="Replay LOAD.csv (time,<metric>,...) through the policy's decision code with a virtual clock.",
    )
    s.set_defaults(run=run_simulate)
    s.add_argument("-f", "--filename", required=True, help="AutoscalingPolicy YAML/JSON file ('-': stdin)")
    s.add_argument("--trace", required=True, help="CSV load trace: time,<metric>,... ('-': stdin)")
    s.add_argument("--role", help="the role to simulate (disaggregated targets)")
    s.add_argument("--initial", type=int, default=None, help="replicas at the start (default: minReplicas, >= 1)")
    s.add_argument("--sync-period", type=_seconds, default=15.0, help="seconds between passes (default 15)")
    s.add_argument("--start", type=_seconds, default=None, help="first pass (default: first trace time)")
    s.add_argument("--end", type=_seconds, default=None, help="last pass (default: last trace time)")
    s.add_argument(
        "--source",
        choices=("auto", "external", "pods"),
        default="auto",
        help="how values reach the decision (auto: from the policy's metricSources)",
    )
    s.add_argument("--ready-delay", type=_seconds, default=0.0, help="seconds before a new replica is ready (pods)")
    s.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    s.add_argument("--verbose", "-v", action="store_true", help="print each pass's reasons")
    s.add_argument("--plot", metavar="OUT.png", help="draw load and replicas over time (needs matplotlib)")


def run_simulate(args: argparse.Namespace) -> int:
    """Run ``autoscaler simulate`` (imports the decision code, and matplotlib for ``--plot``, only now)."""
    from kthena_py.cli.simulate import run_simulate as run

    return run(args)
