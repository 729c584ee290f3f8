"""Golden files of the importer tests: compare, or rewrite with ``KTHENA_PY_UPDATE_GOLDEN=1``.

Shared by the KubeAI and LLMKube golden tests: an input manifest ``golden/<name>.yaml`` has its translated
objects in ``golden/<name>.out.yaml`` and its report in ``golden/<name>.report.json``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from kthena_py.importers.context import ImportOptions
from kthena_py.importers.render import objects_yaml
from kthena_py.importers.report import Translation
from kthena_py.importers.translate import translate

GOLDEN = Path(__file__).parent / "golden"
UPDATE_ENV = "KTHENA_PY_UPDATE_GOLDEN"


def check_golden(peer: str, name: str, options: ImportOptions | None = None) -> Translation:
    """Translate ``golden/<name>.yaml`` and compare the objects and the report with their golden files."""
    translation = translate(peer, (GOLDEN / f"{name}.yaml").read_text(), options or ImportOptions())
    objects = objects_yaml([dict(obj) for obj in translation.objects])
    report = json.dumps([asdict(line) for line in translation.report], indent=2) + "\n"
    out, report_file = GOLDEN / f"{name}.out.yaml", GOLDEN / f"{name}.report.json"
    if os.environ.get(UPDATE_ENV) == "1":
        out.write_text(objects)
        report_file.write_text(report)
    assert objects == out.read_text(), f"{out.name} differs (rewrite with {UPDATE_ENV}=1 and review the diff)"
    assert report == report_file.read_text(), f"{report_file.name} differs"
    return translation


def paths_per_document(translation: Translation) -> dict[int, Counter[str]]:
    """How often each path is reported, per document."""
    counts: dict[int, Counter[str]] = {}
    for line in translation.report:
        counts.setdefault(line.document, Counter())[line.path] += 1
    return counts
