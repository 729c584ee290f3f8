"""Slots cut at the quantiles of the raw namespace hashes (``runtime.shards.cuts``): table cases and properties."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.runtime.shards.assignment import plan_assignment
from kthena_py.runtime.shards.cuts import plan_cuts, ranges_of_slots, slot_at
from kthena_py.runtime.shards.hashing import SLOT_COUNT, SLOT_SIZE, SPACE, fnv1a64

# distinct hashes at least 2**20 apart: every gap can hold the cuts it is given
spaced = st.sets(st.integers(0, (SPACE >> 20) - 1), max_size=400).map(lambda s: [h << 20 for h in s])


def counts(hashes: list[int], cuts: tuple[int, ...]) -> Counter[int]:
    return Counter(slot_at(h, cuts) for h in hashes)


@given(spaced, st.integers(1, 80))
@settings(max_examples=300)
def test_bounds_cover_the_space_once_and_never_sit_on_a_namespace(hashes: list[int], slots: int) -> None:
    cuts = plan_cuts(hashes, slots)
    assert len(cuts) == slots + 1 and cuts[0] == 0 and cuts[-1] == SPACE
    assert all(a < b for a, b in itertools.pairwise(cuts))
    assert not set(cuts[1:-1]) & set(hashes)
    for h in hashes:
        s = slot_at(h, cuts)
        assert cuts[s] <= h < cuts[s + 1]


@given(spaced, st.integers(1, 80))
@settings(max_examples=300)
def test_equal_weights_give_every_slot_floor_or_ceil_of_its_share(hashes: list[int], slots: int) -> None:
    n = len(hashes)
    per_slot = counts(hashes, plan_cuts(hashes, slots))
    if n >= slots:
        assert {per_slot.get(s, 0) for s in range(slots)} <= {n // slots, math.ceil(n / slots)}
    else:
        assert max(per_slot.values(), default=0) <= 1


@given(st.dictionaries(st.integers(0, (SPACE >> 20) - 1), st.integers(1, 50), min_size=1, max_size=200))
@settings(max_examples=300)
def test_a_weighted_slot_exceeds_its_share_by_less_than_the_heaviest_namespace(raw: dict[int, int]) -> None:
    weights = {h << 20: w for h, w in raw.items()}
    cuts = plan_cuts(weights, 16, weights)
    load: Counter[int] = Counter()
    for h, w in weights.items():
        load[slot_at(h, cuts)] += w
    share = sum(weights.values()) / 16
    assert max(load.values()) < share + max(weights.values())


@given(spaced, st.sets(st.integers(0, SLOT_COUNT - 1)))
def test_ranges_of_slots_hold_exactly_the_hashes_of_those_slots(hashes: list[int], chosen: set[int]) -> None:
    cuts = plan_cuts(hashes)
    ranges = ranges_of_slots(chosen, cuts)
    assert all(b < c for (_, b), (c, _) in itertools.pairwise(ranges))  # merged: no two adjacent
    for h in hashes:
        assert any(a <= h < b for a, b in ranges) == (slot_at(h, cuts) in chosen)


def test_no_namespaces_cut_the_space_evenly() -> None:
    assert plan_cuts([], 4) == (0, SPACE // 4, SPACE // 2, 3 * SPACE // 4, SPACE)


def test_neighbouring_hashes_that_cannot_hold_the_cuts_are_refused() -> None:
    with pytest.raises(ValueError, match="gaps"):
        plan_cuts([10, 11], 4)  # three cuts, two of them between 10 and 11


@pytest.mark.parametrize(
    "family",
    [
        [f"team-{c}" for c in "abcdefghijklmnopqrstuvwxyz"],
        [f"tenant-{i:03d}" for i in range(1000)],
        [f"bench-{i}" for i in range(60)],
    ],
    ids=["team-a..z", "tenant-000..999", "bench-0..59"],
)
def test_families_of_names_get_even_shares_of_the_raw_space_where_equal_ranges_do_not(family: list[str]) -> None:
    hashes = [fnv1a64(name) for name in family]
    members = ["a", "b", "c", "d"]
    owners = plan_assignment({}, members)
    even = len(family) / len(members)

    def shares(slot_of: dict[str, int]) -> list[int]:
        per = Counter(owners[slot_of[name]] for name in family)
        return [per.get(m, 0) for m in members]

    cuts = plan_cuts(hashes)
    by_cuts = shares({name: slot_at(h, cuts) for name, h in zip(family, hashes, strict=True)})
    by_equal_ranges = shares({name: h // SLOT_SIZE for name, h in zip(family, hashes, strict=True)})
    # 16 slots per member, each within one namespace of len/64: at most 16 namespaces off an even share
    assert max(abs(s - even) for s in by_cuts) <= 16
    assert max(by_cuts) <= even * 1.3 + 1
    assert max(by_equal_ranges) > even * 1.3 + 1  # the raw hash's equal ranges cluster these families
