"""Validator behaviour that the invalid corpus does not show: what is accepted, and the pipeline."""

from __future__ import annotations

from typing import Any

from kthena_py.api import ModelServing
from kthena_py.api.validation import parse_model, validate_document, validate_modelserving

from .corpus import apply_patch, load_base


def _errors(base: str, patch: list[dict[str, Any]], old_patch: list[dict[str, Any]] | None = None) -> list[str]:
    document = load_base(base)
    old = apply_patch(document, old_patch) if old_patch is not None else None
    return [str(error) for error in validate_document(apply_patch(document, patch), old=old)]


def test_role_scaled_to_zero_under_role_rolling_update_is_accepted() -> None:
    # Kthena MAIN rejects this (maxUnavailable 1 > replicas 0), which breaks scale-to-zero autoscaling.
    patch = [
        {"op": "replace", "path": "/spec/template/roles/1/replicas", "value": 0},
        {"op": "replace", "path": "/spec/rolloutStrategy/evictionStrategy/roleMinAvailable/decode", "value": 0},
    ]
    assert _errors("modelserving-role-rolling", patch) == []


def test_max_unavailable_zero_with_surge_is_accepted() -> None:
    patch = [{"op": "replace", "path": "/spec/rolloutStrategy/rollingUpdateConfiguration/maxUnavailable", "value": 0}]
    assert _errors("modelserving-pd", patch) == []


def test_budget_is_not_checked_when_everything_is_partitioned() -> None:
    patch = [
        {"op": "replace", "path": "/spec/rolloutStrategy/rollingUpdateConfiguration/maxUnavailable", "value": 0},
        {"op": "remove", "path": "/spec/rolloutStrategy/rollingUpdateConfiguration/maxSurge"},
        {"op": "replace", "path": "/spec/rolloutStrategy/rollingUpdateConfiguration/partition", "value": "100%"},
    ]
    assert _errors("modelserving-pd", patch) == []


def test_role_max_unavailable_is_ignored_under_group_rolling_update() -> None:
    patch = [{"op": "replace", "path": "/spec/template/roles/0/maxUnavailable", "value": 10}]
    assert _errors("modelserving-pd", patch) == []


def test_min_role_replicas_are_immutable_but_other_gang_updates_pass() -> None:
    patch = [{"op": "replace", "path": "/spec/template/gangPolicy/minRoleReplicas/prefill", "value": 2}]
    (error,) = _errors("modelserving-pd", patch, old_patch=[])
    assert error.startswith("spec.template.gangPolicy.minRoleReplicas: ")
    assert error.endswith("minRoleReplicas is immutable")
    scale = [{"op": "replace", "path": "/spec/replicas", "value": 5}]
    assert _errors("modelserving-pd", scale, old_patch=[]) == []


def test_roles_may_be_reordered_and_scaled_on_update() -> None:
    document = load_base("modelserving-pd")
    roles = document["spec"]["template"]["roles"]
    patch = [
        {"op": "replace", "path": "/spec/template/roles", "value": [roles[1], roles[0]]},
        {"op": "replace", "path": "/spec/template/roles/0/replicas", "value": 3},
    ]
    assert _errors("modelserving-pd", patch, old_patch=[]) == []


def test_adding_min_role_replicas_on_update_is_accepted() -> None:
    old_patch = [{"op": "replace", "path": "/spec/template/gangPolicy", "value": {}}]
    assert _errors("modelserving-pd", [], old_patch=old_patch) == []


def test_coordinated_update_with_spare_capacity_is_accepted() -> None:
    new_image = "lmsysorg/sglang:v0.5.1"
    patch = [
        {"op": "replace", "path": "/spec/template/roles/0/entryTemplate/spec/containers/0/image", "value": new_image},
        {"op": "replace", "path": "/spec/template/roles/1/entryTemplate/spec/containers/0/image", "value": new_image},
    ]
    assert _errors("modelserving-role-rolling", patch, old_patch=[]) == []


def test_dependency_shrink_is_accepted_once_rollout_is_observed_complete() -> None:
    status = {
        "observedGeneration": 3,
        "conditions": [
            {
                "type": "CoordinatedRoleRolloutBlocked",
                "status": "False",
                "reason": "RolloutComplete",
                "message": "",
                "lastTransitionTime": "2026-08-21T00:00:00Z",
            }
        ],
    }
    patch = [
        {"op": "replace", "path": "/spec/template/roles/1/replicas", "value": 1},
        {"op": "replace", "path": "/spec/template/roles/1/maxUnavailable", "value": 1},
    ]
    assert (
        _errors("modelserving-role-rolling", patch, old_patch=[{"op": "add", "path": "/status", "value": status}]) == []
    )


def test_schema_errors_short_circuit_semantic_rules() -> None:
    patch = [
        {"op": "replace", "path": "/spec/replicas", "value": "4"},
        {"op": "replace", "path": "/spec/template/roles/1/name", "value": "prefill"},
    ]
    errors = _errors("modelserving-pd", patch)
    assert errors == ['spec.replicas: Invalid value: "4": spec.replicas in body must be of type integer: "string"']


def test_schema_reports_every_error() -> None:
    patch = [
        {"op": "replace", "path": "/spec/recoveryPolicy", "value": "Never"},
        {"op": "replace", "path": "/spec/revisionHistoryLimit", "value": -1},
    ]
    paths = {error.split(":")[0] for error in _errors("modelserving-pd", patch)}
    assert paths == {"spec.recoveryPolicy", "spec.revisionHistoryLimit"}


def test_unknown_fields_anywhere_are_reported_alone_as_strict_decoding_does() -> None:
    patch = [
        {"op": "replace", "path": "/spec/recoveryPolicy", "value": "Never"},
        {"op": "add", "path": "/spec/extra", "value": 1},
        {"op": "add", "path": "/spec/template/roles/0/entryTemplate/spec/containers/0/imagePullPolice", "value": "x"},
        {"op": "add", "path": "/spec/template/roles/0/entryTemplate/spec/securityContext", "value": {"runAsUsr": 1}},
        {"op": "add", "path": "/metadata/labelz", "value": {}},
    ]
    errors = _errors("modelserving-pd", patch)
    prefix = "spec.template.roles[0].entryTemplate.spec"
    assert sorted(errors) == sorted(
        f'{path}: Forbidden: unknown field "{path}"'
        for path in (
            "metadata.labelz",
            "spec.extra",
            f"{prefix}.containers[0].imagePullPolice",
            f"{prefix}.securityContext.runAsUsr",
        )
    )


def test_known_pod_fields_and_open_maps_are_not_unknown() -> None:
    patch = [
        {"op": "add", "path": "/spec/template/roles/0/entryTemplate/spec/containers/0/imagePullPolicy", "value": "x"},
        {"op": "add", "path": "/spec/template/roles/0/entryTemplate/spec/nodeSelector", "value": {"any-key": "v"}},
        {"op": "add", "path": "/spec/template/roles/0/entryTemplate/metadata/annotations", "value": {"a/b": "c"}},
    ]
    assert _errors("modelserving-pd", patch) == []


def test_list_documents_are_validated_item_by_item() -> None:
    good = load_base("modelserving-pd")
    bad = apply_patch(good, [{"op": "replace", "path": "/spec/replicas", "value": -1}])
    listing = {"apiVersion": good["apiVersion"], "kind": "ModelServingList", "items": [good, bad]}
    errors = [str(error) for error in validate_document(listing)]
    assert errors == ["items[1].spec.replicas: Invalid value: -1: replicas must be a non-negative integer"]


def test_old_object_schema_errors_are_prefixed() -> None:
    document = load_base("modelserving-pd")
    old = apply_patch(document, [{"op": "remove", "path": "/spec/template"}])
    assert [str(error) for error in validate_document(document, old=old)] == ["oldObject.spec.template: Required value"]


def test_non_object_documents() -> None:
    assert [str(error) for error in validate_document(["x"])] == [
        ': Invalid value: "list": a manifest must be a JSON object'
    ]
    assert [str(error) for error in validate_document({"kind": "ModelServing"})] == ["apiVersion: Required value"]


def test_semantic_validators_take_parsed_models() -> None:
    obj, errors = parse_model(ModelServing, load_base("modelserving-pd"))
    assert obj is not None and errors == []
    scaled = obj.model_copy(update={"spec": obj.spec.model_copy(update={"replicas": -3})})
    assert [str(error) for error in validate_modelserving(scaled, old=obj)] == [
        "spec.replicas: Invalid value: -3: replicas must be a non-negative integer"
    ]


def test_an_invalid_role_name_is_the_first_error_and_not_also_a_metadata_name_error() -> None:
    patch = [
        {"op": "remove", "path": "/spec/template/gangPolicy"},
        {"op": "replace", "path": "/spec/template/roles/1/name", "value": "Decode"},
    ]
    errors = _errors("modelserving-pd", patch)
    assert len(errors) == 1
    assert errors[0].startswith('spec.template.roles[1].name: Invalid value: "Decode": role name must be a valid')


def test_a_generated_name_too_long_is_still_reported_beside_an_invalid_role_name() -> None:
    patch = [
        {"op": "remove", "path": "/spec/template/gangPolicy"},
        {"op": "replace", "path": "/metadata/name", "value": "a" * 50},
        {"op": "replace", "path": "/spec/template/roles/1/name", "value": "Decode"},
    ]
    errors = _errors("modelserving-pd", patch)
    assert [error.split(":")[0] for error in errors] == ["spec.template.roles[1].name", "metadata.name"]
    assert "must be no more than 63 characters" in errors[1]
