"""The slot map's encoding on its Lease: round trips, and anything unreadable counts as free slots."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.runtime.shards.member import SLOT_MAP_ANNOTATION, ShardMember, _encode_map, lease_name, read_slot_map


def _lease(raw: str | None) -> dict[str, Any]:
    return {"metadata": {"annotations": {SLOT_MAP_ANNOTATION: raw} if raw is not None else {}}}


def test_the_map_round_trips_in_slot_order() -> None:
    slot_map = {10: "b@t1", 2: "a@t0", 0: "a@t0"}
    encoded = _encode_map(slot_map)
    assert encoded == '{"0":"a@t0","2":"a@t0","10":"b@t1"}'
    assert read_slot_map(_lease(encoded)) == slot_map


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, {}),
        ("", {}),
        ("not json", {}),
        ("[1, 2]", {}),
        ('{"x": "a", "3": 4, "5": "b"}', {5: "b"}),
    ],
)
def test_an_unreadable_map_or_entry_is_a_free_slot(raw: str | None, expected: dict[int, str]) -> None:
    assert read_slot_map(_lease(raw)) == expected


def test_member_lease_names_fit_any_identity() -> None:
    name = lease_name("kthena", "pod/with:odd chars and a very long name " * 5)
    assert name.startswith("kthena-m-") and len(name) == len("kthena-m-") + 10
    assert lease_name("kthena", "a") != lease_name("kthena", "b")


def test_timings_must_leave_a_margin() -> None:
    with pytest.raises(ValueError, match="renew_deadline < lease_duration"):
        ShardMember(None, group="g", namespace="n", identity="a", lease_duration=2, renew_deadline=2)  # type: ignore[arg-type]
