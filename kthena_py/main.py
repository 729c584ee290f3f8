"""The ``kthena-py`` command line: dispatches to the subcommands in :mod:`kthena_py.cli`.

Guarantees: bad flags end the process with a usage message and exit status 2; a user-facing failure
(:class:`~kthena_py.cli.common.CommandError`, e.g. an unusable kubeconfig) with one line on stderr and exit
status 1 — never a traceback. Building the parser imports only the standard library and the light
:mod:`kthena_py.cli` modules: a subcommand imports what it needs (pydantic models, the Kubernetes client,
scipy, matplotlib) when it runs, so ``kthena-py --help`` and ``kthena-py validate`` start quickly
(``bench/startup.py`` measures it). ``kthena-py download`` (a Job's and an init container's whole life) builds only
its own parser, so it imports none of the other subcommand modules.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from kthena_py import __version__
from kthena_py.cli.common import CommandError


def _subcommand_modules(command: str | None) -> list[ModuleType]:
    """The modules that register the subcommands (each has add_parser(sub) and sets args.run), in help order.

    For ``download`` only its own module: the downloader's start-up time is part of every download.
    """
    if command == "download":
        from kthena_py.cli import download_args

        return [download_args]
    from kthena_py.cli import (
        activator,
        attest_args,
        autoscaler,
        crds,
        download_args,
        import_,
        manager,
        modelbooster,
        optimize,
        render,
        rollout_args,
        shards,
        status_args,
        validate,
    )

    return [
        manager,
        activator,
        render,
        crds,
        validate,
        optimize,
        autoscaler,
        modelbooster,
        import_,
        rollout_args,
        status_args,
        shards,
        download_args,
        attest_args,
    ]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser for every subcommand (only ``download``'s when ``command`` is ``"download"``)."""
    parser = argparse.ArgumentParser(prog="kthena-py", description="Kthena workload controllers, in Python.")
    parser.add_argument("--version", action="version", version=f"kthena-py {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _subcommand_modules(command):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kthena-py`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        result: int = args.run(args)
        return result
    except CommandError as exc:
        print(f"kthena-py: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
