"""``kthena-py render -f FILE``: print what the controller would create for each ModelServing in FILE.

Guarantees: uses the same planning code as the controller (PodGroups as if Volcano with
``subGroupPolicy`` were installed), needs no cluster, and prints the same bytes for the same input.
Each document first gets the CRD's structural defaults (:func:`kthena_py.api.structural.with_defaults`,
e.g. ``protocol: TCP`` on container ports), as the API server stores it, so the revision and the objects
are those the controller derives from the stored object (``test/envtest/test_render_agreement.py``).
Invalid documents end the command with a one-line error per problem and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import CommandError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``render``."""
    p = sub.add_parser("render", help="print the objects the controller would create for ModelServings")
    p.add_argument("-f", "--filename", required=True, help="YAML/JSON file with one or more documents (- = stdin)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.set_defaults(run=run)


def _load(path: str) -> list[dict[str, Any]]:
    import yaml

    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
        docs = [d for d in yaml.safe_load_all(text) if d]
    except (OSError, yaml.YAMLError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc
    return [d for d in docs if isinstance(d, dict)]


def run(args: argparse.Namespace) -> int:
    """Render every ModelServing of the file as one ``v1`` ``List``."""
    import pydantic
    import yaml

    from kthena_py.api.structural import with_defaults
    from kthena_py.plan.modelserving.render import render

    items: list[dict[str, Any]] = []
    errors: list[str] = []
    for doc in _load(args.filename):
        if doc.get("kind") != "ModelServing":
            continue
        name = (doc.get("metadata") or {}).get("name", "?")
        try:
            items.extend(render(with_defaults(doc)))
        except pydantic.ValidationError as exc:
            errors.extend(f"ModelServing/{name}: {e['loc']}: {e['msg']}" for e in exc.errors())
        except ValueError as exc:
            errors.append(f"ModelServing/{name}: {exc}")
    if errors:
        raise CommandError("; ".join(errors))
    out = {"apiVersion": "v1", "kind": "List", "items": items}
    if args.output == "json":
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(out, sort_keys=True))
    return 0
