"""Rendering a translation: the objects as YAML or JSON, the report as a table or JSON, the field tables as Markdown.

Guarantees: pure functions of their input; keys keep the order the translators built them in (``apiVersion``,
``kind``, ``metadata``, ``spec``), so the output reads like a hand-written manifest and is stable for golden
tests. The JSON output is one ``v1 List``, which ``kubectl apply -f`` and ``kthena-py validate`` accept; the YAML
output is one document per object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

import yaml

from kthena_py.importers.report import OUTCOMES, FieldRule, ReportLine

__all__ = ["field_table_markdown", "objects_json", "objects_yaml", "report_json", "report_table"]


def objects_yaml(objects: Iterable[dict[str, Any]]) -> str:
    """One YAML document per object."""
    return yaml.safe_dump_all(list(objects), sort_keys=False, default_flow_style=False, width=120)


def objects_json(objects: Iterable[dict[str, Any]]) -> str:
    """A ``v1 List`` of the objects, indented."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}, indent=2) + "\n"


def report_json(report: Sequence[ReportLine]) -> str:
    """The report lines as a JSON list of objects (``document, source, path, outcome, target, note``)."""
    return json.dumps([asdict(line) for line in report], indent=2) + "\n"


def _counts(report: Sequence[ReportLine]) -> str:
    return ", ".join(f"{sum(line.outcome == outcome for line in report)} {outcome}" for outcome in OUTCOMES)


def report_table(report: Sequence[ReportLine]) -> str:
    """A plain-text table: one block per document, one row per field, then the totals."""
    out: list[str] = []
    current: tuple[int, str] | None = None
    width = max((len(line.path) for line in report), default=4)
    for line in report:
        if (line.document, line.source) != current:
            current = (line.document, line.source)
            out.append(f"document {line.document}: {line.source}")
        detail = " -- ".join(part for part in (line.target, line.note) if part)
        out.append(f"  {line.path:<{width}}  {line.outcome:<12}  {detail}".rstrip())
    out.append(f"{len(report)} field(s): {_counts(report)}")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "\\<").replace("\n", " ")


def field_table_markdown(api_version: str, kind: str, rules: Sequence[FieldRule]) -> str:
    """A Markdown table of a kind's field rules."""
    lines = [
        f"#### {kind} (`{api_version}`)",
        "",
        "| Field | Outcome | kthena_py | Note |",
        "|---|---|---|---|",
    ]
    for rule in rules:
        target = _cell(rule.target) if rule.target else "-"
        lines.append(f"| `{rule.path}` | {rule.outcome} | {target} | {_cell(rule.note)} |")
    return "\n".join(lines) + "\n"
