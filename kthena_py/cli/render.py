"""``kthena-py render -f FILE``: print what the controllers would create for each ModelServing and ModelBooster.

Guarantees: uses the same planning code as the controllers, needs no cluster, and prints the same bytes for the
same input. Invalid documents end the command with a one-line error per problem and exit status 1.

* A ModelServing renders into its PodGroups (as if Volcano with ``subGroupPolicy`` were installed),
  ControllerRevision, Services and Pods.
* A ModelBooster renders into its ModelServing, ModelServer and ModelRoute, exactly as the controller expands
  it but without owner references, so the output can be committed and applied in the booster's place (see
  ``docs/modelbooster.md``). Its ``metadata.uid`` (the ``model-uid`` label the ModelServer selects pods by)
  is kept when the document has one (``kubectl get modelbooster NAME -o yaml | kthena-py render -f -``
  renders the live children), else a placeholder.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import pydantic
import yaml

from kthena_py.api.modelbooster import ModelBooster
from kthena_py.plan.modelbooster import ExpandError, Images, expand
from kthena_py.plan.modelserving.render import PLACEHOLDER_UID, render

from .common import CommandError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``render``."""
    p = sub.add_parser("render", help="print the objects the controllers would create for ModelServings/Boosters")
    p.add_argument("-f", "--filename", required=True, help="YAML/JSON file with one or more documents (- = stdin)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    defaults = Images()
    p.add_argument("--downloader-image", default=defaults.downloader, help="ModelBooster downloader image")
    p.add_argument("--runtime-image", default=defaults.runtime, help="ModelBooster runtime sidecar image")
    p.set_defaults(run=run)


def _load(path: str) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
        docs = [d for d in yaml.safe_load_all(text) if d]
    except (OSError, yaml.YAMLError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc
    return [d for d in docs if isinstance(d, dict)]


def render_booster(doc: dict[str, Any], images: Images) -> list[dict[str, Any]]:
    """The ModelServing, ModelServer and ModelRoute of a ModelBooster document, without owner references.

    Raises:
        pydantic.ValidationError: The document is not a valid ModelBooster.
        ExpandError: It cannot be expanded.
    """
    document = {k: v for k, v in doc.items() if k != "status"}
    metadata = dict(document.get("metadata") or {})
    metadata.setdefault("namespace", "default")
    metadata.setdefault("uid", PLACEHOLDER_UID)
    document["metadata"] = metadata
    items = expand(ModelBooster.model_validate(document), images).all()
    for item in items:
        item["metadata"].pop("ownerReferences", None)
    return items


def run(args: argparse.Namespace) -> int:
    """Render every ModelServing and ModelBooster of the file as one ``v1`` ``List``."""
    items: list[dict[str, Any]] = []
    errors: list[str] = []
    images = Images(downloader=args.downloader_image, runtime=args.runtime_image)
    for doc in _load(args.filename):
        kind = doc.get("kind")
        if kind not in ("ModelServing", "ModelBooster"):
            continue
        name = (doc.get("metadata") or {}).get("name", "?")
        try:
            items.extend(render(doc) if kind == "ModelServing" else render_booster(doc, images))
        except pydantic.ValidationError as exc:
            errors.extend(f"{kind}/{name}: {e['loc']}: {e['msg']}" for e in exc.errors())
        except (ExpandError, ValueError) as exc:
            errors.append(f"{kind}/{name}: {exc}")
    if errors:
        raise CommandError("; ".join(errors))
    out = {"apiVersion": "v1", "kind": "List", "items": items}
    if args.output == "json":
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(out, sort_keys=True))
    return 0
