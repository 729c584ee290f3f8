"""``kthena-py validate -f FILE``: check manifests offline, as the API server and the webhooks would.

Guarantees:

* Uses the validators the admission webhook uses (:func:`kthena_py.api.validation.validate_document`): the
  schema (CRD) rules, the CEL rules and Kthena's webhook rules, and the rules of our LoRA annotations on a
  ModelServing; no cluster is needed.
* ``FILE`` may hold several YAML or JSON documents; ``-`` reads stdin; ``-f`` may be repeated. ``List`` kinds
  (``v1 List``, ``ModelServingList``, ...) are expanded into their items. Documents of other API groups
  (Services, Deployments, ...) are skipped, so a whole manifest bundle can be checked.
* With ``--old FILE``, an object with the same kind, namespace and name there is the stored object, and the
  UPDATE rules (immutable fields, rollout capacity) apply too.
* The webhook's rules across objects apply among the documents given (and the ``--old`` ones, as the cluster's
  content): a ModelServing listed by two ModelPools, or targeted by an AutoscalingPolicy while a pool lists it,
  is reported on each object the webhook would refuse while the other exists (objects without a namespace are
  taken to share one).
* Prints one line per problem on stdout, ``<kind>/<name>: <field path>: <message>`` (the message in Kubernetes
  field-error form), and warnings (ModelBooster deprecation) on stderr. Exit status 0 when every object is
  valid, 1 otherwise (including unreadable files).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kthena_py.api.validation import FieldError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``validate``."""
    p = sub.add_parser("validate", help="validate manifests offline (schema, CEL and webhook rules)")
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        help="YAML/JSON file with one or more documents; - = stdin; may be repeated",
    )
    p.add_argument("--old", metavar="FILE", help="stored objects: validate the documents as updates of these")
    p.add_argument("-q", "--quiet", action="store_true", help="no warnings or notes on stderr")
    p.set_defaults(run=run)


@dataclass(frozen=True)
class Document:
    """One object to validate, with where it came from."""

    source: str
    index: int
    body: Any


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _is_list(body: Any) -> bool:
    from kthena_py.api.common import GROUP

    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
        return False
    api_version, kind = str(body.get("apiVersion", "")), str(body.get("kind", ""))
    return kind.endswith("List") and (api_version == "v1" or api_version.startswith(f"{GROUP}/"))


def _expand(source: str, index: int, body: Any) -> Iterator[Document]:
    if _is_list(body):
        for item in body["items"]:
            yield from _expand(source, index, item)
        return
    yield Document(source, index, body)


def load(path: str) -> list[Document]:
    """Read every document of ``path`` (``-`` = stdin), lists expanded.

    Raises:
        OSError: The file cannot be read.
        yaml.YAMLError: The text is not YAML.
    """
    import yaml

    found: list[Document] = []
    for index, body in enumerate(yaml.safe_load_all(_read(path))):
        if body is not None:
            found.extend(_expand(path, index, body))
    return found


def _ours(body: Any) -> bool:
    """Whether a document is for us: our group, one of our kinds, or not even an object with an apiVersion."""
    from kthena_py.api.common import GROUP
    from kthena_py.api.validation import KINDS

    if not isinstance(body, dict):
        return True
    api_version = body.get("apiVersion")
    if not isinstance(api_version, str) or body.get("kind") in KINDS:
        return True
    return api_version.split("/")[0] == GROUP


def _key(body: Any) -> tuple[str, str, str]:
    metadata = body.get("metadata") if isinstance(body, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    kind = body.get("kind") if isinstance(body, dict) else None
    return str(kind or ""), str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def label(document: Document) -> str:
    """``<kind>/<name>`` of a document (``<generateName>*`` or ``<unnamed #N in FILE>`` without a name)."""
    kind, _, name = _key(document.body)
    if not name and isinstance(document.body, dict):
        metadata = document.body.get("metadata")
        generate = metadata.get("generateName") if isinstance(metadata, dict) else None
        name = f"{generate}*" if isinstance(generate, str) and generate else ""
    return f"{kind or '<no kind>'}/{name or f'<unnamed #{document.index + 1} in {document.source}>'}"


def problem_lines(document: Document, errors: list[FieldError]) -> list[str]:
    """Render the errors of one document, one line each."""
    prefix = label(document)
    return [f"{prefix}: {error}" if error.path else f"{prefix}: {error.body()}" for error in errors]


def neighbour_lines(documents: list[Document], stored: Mapping[tuple[str, str, str], Any]) -> list[str]:
    """The problems of the webhook's rules across objects among ``documents``, one line each.

    ``stored`` (the ``--old`` objects by key) stands for the cluster: a stored object a document replaces is left
    out, and, as the webhook does on UPDATE, a document is checked only for the references its stored version
    does not already make.
    """
    from kthena_py.api.common import AUTOSCALING_POLICY_KIND
    from kthena_py.api.modelpool import MODEL_POOL_KIND
    from kthena_py.api.validation import autoscalingpolicy_conflicts, modelpool_conflicts
    from kthena_py.api.validation.poolmembers import policy_targets, pool_members

    keys = {_key(d.body) for d in documents}
    bodies = [d.body for d in documents] + [body for key, body in stored.items() if key not in keys]

    def of(kind: str, namespace: str) -> list[Any]:
        return [b for b in bodies if _key(b)[0] == kind and _key(b)[1] == namespace]

    lines: list[str] = []
    for document in documents:
        key = _key(document.body)
        kind, namespace, _ = key
        previous = stored.get(key)
        if kind == MODEL_POOL_KIND:
            known = {name for _, name in pool_members(previous)} if isinstance(previous, dict) else set()
            errors = modelpool_conflicts(
                document.body, of(MODEL_POOL_KIND, namespace), of(AUTOSCALING_POLICY_KIND, namespace), ignore=known
            )
        elif kind == AUTOSCALING_POLICY_KIND:
            known = {name for _, name in policy_targets(previous)} if isinstance(previous, dict) else set()
            errors = autoscalingpolicy_conflicts(document.body, of(MODEL_POOL_KIND, namespace), ignore=known)
        else:
            continue
        lines += problem_lines(document, errors)
    return lines


def run(args: argparse.Namespace) -> int:
    """Validate every document; print problems; exit 0 only when all are valid."""
    import yaml

    from kthena_py.api.common import GROUP, MODEL_BOOSTER_KIND, MODEL_SERVING_KIND
    from kthena_py.api.modelbooster import MODEL_BOOSTER_DEPRECATION_WARNING
    from kthena_py.api.validation import validate_document
    from kthena_py.plan.adapters.validation import lora_annotation_errors

    failed = False
    old: dict[tuple[str, str, str], Any] = {}
    if args.old:
        try:
            old = {_key(document.body): document.body for document in load(args.old)}
        except (OSError, yaml.YAMLError) as exc:
            print(f"{args.old}: cannot read: {exc}")
            return 1
    checked = 0
    all_documents: list[Document] = []
    for path in args.filename:
        try:
            documents = load(path)
        except (OSError, yaml.YAMLError) as exc:
            print(f"{path}: cannot read: {exc}")
            failed = True
            continue
        for document in documents:
            if not _ours(document.body):
                if not args.quiet:
                    kind, _, name = _key(document.body)
                    print(f"note: skipped {document.body.get('apiVersion')} {kind}/{name}", file=sys.stderr)
                continue
            checked += 1
            all_documents.append(document)
            errors = validate_document(document.body, old=old.get(_key(document.body)))
            if _key(document.body)[0] == MODEL_SERVING_KIND:
                errors = [*errors, *lora_annotation_errors(document.body)]
            for line in problem_lines(document, errors):
                print(line)
            failed = failed or bool(errors)
            if not args.quiet and _key(document.body)[0] == MODEL_BOOSTER_KIND:
                print(f"Warning: {label(document)}: {MODEL_BOOSTER_DEPRECATION_WARNING}", file=sys.stderr)
    if all_documents:
        conflicts = neighbour_lines(all_documents, old)
        for line in conflicts:
            print(line)
        failed = failed or bool(conflicts)
    if checked == 0 and not args.quiet:
        print(f"note: no {GROUP} objects found", file=sys.stderr)
    return 1 if failed else 0
