"""``kthena-py import kubeai|llmkube -f FILE``: translate a peer's manifests into kthena_py objects, with a report.

Guarantees:

* Reads ``FILE`` (``-`` = stdin): several YAML documents, or a ``kind: List`` as ``kubectl get -o yaml`` prints.
* On success (exit 0) writes the objects on stdout (YAML documents, or with ``-o json`` one ``v1 List``) and the
  field report on stderr as a table, or with ``--report FILE`` as JSON into FILE (stderr then gets one summary
  line). Every field present in the input has one report line: mapped, approximated (how) or dropped (why).
* Bad input (unreadable file, invalid YAML, an unknown apiVersion/kind, an unknown field, a value of the wrong
  type, an unreadable ``--kubeai-config``): exit 2, one error line on stderr naming the document and the field,
  nothing on stdout.
* ``--strict``: when a field of the desired state would be dropped, exit 3 with the report (stderr or
  ``--report``) and the dropped fields named, nothing on stdout.
* ``--namespace NS`` puts every emitted object (and every reference between them) in NS.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

EXIT_BAD_INPUT = 2
EXIT_STRICT = 3


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``import``."""
    p = sub.add_parser(
        "import",
        help="translate KubeAI or LLMKube manifests into kthena_py objects, with a field report",
        description="Translate a peer system's manifests into kthena_py objects (stdout) and report what happened "
        f"to every field (stderr). Exit 0 = translated, {EXIT_BAD_INPUT} = bad input, {EXIT_STRICT} = --strict "
        "and something would be dropped.",
    )
    p.add_argument("peer", choices=["kubeai", "llmkube"], help="the system the manifests come from")
    p.add_argument("-f", "--filename", required=True, help="YAML file with one or more documents; - = stdin")
    p.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml", help="format of the objects")
    p.add_argument("--report", metavar="FILE", help="write the field report as JSON into FILE instead of stderr")
    p.add_argument("--namespace", help="put every emitted object into this namespace")
    p.add_argument("--strict", action="store_true", help="fail (exit 3) when any field would be dropped")
    p.add_argument(
        "--kubeai-config",
        metavar="FILE",
        help="KubeAI's system config (its config.yaml, or chart values): resourceProfiles and modelServers "
        "images; default: KubeAI's chart defaults",
    )
    p.set_defaults(run=run)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _bad(message: str) -> int:
    print(f"kthena-py import: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _write_report(args: argparse.Namespace, report: Any) -> None:
    from kthena_py.importers.render import report_json, report_table

    if args.report:
        with open(args.report, "w", encoding="utf-8") as handle:
            handle.write(report_json(report))
        print(f"kthena-py import: report of {len(report)} field(s) written to {args.report}", file=sys.stderr)
    else:
        sys.stderr.write(report_table(report))


def run(args: argparse.Namespace) -> int:
    """Translate, write the objects and the report; see the module docstring for the exit status."""
    import yaml

    from kthena_py.importers.context import ImportOptions
    from kthena_py.importers.kubeai.profiles import images_from_config, profiles_from_config
    from kthena_py.importers.render import objects_json, objects_yaml
    from kthena_py.importers.report import ImportFailure
    from kthena_py.importers.translate import StrictViolation, translate

    profiles = images = None
    if args.kubeai_config:
        try:
            config = yaml.safe_load(_read(args.kubeai_config))
            profiles, images = profiles_from_config(config), images_from_config(config)
        except (OSError, yaml.YAMLError, ValueError) as exc:
            return _bad(f"--kubeai-config {args.kubeai_config}: {exc}")
    try:
        text = _read(args.filename)
    except (OSError, UnicodeDecodeError) as exc:
        return _bad(f"{args.filename}: {exc}")
    options = ImportOptions(
        namespace=args.namespace, strict=args.strict, kubeai_profiles=profiles, kubeai_images=images
    )
    try:
        translation = translate(args.peer, text, options)
    except ImportFailure as exc:
        return _bad(f"{args.filename}: {exc}")
    except StrictViolation as exc:
        _write_report(args, exc.translation.report)
        print(f"kthena-py import: error: {exc}", file=sys.stderr)
        return EXIT_STRICT
    except ValueError as exc:
        return _bad(str(exc))
    _write_report(args, translation.report)
    objects = [dict(obj) for obj in translation.objects]
    sys.stdout.write(objects_json(objects) if args.output == "json" else objects_yaml(objects))
    return 0
