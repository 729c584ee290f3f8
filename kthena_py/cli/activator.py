"""``kthena-py activator``: its flags; the work is :func:`kthena_py.activator.run` (imported on use).

Guarantees: a bad flag value (an unusable address, a hold budget that is not a positive duration, a limit below 1)
ends with one line on stderr and exit status 1; an unusable kubeconfig likewise. Logs are JSON lines, or the
console format with ``--log-format console`` (the default when stderr is a terminal).
"""

from __future__ import annotations

import argparse
import sys

from kthena_py.cli.common import CommandError

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``activator`` and its flags."""
    a = sub.add_parser(
        "activator",
        help="run the activator (an OpenAI-compatible proxy that wakes ModelServings from zero)",
        description="Hold requests for ModelServings at zero replicas, scale them 0 -> 1 and forward once Ready.",
    )
    a.set_defaults(run=run)
    a.add_argument("--listen", default="0.0.0.0:8080", help="HOST:PORT of the proxy (default 0.0.0.0:8080)")
    a.add_argument("--metrics-bind-address", default=":8081", help="HOST:PORT of /metrics ('0' disables)")
    a.add_argument("--health-probe-bind-address", default=":8082", help="HOST:PORT of /healthz, /readyz")
    a.add_argument(
        "--kubeconfig",
        help="kubeconfig path (default: $KUBECONFIG, else the in-cluster service account, else ~/.kube/config)",
    )
    a.add_argument("--namespace", action="append", default=[], help="watch this namespace (repeatable; default: all)")
    a.add_argument("--hold-budget", default="120s", help="default hold budget, a duration (default 120s)")
    a.add_argument("--max-body-bytes", type=int, default=16 * 1024 * 1024, help="request body limit (16 MiB)")
    a.add_argument("--max-held", type=int, default=1000, help="requests held per ModelServing at most (1000)")
    a.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    a.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="the asyncio event loop to run on (default auto: uvloop when importable, else asyncio's own)",
    )
    a.add_argument(
        "--log-format", choices=("json", "console"), default=None, help="default: console on a terminal, else json"
    )


def run(args: argparse.Namespace) -> int:
    """Run the activator until SIGTERM/SIGINT."""
    from kthena_py.activator import ActivatorOptions
    from kthena_py.activator import run as run_activator
    from kthena_py.kube.client import ConfigError
    from kthena_py.plan.activator.targets import parse_hold_budget
    from kthena_py.runtime import logconfig
    from kthena_py.runtime.eventloop import LoopUnavailable
    from kthena_py.runtime.eventloop import run as run_on_loop
    from kthena_py.runtime.httpserver import parse_address

    try:
        budget = parse_hold_budget(args.hold_budget)
        for flag in ("listen", "metrics_bind_address", "health_probe_bind_address"):
            parse_address(getattr(args, flag))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if args.max_body_bytes < 1 or args.max_held < 1:
        raise CommandError("--max-body-bytes and --max-held must be at least 1")
    log_format = args.log_format or ("console" if sys.stderr.isatty() else "json")
    logconfig.configure(args.log_level, json=log_format == "json")
    options = ActivatorOptions(
        listen=args.listen,
        metrics_bind_address=args.metrics_bind_address,
        health_probe_bind_address=args.health_probe_bind_address,
        kubeconfig=args.kubeconfig,
        namespaces=tuple(args.namespace),
        hold_budget=budget,
        max_body_bytes=args.max_body_bytes,
        max_held=args.max_held,
    )
    try:
        run_on_loop(run_activator(options), args.event_loop)
    except (ConfigError, LoopUnavailable) as exc:
        raise CommandError(str(exc)) from exc
    return 0
