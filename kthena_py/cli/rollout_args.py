"""The ``kthena-py rollout`` command line: ``status``, ``history``, ``undo`` and ``plan``, parsed without loading them.

Guarantees: building the parser imports nothing heavy (no client, no models, no planners); each subcommand
imports its implementation (:mod:`kthena_py.cli.rollout` online, :mod:`kthena_py.cli.rollout_plan` offline) when
it runs, so ``kthena-py --help`` stays fast.
"""

from __future__ import annotations

import argparse

from .common import positive_int

__all__ = ["add_parser"]

_DESCRIPTION = """\
Run the controller's planners over an in-memory cluster: OLD starts with every pod ready, then its spec
becomes NEW's. Each step prints what the rollout takes down, creates, surges, removes and keeps, the ready
ServingGroups and the UpdateInProgress condition; then pods become ready:

  --replicas-ready all    every pod created in the step (default)
  --replicas-ready N      at most N units per step (ServingGroups, or role instances), lowest ordinal first
  --replicas-ready none   no pod of the new revision ever becomes ready (a bad image)
  --never-ready UNITS     these units never become ready (<ms>-<g> or <ms>-<g>/<role>-<r>)

Exit status: 0 complete or partition reached, 3 stalled or not finished, 1 invalid input."""


def _timeout(value: str) -> float:
    from kthena_py.api.duration import DurationError, parse_duration

    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parse_duration(value) / 1e9
        except DurationError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {value}")
    return seconds


def _bool(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("true", "t", "1", "yes"):
        return True
    if lowered in ("false", "f", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {value!r}")


def _online(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the ModelServing")
    parser.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig context's, else default)")
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    parser.add_argument("--context", help="kubeconfig context")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``rollout`` and its ``status``, ``history``, ``undo`` and ``plan`` subcommands."""
    p = sub.add_parser("rollout", help="follow, list, undo or plan ModelServing rollouts")
    inner = p.add_subparsers(dest="rollout_command", required=True, metavar="COMMAND")
    s = inner.add_parser(
        "status",
        help="follow a rollout until it is finished",
        description="Print the rollout's progress each time it changes until it is complete or its partition is "
        "reached (exit 0); exit 1 on --timeout. --watch=false prints it once (exit 0 only when finished).",
    )
    _online(s)
    s.add_argument(
        "-w",
        "--watch",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        help="follow until finished (default); --watch=false prints the state once",
    )
    s.add_argument("--timeout", type=_timeout, default=0.0, help="give up after this long (e.g. 5m; 0: never)")
    s.set_defaults(run=run_status)
    h = inner.add_parser(
        "history",
        help="list the revisions of a ModelServing",
        description="One line per ControllerRevision: number, hash, current/update, live pods, images per role and "
        "what changed since the line before.",
    )
    _online(h)
    h.add_argument("--revision", type=positive_int, help="print this revision in full")
    h.set_defaults(run=run_history)
    u = inner.add_parser(
        "undo",
        help="go back to an earlier revision",
        description="Patch the spec back to a revision's roles, schedulerName and plugins, keeping the current role "
        "replicas and rollout settings (default: the previous revision).",
    )
    _online(u)
    u.add_argument("--to-revision", type=positive_int, help="the revision to go back to (default: the previous one)")
    u.set_defaults(run=run_undo)
    _add_plan_parser(inner)


def _ready_spec(value: str) -> str:
    if value in ("all", "none"):
        return value
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected all, none or a number of units: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {n}")
    return value


def _add_plan_parser(inner: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``rollout plan``."""
    p = inner.add_parser(
        "plan",
        help="print, step by step, what a rollout from OLD to NEW would do (offline)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-f", "--filename", required=True, metavar="OLD.yaml", help="the ModelServing as it runs now")
    p.add_argument("--to", required=True, metavar="NEW.yaml", help="the edited ModelServing")
    p.add_argument(
        "--replicas-ready",
        type=_ready_spec,
        default="all",
        metavar="all|none|N",
        help="which new pods become ready per step (default all)",
    )
    p.add_argument(
        "--never-ready",
        action="append",
        default=[],
        metavar="UNIT[,UNIT]",
        help="units that never become ready (<ms>-<g> or <ms>-<g>/<role>-<r>); repeatable",
    )
    p.add_argument("--max-steps", type=positive_int, default=200, help="give up after this many steps (default 200)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.set_defaults(run=run_plan)


def run_status(args: argparse.Namespace) -> int:
    """``rollout status`` (see :func:`kthena_py.cli.rollout.run_status`)."""
    from . import rollout

    return rollout.run_status(args)


def run_history(args: argparse.Namespace) -> int:
    """``rollout history`` (see :func:`kthena_py.cli.rollout.run_history`)."""
    from . import rollout

    return rollout.run_history(args)


def run_undo(args: argparse.Namespace) -> int:
    """``rollout undo`` (see :func:`kthena_py.cli.rollout.run_undo`)."""
    from . import rollout

    return rollout.run_undo(args)


def run_plan(args: argparse.Namespace) -> int:
    """``rollout plan`` (see :func:`kthena_py.cli.rollout_plan.run`)."""
    from . import rollout_plan

    return rollout_plan.run(args)
