"""Revision hashing, ControllerRevision building/parsing and history pruning."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from kthena_py.plan.modelserving.core.revision import (
    HASH_ALPHABET,
    build_controller_revision,
    parse_controller_revision,
    revision_data,
    revision_hash,
    revisions_to_prune,
    role_template_hash,
    spec_revision_hash,
    stored_revision_hash,
)

from .builders import ms_doc, parse, ref_of, role_doc


def _base() -> dict[str, Any]:
    return ms_doc(role_doc("prefill", replicas=2, workers=1), role_doc("decode", replicas=1))


def _rev(doc: dict[str, Any]) -> str:
    return revision_hash(revision_data(parse(doc).spec))


def _edit(path: str, value: Any) -> dict[str, Any]:
    doc = _base()
    target: Any = doc
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    target[keys[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.replicas", 7),
        ("spec.template.roles.0.replicas", 5),
        ("spec.template.roles.0.maxUnavailable", 3),
        ("spec.template.roles.0.partition", 1),
        ("spec.template.roles.1.maxSurge", "50%"),
        ("spec.template.restartGracePeriodSeconds", 30),
        ("spec.recoveryPolicy", "None"),
        ("spec.template.gangPolicy", {"minRoleReplicas": {"prefill": 1}}),
    ],
)
def test_revision_ignores_what_does_not_shape_pods(path: str, value: Any) -> None:
    assert _rev(_edit(path, value)) == _rev(_base())


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.template.roles.0.entryTemplate", {"spec": {"containers": [{"name": "main", "image": "img:2"}]}}),
        ("spec.template.roles.0.workerReplicas", 2),
        ("spec.template.roles.1.name", "dec"),
        ("spec.schedulerName", "default-scheduler"),
        ("spec.plugins", [{"name": "demo-pod-tweaks", "config": {"runtimeClassName": "nvidia"}}]),
    ],
)
def test_revision_changes_with_pod_shape(path: str, value: Any) -> None:
    assert _rev(_edit(path, value)) != _rev(_base())


def test_revision_is_deterministic_and_well_formed() -> None:
    first, second = _rev(_base()), _rev(copy.deepcopy(_base()))
    assert first == second
    assert len(first) == 10
    assert set(first) <= set(HASH_ALPHABET)


def test_role_hash_changes_only_for_the_changed_role() -> None:
    before = revision_data(parse(_base()).spec)
    after = revision_data(parse(_edit("spec.template.roles.1.entryTemplate", {"spec": {"containers": []}})).spec)
    assert role_template_hash(before, before.roles[0]) == role_template_hash(after, after.roles[0])
    assert role_template_hash(before, before.roles[1]) != role_template_hash(after, after.roles[1])


def test_role_hash_covers_only_plugins_in_scope() -> None:
    scoped = _edit(
        "spec.plugins", [{"name": "pod-tweaks", "config": {"labels": {"a": "b"}}, "scope": {"roles": ["decode"]}}]
    )
    before, after = revision_data(parse(_base()).spec), revision_data(parse(scoped).spec)
    assert role_template_hash(before, before.roles[0]) == role_template_hash(after, after.roles[0])
    assert role_template_hash(before, before.roles[1]) != role_template_hash(after, after.roles[1])


def test_controller_revision_round_trip() -> None:
    ms = parse(_edit("spec.plugins", [{"name": "pod-tweaks", "config": {"labels": {"a": "b"}}}]))
    data = revision_data(ms.spec)
    rev = revision_hash(data)
    existing = [{"metadata": {"name": "llama-old"}, "revision": 4}, {"metadata": {"name": "x"}, "revision": True}]
    obj = build_controller_revision(ref_of(ms), data, rev, existing)
    assert obj["apiVersion"] == "apps/v1" and obj["kind"] == "ControllerRevision"
    assert obj["metadata"]["name"] == f"llama-{rev}"
    assert obj["metadata"]["labels"] == {
        "modelserving.volcano.sh/name": "llama",
        "modelserving.volcano.sh/revision": rev,
    }
    assert obj["metadata"]["ownerReferences"][0]["controller"] is True
    assert obj["revision"] == 5
    parsed = parse_controller_revision(obj, "ignored")
    assert parsed is not None
    assert revision_hash(parsed) == rev
    assert [r.replicas for r in parsed.roles] == [2, 1]


def test_parse_kthena_bare_array_and_garbage() -> None:
    roles = [role_doc("a")]
    parsed = parse_controller_revision({"data": roles}, "volcano")
    assert parsed is not None and parsed.scheduler_name == "volcano" and parsed.roles[0].name == "a"
    assert parse_controller_revision({"data": {"data": [{"bogus": 1}]}}, "volcano") is None
    assert parse_controller_revision({"data": "nope"}, "volcano") is None
    assert parse_controller_revision({}, "volcano") is None


def test_a_stored_revision_is_parsed_once_while_its_data_is_unchanged() -> None:
    ms = parse(_base())
    data = revision_data(ms.spec)
    obj = build_controller_revision(ref_of(ms), data, revision_hash(data), [])
    obj["metadata"] |= {"uid": "rev-uid-1", "resourceVersion": "7"}
    first = parse_controller_revision(obj, "volcano")
    assert first is not None and first == data
    assert parse_controller_revision(copy.deepcopy(obj), "volcano") is first  # same uid, equal data: same object
    assert stored_revision_hash(first) == revision_hash(data)
    assert stored_revision_hash(first, 3) == revision_hash(data, 3) != stored_revision_hash(first)
    # other data under the same uid and resourceVersion (a test's in-memory store), or another default scheduler, is
    # parsed from its own content
    edited = copy.deepcopy(obj)
    edited["data"]["data"][0]["workerReplicas"] = 7
    again = parse_controller_revision(edited, "volcano")
    assert again is not None and again is not first and again.roles[0].worker_replicas == 7
    assert parse_controller_revision(obj, "other") is not first
    # without a uid (an object not from the API server) nothing is memoised
    bare = {"data": obj["data"]}
    assert parse_controller_revision(bare, "volcano") == first
    assert parse_controller_revision(bare, "volcano") is not parse_controller_revision(bare, "volcano")


def test_prune_keeps_live_and_newest() -> None:
    objs = [{"metadata": {"name": f"ms-r{i}"}, "revision": i} for i in range(1, 7)]
    pruned = revisions_to_prune(objs, {"r6", "r1"}, "ms", history_limit=2)
    assert [o["metadata"]["name"] for o in pruned] == ["ms-r2", "ms-r3"]
    assert revisions_to_prune(objs, set(), "ms", history_limit=10) == []
    assert len(revisions_to_prune(objs, {"r3"}, "ms", history_limit=0)) == 5


def test_spec_revision_hash_is_the_revision_hash_once_per_spec_object() -> None:
    spec = parse(_base()).spec
    assert spec_revision_hash(spec) == revision_hash(revision_data(spec))
    assert spec_revision_hash(spec, 2) == revision_hash(revision_data(spec), 2) != spec_revision_hash(spec)
    assert spec_revision_hash(spec) is spec_revision_hash(spec)  # the memo's own string: not computed again
    changed = parse(_edit("spec.template.roles.0.replicas", 5)).spec  # another spec object, another content
    other = parse(_edit("spec.template.roles.0.entryTemplate.spec.containers.0.image", "img:2")).spec
    assert spec_revision_hash(changed) == revision_hash(revision_data(changed))
    assert spec_revision_hash(other) == revision_hash(revision_data(other)) != spec_revision_hash(spec)


def test_role_template_hash_is_computed_once_per_role_and_plugins_and_follows_each_of_them() -> None:
    plain = revision_data(parse(_base()).spec)
    role = plain.roles[0]
    first = role_template_hash(plain, role)
    assert role_template_hash(plain, role) is first  # the memo's own string
    # The same role object with plugins in scope, or another scheduler, is another hash (never a stale hit).
    with_plugin = revision_data(
        parse(_edit("spec.plugins", [{"name": "pod-tweaks", "config": {"labels": {"a": "b"}}}])).spec
    )
    assert role_template_hash(replace(with_plugin, roles=(role,)), role) != first
    assert role_template_hash(replace(plain, scheduler_name="other"), role) != first
    assert role_template_hash(plain, role) == first
    # An equal role built anew hashes the same.
    again = revision_data(parse(_base()).spec)
    assert again.roles[0] is not role and role_template_hash(again, again.roles[0]) == first
