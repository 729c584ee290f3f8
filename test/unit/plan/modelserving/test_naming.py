"""Names, labels and ordinal parsing (kthena_py.plan.modelserving.core.naming)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.types import MSRef, PodGroupSupport


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (naming.group_name("llama", 0), "llama-0"),
        (naming.role_id("prefill", 1), "prefill-1"),
        (naming.pod_name("llama", 0, "prefill", 1, 2), "llama-0-prefill-1-2"),
        (naming.service_name("llama", 3, "decode", 0), "llama-3-decode-0-0"),
        (naming.podgroup_name("llama", 2), "llama-2"),
        (naming.revision_name("llama", "abc"), "llama-abc"),
        (naming.entry_address("llama", "ns", 1, "p", 2), "llama-1-p-2-0.ns"),
    ],
)
def test_name_builders(built: str, expected: str) -> None:
    assert built == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llama-0", ("llama", 0)),
        ("llama-0-prefill-1", ("llama-0-prefill", 1)),
        ("my-model-12", ("my-model", 12)),
        ("llama", None),
        ("llama-", None),
        ("llama-x1", None),
        ("-7", ("", 7)),
    ],
)
def test_parse_ordinal(name: str, expected: tuple[str, int] | None) -> None:
    assert naming.parse_ordinal(name) == expected


@pytest.mark.parametrize(
    ("ms", "name", "expected"),
    [
        ("llama", "llama-3", 3),
        ("llama", "llama-03", None),  # not a name we generate
        ("llama", "other-3", None),
        ("my-ms-1", "my-ms-1-0", 0),
    ],
)
def test_parse_group_name(ms: str, name: str, expected: int | None) -> None:
    assert naming.parse_group_name(ms, name) == expected


def test_parse_role_id() -> None:
    assert naming.parse_role_id("prefill", "prefill-2") == 2
    assert naming.parse_role_id("prefill", "decode-2") is None


def test_label_constants_are_kthenas() -> None:
    assert naming.LABEL_NAME == "modelserving.volcano.sh/name"
    assert naming.LABEL_GROUP_NAME == "modelserving.volcano.sh/group-name"
    assert naming.LABEL_ROLE == "modelserving.volcano.sh/role"
    assert naming.LABEL_ROLE_ID == "modelserving.volcano.sh/role-id"
    assert naming.LABEL_REVISION == "modelserving.volcano.sh/revision"
    assert naming.LABEL_ROLE_TEMPLATE_HASH == "modelserving.volcano.sh/role-template-hash"
    assert naming.LABEL_ENTRY == "modelserving.volcano.sh/entry"
    assert naming.ANNOTATION_PODGROUP == "scheduling.k8s.io/group-name"
    assert naming.ANNOTATION_TASK_SPEC == "volcano.sh/task-spec"
    assert naming.ANNOTATION_QUEUE == "scheduling.volcano.sh/queue-name"
    assert naming.ANNOTATION_DELETION_COST == "controller.kubernetes.io/pod-deletion-cost"


def test_owner_reference() -> None:
    ref = MSRef("llama", "ns", "u1")
    assert naming.owner_reference(ref) == {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "name": "llama",
        "uid": "u1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert "blockOwnerDeletion" not in naming.owner_reference(ref, block_owner_deletion=False)


@pytest.mark.parametrize(
    ("scheduler", "support", "expected"),
    [
        ("volcano", PodGroupSupport(crd_served=True), True),
        ("volcano", PodGroupSupport(), False),
        ("default-scheduler", PodGroupSupport(crd_served=True), False),
    ],
)
def test_gang_applies(scheduler: str, support: PodGroupSupport, expected: bool) -> None:
    assert naming.gang_applies(scheduler, support) is expected


_NAME = st.from_regex(r"[a-z]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True)


@settings(max_examples=150, deadline=None, database=None)
@given(ms=_NAME, role=_NAME, group=st.integers(0, 999), ordinal=st.integers(0, 99), index=st.integers(0, 99))
def test_builders_and_parsers_round_trip(ms: str, role: str, group: int, ordinal: int, index: int) -> None:
    pod = naming.pod_name(ms, group, role, ordinal, index)
    prefix, parsed_index = naming.parse_ordinal(pod) or ("", -1)
    assert parsed_index == index
    assert naming.parse_group_name(ms, naming.group_name(ms, group)) == group
    assert naming.parse_role_id(role, naming.role_id(role, ordinal)) == ordinal
    assert prefix == f"{naming.group_name(ms, group)}-{naming.role_id(role, ordinal)}"
