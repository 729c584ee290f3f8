from __future__ import annotations

import pytest

from kthena_py.api import IntOrString, ModelServing, Quantity
from kthena_py.api.validation import (
    OMITTED,
    ErrorType,
    FieldError,
    aggregate_message,
    duplicate,
    forbidden,
    invalid,
    loc_to_path,
    not_found,
    not_supported,
    required,
    too_long,
    too_many,
)


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (
            duplicate("spec.template.roles[1].name", "prefill"),
            'spec.template.roles[1].name: Duplicate value: "prefill"',
        ),
        (
            invalid("spec.replicas", -1, "must be greater than or equal to 0"),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        ),
        (required("spec.template"), "spec.template: Required value"),
        (required("x", "x is required"), "x: Required value: x is required"),
        (forbidden("a.b", "not here"), "a.b: Forbidden: not here"),
        (not_found("a[0]", "r"), 'a[0]: Not found: "r"'),
        (not_supported("p", "X", ["A", "B"]), 'p: Unsupported value: "X": supported values: "A", "B"'),
        (too_long("n", 12), "n: Too long: may not be more than 12 bytes"),
        (too_long("n", 1), "n: Too long: may not be more than 1 byte"),
        (too_many("r", 5, 4), "r: Too many: 5: must have at most 4 items"),
        (invalid("q", Quantity("1.5Gi"), "bad"), "q: Invalid value: 1.5Gi: bad"),
        (invalid("m", IntOrString("10%"), "bad"), 'm: Invalid value: "10%": bad'),
        (invalid("m", IntOrString(3), "bad"), "m: Invalid value: 3: bad"),
        (invalid("b", True, "bad"), "b: Invalid value: true: bad"),
        (invalid("n", None, "bad"), "n: Invalid value: null: bad"),
        (invalid("l", ["a", "b"], "bad"), 'l: Invalid value: ["a","b"]: bad'),
        (invalid("s", 'naïve "q"', "bad"), 's: Invalid value: "naïve \\"q\\"": bad'),
        (invalid("o", OMITTED, "field is immutable"), "o: Invalid value: field is immutable"),
    ],
)
def test_rendering(error: FieldError, text: str) -> None:
    assert str(error) == text


def test_error_fields_and_prefix() -> None:
    error = invalid("spec.x", 1, "bad")
    assert (error.path, error.type, error.message, error.value) == ("spec.x", "Invalid", "bad", 1)
    assert error.type is ErrorType.INVALID
    assert error.with_prefix("items[2]").path == "items[2].spec.x"


def test_aggregate_message() -> None:
    errors = [required("a"), forbidden("b", "no")]
    assert aggregate_message(errors) == "validation failed:\n  - a: Required value\n  - b: Forbidden: no"


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("spec", "template", "roles", 0, "name"), "spec.template.roles[0].name"),
        (
            ("spec", "template", "gangPolicy", "minRoleReplicas", "prefill"),
            "spec.template.gangPolicy.minRoleReplicas[prefill]",
        ),
        (
            ("spec", "template", "gangPolicy", "minRoleReplicas", 3, "[key]"),
            "spec.template.gangPolicy.minRoleReplicas[3]",
        ),
        (
            ("spec", "template", "roles", 1, "entryTemplate", "spec", "containers", 0),
            "spec.template.roles[1].entryTemplate.spec.containers[0]",
        ),
        (("spec", "unknownField", "deeper"), "spec.unknownField.deeper"),
    ],
)
def test_loc_to_path(loc: tuple[int | str, ...], path: str) -> None:
    assert loc_to_path(ModelServing, loc) == path
