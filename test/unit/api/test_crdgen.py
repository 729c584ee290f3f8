"""CRD generation: the committed files are up to date, complete, structural, and carry every seed rule."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from kthena_py.api import AutoscalingPolicy, ModelBooster, ModelServing
from kthena_py.api.crdgen import KIND_SPECS, build_crds, render_api_docs
from kthena_py.api.crdgen.descriptions import field_description, type_description
from kthena_py.api.crdgen.openapi import QUANTITY_PATTERN, inline_schema
from kthena_py.api.crdgen.schema import field_schema, kind_schema, model_fields, reachable_models
from kthena_py.api.modelcache import ModelCache
from kthena_py.api.modelpool import ModelPool
from kthena_py.cli.crds import expected_files
from kthena_py.vocab.conditions import SCHEDULED
from kthena_py.vocab.labels import ACTIVATOR_STATE

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT.parent / "shared" / "seeds" / "000_70b6a46a3d8abcc9.txt"
KINDS = (ModelServing, AutoscalingPolicy, ModelBooster, ModelCache, ModelPool)
MODELS = {model.__name__: model for kind in KINDS for model in reachable_models(kind)}


def test_committed_crds_and_api_docs_are_up_to_date() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, content in expected_files(
            ROOT / "manifests" / "crd", ROOT / "docs" / "api.md", ROOT / "charts" / "kthena-py" / "crds"
        ).items()
        if not path.exists() or path.read_text(encoding="utf-8") != content
    ]
    assert not stale, f"out of date: {stale}; run hack/gen-crds.sh (kthena-py crds --api-docs docs/api.md)"


def test_generation_is_deterministic_and_names_follow_the_convention() -> None:
    first, second = build_crds(), build_crds()
    assert first == second
    assert sorted(first) == sorted(
        [
            *(
                f"workload.serving.volcano.sh_{plural}.yaml"
                for plural in ("modelservings", "autoscalingpolicies", "modelboosters")
            ),
            "serving.kthena-py.io_modelcaches.yaml",
            "serving.kthena-py.io_modelpools.yaml",
        ]
    )
    for name, crd in first.items():
        assert name == f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"
    kustomization = yaml.safe_load((ROOT / "manifests" / "crd" / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(first)


def _walk(schema: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, schema)] if isinstance(schema, dict) else []
    if not isinstance(schema, dict):
        return found
    for name, child in (schema.get("properties") or {}).items():
        found += _walk(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += _walk(schema[key], f"{path}[]")
    for key in ("anyOf", "allOf", "oneOf"):
        for child in schema.get(key) or []:
            found += _walk(child, path)
    return found


@pytest.mark.parametrize("spec", KIND_SPECS, ids=[spec.kind for spec in KIND_SPECS])
def test_schema_is_structural(spec: Any) -> None:
    crd = build_crds()[f"{spec.group}_{spec.plural}.yaml"]
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["required"] == ["spec"]
    for path, node in _walk(schema):
        assert "$ref" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        elif "anyOf" not in node and path:
            assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
    assert version["subresources"]["status"] == {}
    assert any(column["name"] == "Age" for column in version["additionalPrinterColumns"])
    assert crd["spec"]["names"]["shortNames"] and crd["spec"]["names"]["categories"] == ["kthena"]


def test_modelserving_scale_subresource_columns_and_pod_schema() -> None:
    crd = build_crds()["workload.serving.volcano.sh_modelservings.yaml"]
    (version,) = crd["spec"]["versions"]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector",
    }
    assert [column["name"] for column in version["additionalPrinterColumns"][:4]] == [
        "Replicas",
        "Available",
        "Updated",
        "Placement",
    ]
    placement = version["additionalPrinterColumns"][3]
    assert placement["jsonPath"] == '.status.conditions[?(@.type=="' + SCHEDULED + '")].reason'
    assert "priority" not in placement  # shown by a plain `kubectl get ms`
    activator = version["additionalPrinterColumns"][4]
    assert activator["name"] == "Activator" and "priority" not in activator
    assert activator["jsonPath"] == ".metadata.annotations." + ACTIVATOR_STATE.replace(".", "\\.")
    assert activator["jsonPath"] == r".metadata.annotations.activator\.kthena-py\.io/state"
    role = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["template"]["properties"]["roles"]
    for template in ("entryTemplate", "workerTemplate"):
        pod = role["items"]["properties"][template]["properties"]["spec"]
        assert pod["required"] == ["containers"]
        container = pod["properties"]["containers"]["items"]
        assert {"image", "resources", "ports", "env", "livenessProbe"} <= set(container["properties"])
        assert container["properties"]["ports"]["items"]["properties"]["protocol"]["default"] == "TCP"
        limits = container["properties"]["resources"]["properties"]["limits"]["additionalProperties"]
        assert limits["pattern"] == QUANTITY_PATTERN and limits["x-kubernetes-int-or-string"]
        text = json.dumps(pod)
        assert "x-kubernetes-preserve-unknown-fields" not in text
        assert '"enum"' not in text and "x-kubernetes-patch" not in text
    rules = [rule["rule"] for rule in role.get("x-kubernetes-validations", [])]
    assert rules == ["self.all(x, self.exists_one(y, y.name == x.name))"]


def test_every_model_field_is_in_the_schema_with_a_description() -> None:
    undocumented = []
    for spec in KIND_SPECS:
        for model in reachable_models(spec.model):
            if not type_description(model.__name__):
                undocumented.append(model.__name__)
            for json_name, info in model_fields(model):
                schema = field_schema(model, json_name, info)
                if json_name not in ("apiVersion", "kind", "metadata", "spec", "status") and not (
                    schema.get("description") and field_description(model.__name__, json_name)
                ):
                    undocumented.append(f"{model.__name__}.{json_name}")
    assert undocumented == []
    schema = kind_schema(ModelServing)
    assert "spec" in schema["properties"] and "status" in schema["properties"]


def test_api_docs_document_every_field() -> None:
    text = render_api_docs()
    for name, model in MODELS.items():
        assert f"### {name}\n" in text
        for json_name, _ in model_fields(model):
            assert f"| `{json_name}` |" in text, f"{name}.{json_name}"


def test_cel_messages_follow_the_validators() -> None:
    text = json.dumps(build_crds())
    for message in (
        "roles name must be unique",
        "gangPolicy is required once set",
        "minRoleReplicas is required once set",
        "workerTemplate is required when workerReplicas is greater than 0",
        "at most one of homogeneousTarget, heterogeneousTarget, or disaggregatedTarget may be set",
        "roles must contain at least two entries when ratioConstraint is configured",
        "numeratorRole and denominatorRole must differ",
        "one metric source backend config is required",
        "pod and prometheus configs are mutually exclusive",
        "role names are immutable; existing role names are [",
        "minRoleReplicas is immutable",
    ):
        assert message in text


# -- the seed: every default, enum, bound, pattern and length is in the CRDs ------------------------------

_TOKENS = re.compile(
    r"(Enum: \[[^\]]*\]|Maximum: \S+|Minimum: \S+|MaxLength: \d+|MinLength: \d+|MaxItems: \d+|MinItems: \d+|"
    r"MaxProperties: \d+|MinProperties: \d+|Pattern: \S+|Format: \S+|XIntOrString: \{\})"
)


def _seed_rows() -> list[tuple[str, str, str | None, list[str]]]:
    """(type, field, default, validation tokens) of every field row of the seed that has any."""
    lines = SEED.read_text(encoding="utf-8").splitlines()
    rows: list[tuple[str, str, str | None, list[str]]] = []
    current = ""
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if re.fullmatch(r"[A-Z][A-Za-z0-9]*", line.strip()) and following and not following.startswith("|"):
            current = line.strip()
            continue
        cells = line.split(" | ")
        head = cells[0].split(" ", 1)
        if len(cells) < 2 or len(head) != 2 or not re.fullmatch(r"[a-z][A-Za-z]*|serverURL|modelURI|cacheURI", head[0]):
            continue
        rest = [cell.strip().strip("|").strip() for cell in cells[1:]]
        # A cell is a validation cell when it holds nothing but tokens; the description is never one.
        validation = [cell for cell in rest if cell and not _TOKENS.sub("", cell).strip()]
        tokens = [token for cell in validation for token in _TOKENS.findall(cell)]
        defaults = [cell for cell in rest[1:] if cell and cell not in validation]
        if tokens or defaults:
            rows.append((current, head[0], defaults[0] if defaults else None, tokens))
    return rows


def _number(text: str) -> float:
    return float(text)


@pytest.mark.skipif(not SEED.exists(), reason="the seed API reference (../shared/seeds) is not available")
def test_every_seed_default_and_validation_is_in_the_crds() -> None:
    rows = _seed_rows()
    assert len(rows) >= 40
    problems = []
    for type_name, json_name, default, tokens in rows:
        model: type[BaseModel] | None = MODELS.get(type_name)
        if model is None:
            problems.append(f"{type_name}: no model")
            continue
        info = dict(model_fields(model)).get(json_name)
        if info is None:
            problems.append(f"{type_name}.{json_name}: no field")
            continue
        schema = field_schema(model, json_name, info)
        if default is not None and str(schema.get("default")) != default:
            problems.append(f"{type_name}.{json_name}: default {schema.get('default')!r} != {default!r}")
        for token in tokens:
            key, _, value = token.partition(": ")
            if key == "Enum":
                ok = schema.get("enum") == value.strip("[]").split()
            elif key in ("Maximum", "Minimum"):
                ok = _number(str(schema.get(key.lower()))) == _number(value)
            elif key == "Pattern":
                ok = schema.get("pattern") == value
            elif key == "Format":
                ok = schema.get("format") == value
            elif key == "XIntOrString":
                ok = schema.get("x-kubernetes-int-or-string") is True
            else:
                ok = schema.get(key[0].lower() + key[1:]) == int(value)
            if not ok:
                problems.append(f"{type_name}.{json_name}: {token} not in {schema}")
    assert problems == []


@pytest.mark.skipif(not SEED.exists(), reason="the seed API reference (../shared/seeds) is not available")
def test_every_seed_type_and_field_is_modelled() -> None:
    fields: dict[str, list[str]] = json.loads(
        (ROOT / "kthena_py" / "api" / "crdgen" / "data" / "descriptions.json").read_text()
    )["fields"]
    missing = []
    for type_name, names in fields.items():
        if type_name.endswith("List"):
            continue
        model = MODELS.get(type_name)
        if model is None:
            missing.append(type_name)
            continue
        have = {json_name for json_name, _ in model_fields(model)}
        missing += [f"{type_name}.{name}" for name in names if name not in have]
    assert missing == []


# -- the OpenAPI inliner ----------------------------------------------------------------------------------


def test_inliner_resolves_refs_and_cleans_up() -> None:
    components = {
        "A": {
            "type": "object",
            "description": "A type",
            "required": ["items"],
            "properties": {
                "b": {"description": "the b", "default": {}, "allOf": [{"$ref": "#/components/schemas/B"}]},
                "q": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"},
                "n": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
                "items": {
                    "type": "array",
                    "items": {"default": {}, "allOf": [{"$ref": "#/components/schemas/Item"}]},
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "x-kubernetes-patch-strategy": "merge",
                },
            },
        },
        "B": {"type": "string", "description": "B type", "enum": ["x"], "default": "", "format": "weird"},
        "Item": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "default": ""},
                "protocol": {"type": "string", "default": ""},
                "port": {"type": "integer", "format": "int32", "default": 0},
                "mode": {"type": "string", "default": "TCP"},
            },
        },
    }
    schema = inline_schema(components, "A")
    assert schema["properties"]["b"] == {"type": "string", "description": "the b"}
    assert schema["properties"]["q"]["pattern"] == QUANTITY_PATTERN
    assert schema["properties"]["n"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    item = schema["properties"]["items"]["items"]
    assert "default" not in item and "x-kubernetes-patch-strategy" not in schema["properties"]["items"]
    assert "default" not in item["properties"]["name"]  # required: its zero default goes
    assert item["properties"]["protocol"]["default"] == ""  # a non-required list-map key keeps it
    assert "default" not in item["properties"]["port"] and item["properties"]["mode"]["default"] == "TCP"
    with pytest.raises(ValueError, match="recursive"):
        inline_schema({"R": {"type": "object", "properties": {"r": {"$ref": "#/components/schemas/R"}}}}, "R")
    with pytest.raises(ValueError, match="unknown"):
        inline_schema(components, "Missing")


def test_compatibility_doc_lists_every_difference() -> None:
    from kthena_py.api.differences import DIFFERENCES

    text = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    assert "\n## API and validation\n" in text
    missing = [difference.key for difference in DIFFERENCES if f"**`{difference.key}`**" not in text]
    assert missing == [], "add these DIFFERENCES entries to docs/compatibility.md"


def _descriptions(schema: Any, path: str = "") -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(schema, dict):
        if isinstance(schema.get("description"), str):
            found.append((path, schema["description"]))
        for key, value in schema.items():
            found.extend(_descriptions(value, f"{path}.{key}"))
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            found.extend(_descriptions(value, f"{path}[{index}]"))
    return found


def test_descriptions_hold_no_code_generator_marker_text() -> None:
    from kthena_py.api.crdgen.descriptions import MARKER, clean

    assert clean("Roles. MaxItems: 4 MinItems: 1") == "Roles."
    assert clean("All. kubebuilder:default=All kubebuilder:validation:Enum={All,Entry,Worker}") == "All."
    leaked = [
        (crd["spec"]["names"]["kind"], path, text)
        for crd in build_crds().values()
        for path, text in _descriptions(crd["spec"]["versions"][0]["schema"])
        if MARKER.search(text)
    ]
    assert leaked == []
    assert field_description("ServingGroup", "roles").startswith("Roles are the roles")


def test_autoscalingpolicy_printer_columns_show_target_replicas_and_mode() -> None:
    crd = next(c for c in build_crds().values() if c["spec"]["names"]["kind"] == "AutoscalingPolicy")
    columns = {c["name"]: c for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert list(columns) == ["Target", "Current", "Desired", "Mode", "Tolerance", "Age"]
    assert columns["Tolerance"].get("priority") == 1
