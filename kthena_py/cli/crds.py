"""``kthena-py crds``: write (or check) the CRDs generated from the API models, and docs/api.md.

Guarantees: the files are exactly :func:`kthena_py.api.crdgen.render_yaml` of each CRD (one per kind, named
``workload.serving.volcano.sh_<plural>.yaml``), in ``--output-dir`` and, as the same bytes, in the Helm chart's
``crds/`` (``--chart-crds-dir``), and :func:`kthena_py.api.crdgen.render_api_docs`; a file
already up to date is not rewritten; ``--check`` writes nothing and exits 1 listing the stale files.
``--stdout`` prints all CRDs as one multi-document YAML stream (e.g. ``kthena-py crds --stdout | kubectl
apply --server-side -f -``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import CommandError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``crds``."""
    p = sub.add_parser("crds", help="generate the CRDs (and docs/api.md) from the API models")
    p.add_argument("--output-dir", default="manifests/crd", help="directory for the CRD files (default: %(default)s)")
    p.add_argument(
        "--chart-crds-dir",
        default="charts/kthena-py/crds",
        help="also write the CRDs here, for the Helm chart; '' to skip (default: %(default)s)",
    )
    p.add_argument("--api-docs", metavar="FILE", help="also write the API reference (e.g. docs/api.md)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is missing or stale")
    p.add_argument("--stdout", action="store_true", help="print the CRDs as one YAML stream instead")
    p.set_defaults(run=run)


def expected_files(output_dir: Path, api_docs: Path | None, chart_crds_dir: Path | None = None) -> dict[Path, str]:
    """Return every generated file's path and content.

    Args:
        output_dir: Directory of the CRD files.
        api_docs: Path of the API reference, or ``None`` to leave it out.
        chart_crds_dir: The Helm chart's ``crds/`` directory, or ``None`` to leave it out.
    """
    from kthena_py.api.crdgen import render_api_docs, rendered_crds

    files = {output_dir / name: text for name, text in rendered_crds().items()}
    if chart_crds_dir is not None:
        files.update({chart_crds_dir / name: text for name, text in rendered_crds().items()})
    if api_docs is not None:
        files[api_docs] = render_api_docs()
    return files


def run(args: argparse.Namespace) -> int:
    """Write, check or print the generated files."""
    if args.stdout:
        from kthena_py.api.crdgen import rendered_crds

        sys.stdout.write("---\n".join(rendered_crds().values()))
        return 0
    files = expected_files(
        Path(args.output_dir),
        Path(args.api_docs) if args.api_docs else None,
        Path(args.chart_crds_dir) if args.chart_crds_dir else None,
    )
    stale = []
    for path, content in files.items():
        try:
            current = path.read_text(encoding="utf-8") if path.exists() else None
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        if current == content:
            continue
        stale.append(path)
        if args.check:
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc}") from exc
        print(f"wrote {path}", file=sys.stderr)
    if args.check and stale:
        for path in stale:
            print(f"out of date: {path} (run `kthena-py crds`)", file=sys.stderr)
        return 1
    return 0
