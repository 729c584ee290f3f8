"""The ``kthena-py status`` command line, parsed without loading it.

Guarantees: building the parser imports nothing heavy (no client, no models, no planners); the command imports
its implementation (:mod:`kthena_py.cli.status`) when it runs, so ``kthena-py --help`` stays fast.
"""

from __future__ import annotations

import argparse

__all__ = ["add_parser"]

_DESCRIPTION = """\
One look at a ModelServing, as a tree: ServingGroups -> role instances -> pods, with each pod's phase,
readiness, revision (updated / current / old), node and age, and for anything not running the reason:
waiting for GPUs or other resources (with the queue position), waiting in a full or closed Volcano queue,
unschedulable, image pull, crash loop, eviction budget, rollout hold (partition, outdated), terminating.

Colour on a terminal; plain when piped or when NO_COLOR is set. -w follows like `kubectl get -w`: the tree is
printed again when the ModelServing or one of its pods changes, until Ctrl-C or until the ModelServing is
deleted. Exit status: 0, or 1 when the ModelServing does not exist or the API server cannot be reached.

NAME may also be a ModelPool (modelpool/NAME when a ModelServing has the same name): its phase, resident and
pending members, the swap in progress and the last one with the time of each step, and each member's replicas,
pods and latest request. Without NAME, the namespace's ModelPools are listed."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``status``."""
    p = sub.add_parser(
        "status",
        help="one look at a ModelServing (groups, roles, pods, why anything is not running) or a ModelPool",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", metavar="NAME", nargs="?", help="the ModelServing or ModelPool (none: list the ModelPools)")
    p.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig context's, else default)")
    p.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("-w", "--watch", action="store_true", help="print the tree again on every change")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="auto (default): on a terminal unless NO_COLOR is set",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``status`` (see :func:`kthena_py.cli.status.run`)."""
    from . import status

    return status.run(args)
