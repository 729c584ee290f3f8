"""``kthena-py optimize``: split a replica total over a heterogeneous policy's ModelServings, offline.

``kthena-py optimize -f POLICY.yaml --total K`` prints one JSON object ``{"<namespace>/<name>": replicas, ...}``
in the order of ``heterogeneousTarget.params`` (the namespace is the target's, else the policy's, else
``default``): exactly the allocation the ``autoscaling-heterogeneous`` controller would apply for a total of
``K``. ``--algorithm kthena`` prints Kthena's own block-greedy split instead, ``--algorithm milp`` the same
problem solved by scipy's ``milp`` (a cross-check).

Guarantees: reads only the file (``-`` for stdin); the first AutoscalingPolicy document of the file is used;
an unreadable file, a policy without ``heterogeneousTarget`` or invalid params end with a one-line error
(exit status 1), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .common import CommandError

if TYPE_CHECKING:
    from kthena_py.api.autoscaling import AutoscalingPolicy
    from kthena_py.plan.autoscaling import CostParam

__all__ = ["add_parser", "load_policy", "run"]


def _non_negative(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {n}")
    return n


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``optimize`` and its flags."""
    p = sub.add_parser(
        "optimize",
        help="split a replica total over a heterogeneous AutoscalingPolicy's targets",
        description="Print the replicas per target ({namespace/name: replicas}) for a total of --total replicas.",
    )
    p.set_defaults(run=run)
    p.add_argument("-f", "--filename", required=True, help="AutoscalingPolicy YAML/JSON file ('-': stdin)")
    p.add_argument("--total", type=_non_negative, required=True, help="total replicas (clamped to the bounds)")
    p.add_argument(
        "--algorithm",
        choices=("budget", "kthena", "milp"),
        default="budget",
        help="budget: the controller's (default); kthena: Kthena's block greedy; milp: scipy cross-check",
    )


def load_policy(path: str) -> AutoscalingPolicy:
    """Read the first AutoscalingPolicy of a YAML/JSON file (``-``: stdin).

    Raises:
        CommandError: Unreadable file, no AutoscalingPolicy, or a spec that does not match the API.
    """
    import pydantic
    import yaml

    from kthena_py.controllers.autoscaling.convert import parse_policy

    try:
        if path == "-":
            docs = list(yaml.safe_load_all(sys.stdin))
        else:
            with open(path, encoding="utf-8") as f:
                docs = list(yaml.safe_load_all(f))
    except OSError as err:
        raise CommandError(f"cannot read {path}: {err.strerror or err}") from err
    except yaml.YAMLError as err:
        raise CommandError(f"{path} is not valid YAML: {err}") from err
    found: list[dict[str, Any]] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "AutoscalingPolicy":
            found.append(doc)
        elif isinstance(doc, dict) and doc.get("kind") == "List":
            found.extend(
                i for i in doc.get("items") or [] if isinstance(i, dict) and i.get("kind") == "AutoscalingPolicy"
            )
    if not found:
        raise CommandError(f"{path} holds no AutoscalingPolicy")
    try:
        return parse_policy(found[0])
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CommandError(f"invalid AutoscalingPolicy: {where}: {first['msg']}") from err


def allocate(params: list[CostParam], total: int, rate: int, algorithm: str) -> dict[str, int]:
    """Run the chosen algorithm.

    Raises:
        CommandError: The milp solver failed.
    """
    from kthena_py.plan.autoscaling import kthena_greedy, optimize, optimize_milp

    if algorithm == "kthena":
        return kthena_greedy(params, total, rate)
    if algorithm == "milp":
        result = optimize_milp(params, total, rate)
        if result is None:
            raise CommandError("the milp solver found no verified answer")
        return result
    return optimize(params, total, rate)


def run(args: argparse.Namespace) -> int:
    """Print the allocation as JSON; exit status 0."""
    from kthena_py.controllers.autoscaling.convert import PolicyError, cost_params

    policy = load_policy(args.filename)
    target = policy.spec.heterogeneous_target
    if target is None:
        raise CommandError("the policy has no heterogeneousTarget")
    try:
        params = [param for param, _, _ in cost_params(policy)]
    except PolicyError as err:
        raise CommandError(str(err)) from err
    allocation = allocate(params, args.total, target.cost_expansion_rate_percent, args.algorithm)
    print(json.dumps({p.name: allocation[p.name] for p in params}))
    return 0
