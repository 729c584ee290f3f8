"""Audit of the list types of the embedded pod schemas (:mod:`kthena_py.api.crdgen.podlists`).

For every list in the embedded pod parts of the generated CRDs (ModelServing entry and worker templates,
ModelBooster's backend env and worker resources, affinity and tolerations) the list type and keys are compared
with what the Pod API enforces (``POD_LISTS``, established by ``test/envtest/test_pod_list_uniqueness.py``)
and with Kthena's generated CRDs (``data/kthena_list_types.json``, written by
``hack/extract-kthena-list-types.py``). A list-map or set the Pod API does not enforce fails the audit; every
difference from Kthena must be a row of docs/compatibility.md's "Pod template list types" table, and every
row a difference.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_py.api.crdgen import build_crds, k8s
from kthena_py.api.crdgen.podlists import CONTAINER_LISTS, POD_LISTS, list_types, lookup, relax
from kthena_py.api.crdgen.schema import EMBEDDED
from kthena_py.api.validation import validate_document
from kthena_py.main import main

ROOT = Path(__file__).resolve().parents[3]
KTHENA = json.loads((Path(__file__).parent / "data" / "kthena_list_types.json").read_text(encoding="utf-8"))
BASES = Path(__file__).parent / "corpus" / "bases"
SERVINGS = "workload.serving.volcano.sh_modelservings.yaml"
BOOSTERS = "workload.serving.volcano.sh_modelboosters.yaml"

#: The embedded pod parts of the CRDs: (CRD file, path of the field) -> its place in a PodSpec.
POD_PARTS: dict[tuple[str, str], str] = {
    (SERVINGS, "spec.template.roles[].entryTemplate.spec"): "",
    (SERVINGS, "spec.template.roles[].workerTemplate.spec"): "",
    (BOOSTERS, "spec.backend.env"): "containers[].env",
    (BOOSTERS, "spec.backend.envFrom"): "containers[].envFrom",
    (BOOSTERS, "spec.backend.workers[].resources"): "containers[].resources",
    (BOOSTERS, "spec.backend.workers[].affinity"): "affinity",
    (BOOSTERS, "spec.backend.workers[].tolerations"): "tolerations",
}

ListTypes = dict[str, tuple[str, tuple[str, ...]]]


def _ours(file: str) -> ListTypes:
    (version,) = build_crds()[file]["spec"]["versions"]
    return list_types(version["schema"]["openAPIV3Schema"])


def _kthena(file: str) -> ListTypes:
    return {path: (entry["type"], tuple(entry["keys"])) for path, entry in KTHENA["lists"][file].items()}


def _pod_path(file: str, path: str) -> str | None:
    """The PodSpec path of a CRD list path, or ``None`` outside the embedded pod parts."""
    for (part_file, prefix), at in POD_PARTS.items():
        if part_file == file and (path == prefix or path.startswith(f"{prefix}.") or path.startswith(f"{prefix}[]")):
            rest = path[len(prefix) :].lstrip(".")
            if not at:
                return rest
            return f"{at}{'' if not rest or rest.startswith('[') else '.'}{rest}"
    return None


def _render(list_type: tuple[str, tuple[str, ...]] | None) -> str:
    if list_type is None or list_type[0] == "atomic":
        return "atomic"
    kind, keys = list_type
    return f"map on {', '.join(f'`{key}`' for key in keys)}" if kind == "map" else kind


def test_pod_parts_cover_every_embedded_pod_field() -> None:
    declared = {embedded.pod_path for embedded in EMBEDDED.values() if embedded.pod_path is not None}
    assert declared == set(POD_PARTS.values())


def test_the_table_lists_exactly_the_vendored_non_atomic_lists() -> None:
    vendored = list_types(k8s.core_schema(k8s.POD_SPEC))
    assert vendored == {item.path: (item.list_type, item.keys) for item in POD_LISTS}
    assert len({item.path for item in POD_LISTS}) == len(POD_LISTS)


def test_ephemeral_containers_share_the_containers_facts() -> None:
    for item in CONTAINER_LISTS:
        regular = lookup(f"containers[].{item.path}")
        for kind in ("initContainers", "ephemeralContainers"):
            other = lookup(f"{kind}[].{item.path}")
            assert regular is not None and other is not None
            assert (other.enforced, other.pod_api) == (regular.enforced, regular.pod_api)
    kinds = [lookup(kind) for kind in ("containers", "initContainers", "ephemeralContainers")]
    assert all(item is not None and item.enforced for item in kinds)


def test_the_table_states_its_evidence_consistently() -> None:
    for item in POD_LISTS:
        if item.enforced:
            assert item.pod_api.startswith("refused:"), item
        else:
            assert item.pod_api.startswith(("accepted", "refused as a whole", "dropped")), item


@pytest.mark.parametrize("file", [SERVINGS, BOOSTERS])
def test_no_uniqueness_the_pod_api_does_not_enforce(file: str) -> None:
    checked = 0
    for path, list_type in _ours(file).items():
        pod_path = _pod_path(file, path)
        if pod_path is None:
            continue
        checked += 1
        known = lookup(pod_path)
        assert known is not None, f"{path}: {list_type} on a list the Pod API table does not know"
        assert known.enforced, f"{path}: {list_type}, but the Pod API does not enforce it ({known.pod_api})"
        assert (known.list_type, known.keys) == list_type, f"{path}: {list_type} differs from {known}"
    assert checked > 0 or file == BOOSTERS


def test_templates_keep_every_uniqueness_the_pod_api_enforces() -> None:
    ours = _ours(SERVINGS)
    for template in ("entryTemplate", "workerTemplate"):
        for item in POD_LISTS:
            if item.enforced:
                path = f"spec.template.roles[].{template}.spec.{item.path}"
                assert ours.get(path) == (item.list_type, item.keys), path


def test_relax_is_lenient_for_unknown_lists_and_changes_nothing_else() -> None:
    schema = {
        "type": "object",
        "required": ["volumes"],
        "properties": {
            "volumes": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string", "default": ""}}},
            },
            "newList": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "hostAliases": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["ip"],
                "items": {"type": "object", "required": ["ip"], "properties": {"ip": {"type": "string"}}},
            },
            "schedulingGates": {  # known as enforced on name, but the keys differ: not kept
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["other"],
                "items": {"type": "object"},
            },
        },
    }
    before = copy.deepcopy(schema)
    relaxed = relax(schema)
    assert schema == before
    assert list_types(relaxed) == {"volumes": ("map", ("name",))}
    properties = relaxed["properties"]
    assert properties["newList"]["x-kubernetes-list-type"] == "atomic"
    aliases = {key: value for key, value in before["properties"]["hostAliases"].items() if "list" not in key}
    assert properties["hostAliases"] == {**aliases, "x-kubernetes-list-type": "atomic"}
    assert properties["volumes"] == before["properties"]["volumes"] and relaxed["required"] == ["volumes"]
    assert list_types(relax(before["properties"]["volumes"], "containers[].volumeMounts")) == {}


def _differences() -> dict[str, tuple[str, str, str]]:
    """``{documented path: (Kthena's, ours, Pod API)}`` for every pod-part list whose type differs from Kthena's."""
    found: dict[str, tuple[str, str, str]] = {}
    for file in (SERVINGS, BOOSTERS):
        ours, kthena = _ours(file), _kthena(file)
        for path in sorted(set(ours) | set(kthena)):
            pod_path = _pod_path(file, path)
            if pod_path is None or _render(ours.get(path)) == _render(kthena.get(path)):
                continue
            known = lookup(pod_path)
            key = pod_path if file == SERVINGS else path
            row = (_render(kthena.get(path)), _render(ours.get(path)), known.pod_api if known else "unknown")
            assert found.get(key, row) == row, key
            found[key] = row
    return found


def _documented() -> dict[str, tuple[str, str, str]]:
    text = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    section = text.split("\n### Pod template list types\n", 1)[1].split("\n#", 1)[0]
    rows: dict[str, tuple[str, str, str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) != 4:
            continue
        match = re.fullmatch(r"`(?:\{([^}]*)\})?([^`]*)`", cells[0])
        assert match, line
        heads = match.group(1).split(",") if match.group(1) else [""]
        for head in heads:
            rows[f"{head}{match.group(2)}"] = (cells[1], cells[2], cells[3])
    return rows


def test_every_difference_from_kthena_is_documented() -> None:
    differences = _differences()
    assert differences, "expected kthena_py to be more lenient than Kthena somewhere"
    assert _documented() == differences


def _serving_with(spec_changes: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((BASES / "modelserving-role-rolling.yaml").read_text())
    document["spec"]["template"]["roles"][0]["entryTemplate"]["spec"].update(spec_changes)
    return document


def test_validate_accepts_what_the_pod_api_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    aliases = [{"ip": "10.1.2.3", "hostnames": ["a.test", "b.test"]}, {"ip": "10.1.2.3", "hostnames": ["c.test"]}]
    document = _serving_with({"hostAliases": aliases, "imagePullSecrets": [{"name": "r"}, {"name": "r"}]})
    container = document["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]
    container["ports"] = [{"containerPort": 8000}, {"containerPort": 8000}]
    container["env"] = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    booster: dict[str, Any] = yaml.safe_load((BASES / "modelbooster-vllm.yaml").read_text())
    booster["spec"]["backend"]["env"].append(dict(booster["spec"]["backend"]["env"][0], value="other"))
    assert validate_document(document) == [] and validate_document(booster) == []
    path = tmp_path / "lenient.yaml"
    path.write_text(yaml.safe_dump_all([document, booster]))
    assert main(["validate", "-f", str(path)]) == 0
    assert capsys.readouterr().out == ""
