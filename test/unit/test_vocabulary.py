"""The vocabulary is spelled once: label/annotation keys and condition types live only in kthena_py.vocab.

The check reads every module of kthena_py with :mod:`ast` and collects its string constants, leaving out
docstrings (a bare string statement is documentation, so prose may name a key). A constant is a *key* when it
is ``<domain>/<name>`` (or a bare ``<domain>/`` prefix) under a domain whose keys kthena_py uses (Kthena's,
Volcano's, LeaderWorkerSet's, ours, and the Kubernetes controller/kubectl annotations); apiVersions such as
``workload.serving.volcano.sh/v1alpha1`` are not keys (their name part is a version). A constant is a
*condition type* (or reason) when it is one of :data:`kthena_py.vocab.conditions.CONDITION_TYPES`
(or ``CONDITION_REASONS``). A literal in a condition's place (the ``type`` or ``reason`` of a dict literal that
also has a ``status``, or of a ``ConditionUpdate``/``set_condition`` call) must be registered there, so a new
condition type or reason cannot escape the check by not being listed.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from kthena_py.vocab.conditions import CONDITION_REASONS, CONDITION_TYPES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kthena_py"
LABELS = "kthena_py/vocab/labels.py"
CONDITIONS = "kthena_py/vocab/conditions.py"

_KEY = re.compile(
    r"^(?:[a-z0-9-]+\.)*(?:volcano\.sh|kthena-py\.io|sigs\.k8s\.io|scheduling\.k8s\.io|controller\.kubernetes\.io"
    r"|kubectl\.kubernetes\.io)/([A-Za-z0-9._-]*)$"
)
_VERSION = re.compile(r"^v[0-9]+(?:(?:alpha|beta)[0-9]+)?$")

AMBIGUOUS = frozenset({"Failed", "Pending", "Downloading", "Loading"})
"""Condition words that are also ordinary words elsewhere: ``Failed`` is a pod phase (vocab.pods) and a phase of
an in-place update (a ``Literal`` type in plan.modelserving.inplace_state); ``Pending`` and ``Downloading`` are
ModelCache reasons and also pod / ModelCache phases (``Literal`` types); ``Loading`` is an AdaptersLoaded reason and a
ModelPool swap step (a ``Literal`` type in api.modelpool)."""

ALLOWED = frozenset(
    {
        ("kthena_py/api/crdgen/crd.py", "Available"),
        ("kthena_py/testing/evictionstorm.py", "Ready"),
        ("kthena_py/testing/controlplane/cluster.py", "Ready"),
        ("kthena_py/testing/controlplane/kwokstages.py", "Ready"),
        ("kthena_py/api/modelcache.py", "Ready"),
        ("kthena_py/api/modelpool.py", "Ready"),
        ("kthena_py/api/modelpool.py", "Degraded"),
    }
)
"""(module, literal) pairs left out of the check.

* The ModelCache's and the ModelPool's ``status.phase`` types spell their phases (``Ready`` and ``Degraded`` are
  phases there, not conditions).
* The ModelServing printer column named ``Available`` shows ``status.availableReplicas``, not a condition.
* The test harness's own readiness checks (the eviction storm counts ready units as a user does, independently of
  the code under test; the cluster tier waits for its nodes). An entry here permits a spelling, it never
  requires one."""


_CONDITION_WORDS = (frozenset(CONDITION_TYPES) | frozenset(CONDITION_REASONS)) - AMBIGUOUS


def _docstrings(tree: ast.Module) -> set[int]:
    """Return the ids of the constants that are documentation (bare string statements)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def _is_key(value: str) -> bool:
    match = _KEY.match(value)
    return match is not None and _VERSION.match(match.group(1)) is None


def spellings(root: Path = PACKAGE) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Return, for every key and every condition type spelled in ``root``, the modules that spell it."""
    keys: dict[str, set[str]] = defaultdict(set)
    conditions: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in docs:
                continue
            if (module, node.value) in ALLOWED:
                continue
            if _is_key(node.value):
                keys[node.value].add(module)
            if node.value in _CONDITION_WORDS:
                conditions[node.value].add(module)
    return keys, conditions


_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
"""What a condition type or reason looks like (CamelCase); prose in the same place (a schema's description) is not."""

_CONDITION_CALLS = {"ConditionUpdate": (0, 2), "set_condition": (1, 3)}
"""Functions taking a condition's type and reason: their positions (type, reason) among the arguments."""


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def condition_literals(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Return the string literals in a condition's type or reason place, with the modules spelling them."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            places: list[ast.expr | None] = []
            if isinstance(node, ast.Dict):
                fields = {_literal(k): v for k, v in zip(node.keys, node.values, strict=True)}
                if "status" in fields:
                    places += [fields.get("type"), fields.get("reason")]
            elif isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in _CONDITION_CALLS:
                    places += [node.args[i] for i in _CONDITION_CALLS[name] if i < len(node.args)]
                    places += [kw.value for kw in node.keywords if kw.arg in ("type", "type_", "reason")]
            for place in places:
                value = _literal(place)
                if value is not None and _IDENTIFIER.match(value) and (module, value) not in ALLOWED:
                    found[value].add(module)
    return found


def test_every_label_and_annotation_key_is_spelled_only_in_the_vocabulary() -> None:
    keys, _ = spellings()
    assert keys, "the scan found no key at all: the pattern is broken"
    misplaced = {key: sorted(modules) for key, modules in keys.items() if modules != {LABELS}}
    assert misplaced == {}


def test_every_condition_type_and_reason_is_spelled_only_in_the_vocabulary() -> None:
    _, conditions = spellings()
    assert set(conditions) == _CONDITION_WORDS
    misplaced = {kind: sorted(modules) for kind, modules in conditions.items() if modules != {CONDITIONS}}
    assert misplaced == {}


def test_no_condition_type_or_reason_is_spelled_in_a_conditions_place() -> None:
    """Outside the vocabulary, conditions name their type and reason by constant, never by literal."""
    found = condition_literals()
    assert {value: sorted(modules) for value, modules in found.items() if modules != {CONDITIONS}} == {}


@pytest.mark.parametrize(
    "source",
    [
        'def f():\n    return {"type": "Unlisted", "status": "True"}\n',
        'def f():\n    return {"type": "X", "status": "True", "reason": "Unlisted"}\n',
        'def f(c):\n    return c.ConditionUpdate("X", "True", "Unlisted", "")\n',
        'def f(c):\n    return c.set_condition([], "Unlisted", True, "R", "")\n',
        'def f(c):\n    return c.ConditionUpdate(type="X", status="True", reason="Unlisted", message="")\n',
    ],
)
def test_an_unlisted_condition_literal_is_found(tmp_path: Path, source: str) -> None:
    package = tmp_path / "kthena_py"
    package.mkdir()
    (package / "stray.py").write_text(source, encoding="utf-8")
    assert condition_literals(package)["Unlisted"] == {"kthena_py/stray.py"}


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('X = "modelserving.volcano.sh/name"\n', "modelserving.volcano.sh/name"),
        ('PREFIX = "leaderworkerset.sigs.k8s.io/"\n', "leaderworkerset.sigs.k8s.io/"),
        ('def f():\n    return {"type": "Progressing"}\n', "Progressing"),
    ],
)
def test_the_check_fails_on_a_stray_literal(tmp_path: Path, source: str, found: str) -> None:
    package = tmp_path / "kthena_py"
    package.mkdir()
    (package / "stray.py").write_text(source, encoding="utf-8")
    keys, conditions = spellings(package)
    assert {**keys, **conditions}[found] == {"kthena_py/stray.py"}


@pytest.mark.parametrize(
    "source",
    [
        '"""Pods carry ``modelserving.volcano.sh/name`` and the condition ``Available``."""\n',
        'X = 1\n"""Attribute docs may name modelserving.volcano.sh/name."""\n',
        'V = "workload.serving.volcano.sh/v1alpha1"\nW = "scheduling.volcano.sh/v1beta1"\n',
    ],
)
def test_docstrings_and_api_versions_are_not_vocabulary(tmp_path: Path, source: str) -> None:
    package = tmp_path / "kthena_py"
    package.mkdir()
    (package / "prose.py").write_text(source, encoding="utf-8")
    assert spellings(package) == ({}, {})


def test_import_linter_covers_every_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    named: set[str] = set()
    for contract in config["tool"]["importlinter"]["contracts"]:
        for field in ("layers", "source_modules", "modules", "forbidden_modules"):
            named.update(contract.get(field, []))
    packages = {f"kthena_py.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    modules = {f"kthena_py.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert packages | modules <= named
