"""The cut points' record on the slot map's Lease and when to recut (``runtime.shards.cutstate``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.runtime.shards.cuts import plan_cuts
from kthena_py.runtime.shards.cutstate import (
    CutState,
    applied,
    decode_cuts,
    encode_cuts,
    initial_state,
    propose_recut,
    shares_drifted,
)
from kthena_py.runtime.shards.hashing import SLOT_COUNT, SPACE, fnv1a64

spaced = st.sets(st.integers(0, (SPACE >> 20) - 1), max_size=300).map(lambda s: [h << 20 for h in s])


def names(prefix: str, count: int) -> list[int]:
    return [fnv1a64(f"{prefix}{i}") for i in range(count)]


@given(spaced, st.integers(0, 10**6), st.booleans())
@settings(max_examples=100)
def test_a_record_round_trips(hashes: list[int], generation: int, pending: bool) -> None:
    state = CutState(generation, plan_cuts(hashes), plan_cuts(hashes[: len(hashes) // 2]) if pending else None)
    assert decode_cuts(encode_cuts(state)) == state


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "not json",
        "[]",
        json.dumps({"cuts": ["0x0", "0x1"]}),  # no generation
        json.dumps({"generation": 1, "cuts": ["0x0", f"0x{SPACE:x}"]}),  # one slot, not 64
        json.dumps({"generation": 1, "cuts": ["0x0"] * (SLOT_COUNT + 1)}),  # not increasing
        json.dumps({"generation": 1, "cuts": ["zz"] * (SLOT_COUNT + 1)}),
        json.dumps({"generation": 1, "cuts": [f"0x{b:x}" for b in plan_cuts(())], "pending": ["0x0"]}),
    ],
)
def test_a_malformed_record_reads_as_none(raw: str | None) -> None:
    assert decode_cuts(raw) is None


def test_cuts_of_the_same_namespaces_never_drift() -> None:
    for hashes in (names("tenant-", 1000), names("team-", 26), names("bench-", 60), names("x", 3), []):
        assert not shares_drifted(hashes, plan_cuts(hashes))


@given(spaced)
@settings(max_examples=200)
def test_planned_cuts_never_drift_for_any_namespaces(hashes: list[int]) -> None:
    assert not shares_drifted(hashes, plan_cuts(hashes))
    assert propose_recut(CutState(3, plan_cuts(hashes)), hashes) is None


def test_a_family_created_after_the_cut_drifts_and_is_proposed_with_the_cuts_in_force_kept() -> None:
    before = names("tenant-", 100)
    state = CutState(4, plan_cuts(before))
    after = before + names("burst-", 40)
    assert shares_drifted(after, state.cuts)
    proposal = propose_recut(state, after)
    assert proposal == CutState(4, state.cuts, plan_cuts(after))
    assert propose_recut(proposal, after + names("more-", 40)) is None  # one pending at a time
    assert applied(proposal) == CutState(5, plan_cuts(after), None)
    assert not shares_drifted(after, applied(proposal).cuts)


def test_a_few_new_namespaces_do_not_drift() -> None:
    before = names("tenant-", 640)  # ten per slot
    state = CutState(1, plan_cuts(before))
    assert propose_recut(state, before + names("new-", 8)) is None


def test_a_group_starts_with_its_first_cuts_pending_on_even_cuts() -> None:
    hashes = names("team-", 26)
    first = initial_state(hashes)
    assert first.generation == 0 and first.cuts == plan_cuts(()) and first.pending == plan_cuts(hashes)
    assert applied(first) == CutState(1, plan_cuts(hashes))
    assert applied(applied(first)) == applied(first)
