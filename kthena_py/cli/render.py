"""``kthena-py render -f FILE``: print what the controllers would create for each ModelServing and ModelBooster.

Guarantees: uses the same planning code as the controllers, needs no cluster, and prints the same bytes for the
same input. Invalid documents end the command with a one-line error per problem and exit status 1.

* A ModelServing first gets the CRD's structural defaults (:func:`kthena_py.api.structural.with_defaults`, e.g.
  ``protocol: TCP`` on container ports), as the API server stores it, so the revision and the objects are those
  the controller derives from the stored object (``test/envtest/test_render_agreement.py``); it renders into its
  PodGroups (as if Volcano with ``subGroupPolicy`` were installed), ControllerRevision, Services and Pods.
* A ModelBooster renders into its ModelServing, ModelServer and ModelRoute, exactly as the controller expands
  it but without owner references, so the output can be committed and applied in the booster's place (see
  ``docs/modelbooster.md``). Its ``metadata.uid`` (the ``model-uid`` label the ModelServer selects pods by)
  is kept when the document has one (``kubectl get modelbooster NAME -o yaml | kthena-py render -f -``
  renders the live children), else a placeholder. A booster with the prefetch opt-in renders its ModelCache
  first (then the gated ModelServing).
* Heavy modules are imported when the command runs, not when the command line is parsed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .common import CommandError

if TYPE_CHECKING:
    from kthena_py.plan.modelbooster import Images


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``render``."""
    p = sub.add_parser("render", help="print the objects the controllers would create for ModelServings/Boosters")
    p.add_argument("-f", "--filename", required=True, help="YAML/JSON file with one or more documents (- = stdin)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    p.add_argument("--downloader-image", default=None, help="ModelBooster downloader image (default: the built-in)")
    p.add_argument("--runtime-image", default=None, help="ModelBooster runtime sidecar image (default: the built-in)")
    p.set_defaults(run=run)


def _load(path: str) -> list[dict[str, Any]]:
    import yaml

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
    from kthena_py.api.modelbooster import ModelBooster
    from kthena_py.plan.modelbooster import expand
    from kthena_py.plan.modelserving.offline.render import PLACEHOLDER_UID

    document = {k: v for k, v in doc.items() if k != "status"}
    metadata = dict(document.get("metadata") or {})
    metadata.setdefault("namespace", "default")
    metadata.setdefault("uid", PLACEHOLDER_UID)
    document["metadata"] = metadata
    children = expand(ModelBooster.model_validate(document), images)
    items = ([children.modelcache] if children.modelcache is not None else []) + children.all()
    for item in items:
        item["metadata"].pop("ownerReferences", None)
    return items


def run(args: argparse.Namespace) -> int:
    """Render every ModelServing and ModelBooster of the file as one ``v1`` ``List``."""
    import pydantic
    import yaml

    from kthena_py.api.structural import with_defaults
    from kthena_py.plan.modelbooster import ExpandError, Images
    from kthena_py.plan.modelserving.offline.render import render

    items: list[dict[str, Any]] = []
    errors: list[str] = []
    defaults = Images()
    images = Images(
        downloader=args.downloader_image or defaults.downloader, runtime=args.runtime_image or defaults.runtime
    )
    for doc in _load(args.filename):
        kind = doc.get("kind")
        if kind not in ("ModelServing", "ModelBooster"):
            continue
        name = (doc.get("metadata") or {}).get("name", "?")
        try:
            items.extend(render(with_defaults(doc)) if kind == "ModelServing" else render_booster(doc, images))
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
