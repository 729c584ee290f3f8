"""The sharding planner: the API server's hash, balanced assignments with the fewest moves, selectors."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.runtime.shards.assignment import moves, plan_assignment, slots_of
from kthena_py.runtime.shards.hashing import SLOT_COUNT, SPACE, fnv1a64, mix64, namespace_slot, slot_of
from kthena_py.runtime.shards.selector import ranges_of, shard_selector


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0xCBF29CE484222325), ("a", 0xAF63DC4C8601EC8C), ("foobar", 0x85944171F73967E8)],
)
def test_fnv1a64_matches_the_published_vectors(text: str, expected: int) -> None:
    assert fnv1a64(text) == expected


def test_slots_cut_the_space_into_equal_contiguous_parts() -> None:
    assert slot_of(0) == 0
    assert slot_of(SPACE - 1) == SLOT_COUNT - 1
    assert slot_of(SPACE // SLOT_COUNT) == 1
    assert slot_of(SPACE // SLOT_COUNT - 1) == 0


@pytest.mark.parametrize(
    ("current", "members", "moved"),
    [
        ({}, ["a"], SLOT_COUNT),  # the first member takes everything
        ({s: "a" for s in range(SLOT_COUNT)}, ["a", "b"], SLOT_COUNT // 2),  # a newcomer takes half
        ({s: "a" if s < 32 else "b" for s in range(SLOT_COUNT)}, ["a"], 32),  # b left: its half moves to a
        ({s: "a" if s < 32 else "b" for s in range(SLOT_COUNT)}, ["a", "b"], 0),  # balanced: nothing moves
        ({s: "a" if s < 32 else "b" for s in range(SLOT_COUNT)}, ["a", "b", "c"], 21),  # a and b keep 22 and 21
    ],
)
def test_assignment_moves_only_what_balance_needs(current: dict[int, str], members: list[str], moved: int) -> None:
    after = plan_assignment(current, members)
    assert len(moves(current, after)) == moved
    counts = sorted(len(slots_of(after, m)) for m in members)
    assert counts[-1] - counts[0] <= 1 and sum(counts) == SLOT_COUNT


def test_no_live_member_owns_nothing() -> None:
    assert plan_assignment({0: "a"}, []) == {}


def test_selector_renders_the_api_servers_grammar_with_merged_ranges() -> None:
    assert ranges_of([0, 1, 3]) == ((0, 2 * SPACE // SLOT_COUNT), (3 * SPACE // SLOT_COUNT, 4 * SPACE // SLOT_COUNT))
    assert shard_selector(ranges_of(range(SLOT_COUNT))) == (
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"
    )
    half = shard_selector(ranges_of(range(SLOT_COUNT // 2, SLOT_COUNT)))
    assert half == "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
    two = shard_selector(ranges_of([0, 2]))
    assert two.count(" || ") == 1 and two.startswith("shardRange(object.metadata.namespace, '0x0000000000000000', ")


members_st = st.lists(st.sampled_from([f"m{i}" for i in range(9)]), min_size=1, max_size=9, unique=True)
assignment_st = st.dictionaries(
    st.integers(0, SLOT_COUNT - 1), st.sampled_from([f"m{i}" for i in range(12)]), max_size=SLOT_COUNT
)


@given(assignment_st, members_st)
def test_every_slot_has_one_live_owner_and_shares_are_equal(current: dict[int, str], members: list[str]) -> None:
    after = plan_assignment(current, members)
    assert set(after) == set(range(SLOT_COUNT))
    assert set(after.values()) <= set(members)
    counts = [len(slots_of(after, m)) for m in members]
    assert max(counts) - min(counts) <= 1


@given(assignment_st, members_st)
def test_no_balanced_assignment_moves_fewer_slots(current: dict[int, str], members: list[str]) -> None:
    after = plan_assignment(current, members)
    # a lower bound any balanced assignment must pay: free slots, plus each member's excess over the largest share
    live = set(members)
    base, extra = divmod(SLOT_COUNT, len(members))
    held = sorted((sum(1 for o in current.values() if o == m) for m in members), reverse=True)
    kept = sum(min(h, base + (1 if i < extra else 0)) for i, h in enumerate(held))
    assert len([s for s in range(SLOT_COUNT) if after[s] != current.get(s)]) == SLOT_COUNT - kept
    # and the plan is a fixed point: planning again over the same members moves nothing
    assert plan_assignment(after, members) == after
    # a slot held by a live member within its share never moves
    for m in live:
        mine = sorted(s for s, o in current.items() if o == m)
        assert set(mine[: len(slots_of(after, m))]) <= slots_of(after, m)


@given(st.frozensets(st.integers(0, SLOT_COUNT - 1)))
def test_the_selector_covers_exactly_the_ranges_it_is_given(slots: frozenset[int]) -> None:
    bounds = [int(b, 16) for b in re.findall(r"'(0x[0-9a-f]+)'", shard_selector(ranges_of(slots)))]
    assert all(re.fullmatch(r"0x[0-9a-f]{16}|0x10000000000000000", f"0x{b:016x}") for b in bounds)
    covered = sum(bounds[i + 1] - bounds[i] for i in range(0, len(bounds), 2))
    assert covered == len(slots) * (SPACE // SLOT_COUNT)


@given(st.integers(0, SPACE - 1), st.integers(0, SPACE - 1))
def test_the_mix_is_injective(a: int, b: int) -> None:
    assert (mix64(a) == mix64(b)) == (a == b)
    assert 0 <= mix64(a) < SPACE


def test_the_slot_is_the_mixed_api_server_hash() -> None:
    assert namespace_slot("team-a") == slot_of(mix64(fnv1a64("team-a")))


FAMILIES = {
    "team-a .. team-z": [f"team-{chr(c)}" for c in range(ord("a"), ord("z") + 1)] * 1,
    "tenant-000 .. tenant-999": [f"tenant-{i:03d}" for i in range(1000)],
    "ns0 .. ns999": [f"ns{i}" for i in range(1000)],
    "bench-0 .. bench-59": [f"bench-{i}" for i in range(60)],
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_names_that_differ_in_their_last_characters_spread_over_the_members(family: str) -> None:
    """Four members of 16 contiguous slots each get a fair share of a family of similar names (the raw hash's top
    bits put all of team-a .. team-z in one slot, and 50 of bench-0 .. bench-59 in another)."""
    names = FAMILIES[family]
    shares = [0, 0, 0, 0]
    for name in names:
        shares[namespace_slot(name) // (SLOT_COUNT // 4)] += 1
    fair = len(names) / 4
    # within 4.5 standard deviations of a uniform draw's share, and nobody left out
    assert max(abs(s - fair) for s in shares) <= 4.5 * (fair * 0.75) ** 0.5, shares
    assert min(shares) > 0, shares
