"""``kthena-py modelbooster migrate NAME``: move a live ModelBooster's children out from under it.

Guarantees: touches only the booster's ``metadata.annotations`` and its children's ``ownerReferences`` (see
:mod:`kthena_py.controllers.modelbooster.migrate`), so no pod is deleted or restarted; prints one line per
change; an unusable kubeconfig or a missing booster is a one-line error with exit status 1. The configuration is
found as client-go finds it; the client is imported only when the command runs.
"""

from __future__ import annotations

import argparse

from .common import CommandError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``modelbooster`` and its ``migrate`` subcommand."""
    p = sub.add_parser("modelbooster", help="ModelBooster tools (migrating off ModelBooster)")
    inner = p.add_subparsers(dest="modelbooster_command", required=True, metavar="COMMAND")
    m = inner.add_parser(
        "migrate",
        help="hand a booster's ModelServing, ModelServer and ModelRoute over to you (no pod restarts)",
        description="Marks the booster so the controller stops managing it and removes its owner reference "
        "from its children. Afterwards `kubectl delete modelbooster NAME` leaves the workload running.",
    )
    m.add_argument("name", metavar="NAME", help="the ModelBooster")
    m.add_argument("-n", "--namespace", default="default", help="its namespace (default: default)")
    m.add_argument("--kubeconfig", default=None, help="kubeconfig (default: as client-go)")
    m.add_argument("--context", default=None, help="kubeconfig context")
    m.set_defaults(run=run)


async def _migrate(args: argparse.Namespace) -> list[str]:
    from kthena_py.controllers.modelbooster.migrate import MigrationError, migrate
    from kthena_py.kube import ApiError, ConfigError, KubeClient

    try:
        client = await KubeClient.from_environment(args.kubeconfig, args.context)
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc
    try:
        return await migrate(client, args.name, args.namespace)
    except MigrationError as exc:
        raise CommandError(str(exc)) from exc
    except ApiError as exc:
        raise CommandError(f"migration stopped: {exc}; running it again continues where it stopped") from exc
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    """Run the migration and print what it did."""
    import asyncio

    for line in asyncio.run(_migrate(args)):
        print(line)
    return 0
