#!/usr/bin/env python3
"""Render the importers' field tables into docs/migrating.md (``--check``: fail when the docs are stale).

Each peer's tables come from its package's ``FIELD_TABLES`` (``kthena_py.importers.<peer>``), the same tables the
translators report from, and replace the text between the peer's markers in docs/migrating.md:

    <!-- BEGIN GENERATED: kubeai field tables (hack/gen-import-docs.py) -->
    ...
    <!-- END GENERATED: kubeai field tables -->

A peer whose package is not in this build renders as one line saying so. Usage:

    .venv/bin/python hack/gen-import-docs.py [--check] [--docs docs/migrating.md]
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "migrating.md"
PEERS = ("kubeai", "llmkube")


def begin_marker(peer: str) -> str:
    """The line that opens ``peer``'s generated section."""
    return f"<!-- BEGIN GENERATED: {peer} field tables (hack/gen-import-docs.py) -->"


def end_marker(peer: str) -> str:
    """The line that closes ``peer``'s generated section."""
    return f"<!-- END GENERATED: {peer} field tables -->"


def render_peer(peer: str) -> str:
    """The Markdown of every field table of ``peer``."""
    from kthena_py.importers.render import field_table_markdown

    try:
        package = importlib.import_module(f"kthena_py.importers.{peer}")
    except ModuleNotFoundError as exc:
        if exc.name != f"kthena_py.importers.{peer}":
            raise
        return f"*(no {peer} translators in this build)*\n"
    tables = package.FIELD_TABLES
    return "\n".join(field_table_markdown(api_version, kind, rules) for (api_version, kind), rules in tables.items())


def render(text: str) -> str:
    """``text`` with every peer's generated section replaced."""
    for peer in PEERS:
        begin, end = begin_marker(peer), end_marker(peer)
        start, stop = text.find(begin), text.find(end)
        if start < 0 or stop < start:
            raise SystemExit(f"gen-import-docs: the markers of {peer} are missing: {begin} ... {end}")
        text = text[: start + len(begin)] + "\n\n" + render_peer(peer) + "\n" + text[stop:]
    return text


def main(argv: list[str] | None = None) -> int:
    """Rewrite the docs, or with ``--check`` report whether they are current (exit 1 when stale)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when the docs differ from the tables")
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args(argv)
    current = args.docs.read_text(encoding="utf-8")
    wanted = render(current)
    if args.check:
        if wanted != current:
            print(f"{args.docs}: the field tables are stale; run hack/gen-import-docs.py", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        args.docs.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
