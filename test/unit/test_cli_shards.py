"""``kthena-py shards``: the lease group's members and each namespace's owner, from the Leases as stored."""

from __future__ import annotations

import json

from kthena_py.cli.shards import build_view, render_text
from kthena_py.main import build_parser
from kthena_py.runtime.shards.cuts import plan_cuts, slot_at
from kthena_py.runtime.shards.cutstate import CutState, encode_cuts
from kthena_py.runtime.shards.hashing import fnv1a64, namespace_slot
from kthena_py.runtime.shards.member import CUTS_ANNOTATION, GROUP_LABEL, ROLE_LABEL, SLOT_MAP_ANNOTATION


def _member(holder: str) -> dict[str, object]:
    return {
        "metadata": {"labels": {GROUP_LABEL: "g", ROLE_LABEL: "member"}},
        "spec": {"holderIdentity": holder, "renewTime": "2026-12-03T00:00:00.000000Z"},
    }


def _slots(slot_map: dict[int, str]) -> dict[str, object]:
    annotation = json.dumps({str(k): v for k, v in slot_map.items()})
    return {
        "metadata": {
            "labels": {GROUP_LABEL: "g", ROLE_LABEL: "slots"},
            "annotations": {SLOT_MAP_ANNOTATION: annotation},
        }
    }


def test_each_namespace_is_shown_with_the_member_its_slot_is_mapped_to() -> None:
    namespaces = [f"team-{i}" for i in range(12)]
    slot_map = {s: ("a@1" if s % 2 == 0 else "b@1") for s in range(64) if s != namespace_slot("team-3")}
    view = build_view("g", [_member("a@1"), _member("b@1"), _slots(slot_map)], namespaces)
    free = namespace_slot("team-3")
    for ns in namespaces:
        expected = "-" if namespace_slot(ns) == free else ("a@1" if namespace_slot(ns) % 2 == 0 else "b@1")
        assert view.namespaces[ns] == expected
    assert view.unowned_slots == 1
    assert view.members["a@1"]["slots"] + view.members["b@1"]["slots"] == 63
    unowned = sum(1 for ns in namespaces if namespace_slot(ns) == free)
    assert sum(m["namespaces"] for m in view.members.values()) == len(namespaces) - unowned
    text = render_text(view)
    assert text.splitlines()[0] == "lease group g: 2 member(s), 1 slot(s) without owner"
    assert any(line.split() == ["team-3", "-"] for line in text.splitlines())


def test_a_slot_owner_whose_lease_is_gone_is_still_listed() -> None:
    view = build_view("g", [_slots({s: "gone@1" for s in range(64)})], ["default"])
    assert view.members == {"gone@1": {"renewTime": None, "slots": 64, "namespaces": 1}}


def test_the_command_is_registered_with_its_defaults() -> None:
    args = build_parser().parse_args(["shards"])
    assert (args.lease_group, args.namespace, args.output) == ("kthena-py-controller-manager", "kthena-system", "text")


def test_with_raw_cuts_recorded_each_namespace_is_shown_with_the_owner_of_its_raw_range() -> None:
    namespaces = [f"tenant-{i:03d}" for i in range(128)]
    cuts = plan_cuts(fnv1a64(ns) for ns in namespaces)
    slots = _slots({s: ("a@1" if s < 32 else "b@1") for s in range(64)})
    slots["metadata"]["annotations"][CUTS_ANNOTATION] = encode_cuts(CutState(3, cuts))  # type: ignore[index]
    view = build_view("g", [_member("a@1"), _member("b@1"), slots], namespaces)
    for ns in namespaces:
        assert view.namespaces[ns] == ("a@1" if slot_at(fnv1a64(ns), cuts) < 32 else "b@1"), ns
    assert view.members["a@1"]["namespaces"] == view.members["b@1"]["namespaces"] == 64  # two per slot
