"""When the activator records ModelPool demand: the rate limits of the contract with the pool controller."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kthena_py.plan.activator.demand import (
    HELD,
    HELD_MIN_AGE_SECONDS,
    REFRESH,
    RESIDENT,
    DemandKind,
    demand_due_in,
    demand_patch,
    latest_record,
    min_age,
    record_time,
    stale_after_release,
)
from kthena_py.plan.modelpool.demand import (
    DEMAND_LIVE_SECONDS,
    DEMAND_REFRESH_SECONDS,
    RESIDENT_RECENCY_SECONDS,
    asks_for_swap,
    demand_of,
    format_demand_time,
    parse_demand_time,
)
from kthena_py.vocab.labels import MODELPOOL_DEMAND_PREFIX

NOW = 1_800_000_000.0
KINDS: list[DemandKind] = [HELD, REFRESH, RESIDENT]


def test_the_limits_are_the_contract() -> None:
    assert (min_age(HELD), min_age(REFRESH), min_age(RESIDENT)) == (1.0, 10.0, 30.0)
    assert (DEMAND_REFRESH_SECONDS, RESIDENT_RECENCY_SECONDS) == (10.0, 30.0)
    # A held request's demand stays live between two refreshes, with margin.
    assert DEMAND_REFRESH_SECONDS < DEMAND_LIVE_SECONDS


@pytest.mark.parametrize(
    ("age", "kind", "due"),
    [
        (None, HELD, True),
        (None, REFRESH, True),
        (None, RESIDENT, True),
        (0.0, HELD, False),
        (0.5, HELD, False),
        (1.0, HELD, False),  # "older than 1 s": exactly 1 s is not
        (1.01, HELD, True),
        (9.9, REFRESH, False),
        (10.0, REFRESH, True),
        (29.0, RESIDENT, False),
        (30.0, RESIDENT, True),
        (120.0, RESIDENT, True),
        (-5.0, HELD, False),  # a record from another replica whose clock is ahead
        (-5.0, REFRESH, False),
    ],
)
def test_due(age: float | None, kind: DemandKind, due: bool) -> None:
    latest = None if age is None else NOW - age
    assert (demand_due_in(latest, NOW, kind) == 0.0) is due


@pytest.mark.parametrize(
    ("age", "kind", "wait"),
    [(0.0, REFRESH, 10.0), (4.0, REFRESH, 6.0), (20.0, RESIDENT, 10.0), (-5.0, REFRESH, 15.0)],
)
def test_wait_until_due(age: float, kind: DemandKind, wait: float) -> None:
    assert demand_due_in(NOW - age, NOW, kind) == pytest.approx(wait)


@pytest.mark.parametrize(
    ("cached", "written", "latest"),
    [(None, None, None), (5.0, None, 5.0), (None, 7.0, 7.0), (5.0, 7.0, 7.0), (9.0, 7.0, 9.0)],
)
def test_latest_record_is_the_later_of_cache_and_own_write(
    cached: float | None, written: float | None, latest: float | None
) -> None:
    assert latest_record(cached, written) == latest


times = st.floats(min_value=NOW - 1000, max_value=NOW + 1000, allow_nan=False)
kinds = st.sampled_from(KINDS)


@given(latest=st.none() | times, now=times, kind=kinds)
def test_waiting_the_answer_makes_it_due(latest: float | None, now: float, kind: DemandKind) -> None:
    wait = demand_due_in(latest, now, kind)
    assert wait >= 0.0
    if latest is not None:
        assert wait <= max(0.0, latest - now) + min_age(kind) + 0.01
    assert demand_due_in(latest, now + wait, kind) <= 1e-6


@given(gaps=st.lists(st.floats(min_value=0.0, max_value=40.0, allow_nan=False), min_size=1, max_size=60), kind=kinds)
def test_one_process_never_writes_faster_than_the_limit(gaps: list[float], kind: DemandKind) -> None:
    """Requests at any times; a record is written whenever due (the writer's own writes are the only records)."""
    now, last, writes = NOW, None, []
    for gap in gaps:
        now += gap
        if demand_due_in(last, now, kind) == 0.0:
            writes.append(now)
            last = now
    assert writes, "the first request always records"
    spacing = [b - a for a, b in itertools.pairwise(writes)]
    if kind == HELD:
        assert all(s > HELD_MIN_AGE_SECONDS for s in spacing)
    else:
        assert all(s >= min_age(kind) for s in spacing)


@given(
    epoch=st.floats(min_value=1_000_000_000, max_value=4_000_000_000, allow_nan=False),
    member=st.sampled_from(["a", "llm-b", "m.1"]),
)
def test_the_patch_is_one_annotation_the_pool_controller_reads_back(epoch: float, member: str) -> None:
    patch = demand_patch(member, epoch)
    assert list(patch) == ["metadata"] and list(patch["metadata"]) == ["annotations"]
    annotations = patch["metadata"]["annotations"]
    assert list(annotations) == [MODELPOOL_DEMAND_PREFIX + member]
    assert annotations[MODELPOOL_DEMAND_PREFIX + member] == format_demand_time(epoch)
    read = demand_of({"metadata": {"annotations": annotations}})
    assert list(read) == [member] and abs(read[member] - epoch) < 0.001
    assert parse_demand_time(annotations[MODELPOOL_DEMAND_PREFIX + member]) == read[member]


# -- members the pool controller swapped out (released.modelpool.kthena-py.io/<member>) ----------


@pytest.mark.parametrize(
    ("age", "released_ago", "kind", "due"),
    [
        (0.5, 0.2, HELD, True),  # recorded 0.5 s ago, released 0.2 s ago: the record no longer counts
        (0.5, 0.5, HELD, True),  # recorded at the release: "at or before" does not count
        (0.2, 0.5, HELD, False),  # recorded after the release: the 1 s limit applies
        (3.0, 1.0, REFRESH, True),  # a refresh does not wait its 10 s either
        (3.0, 5.0, REFRESH, False),
        (None, 5.0, HELD, True),
        (0.5, None, HELD, False),  # never released: the plain limits
        (5.0, 1.0, RESIDENT, False),  # a resident member's recency keeps its 30 s limit
        (-5.0, -10.0, HELD, True),  # a record from a clock ahead, yet not after a release further ahead
        (-5.0, 1.0, HELD, False),  # a record from a clock ahead, after the release: waits as before
    ],
)
def test_due_after_a_release(age: float | None, released_ago: float | None, kind: DemandKind, due: bool) -> None:
    latest = None if age is None else NOW - age
    released = None if released_ago is None else NOW - released_ago
    assert (demand_due_in(latest, NOW, kind, released) == 0.0) is due
    assert stale_after_release(latest, released) is (released is not None and (latest is None or latest <= released))


@pytest.mark.parametrize(
    ("now", "released", "written"),
    [
        (NOW, None, format_demand_time(NOW)),
        (NOW + 2.0, NOW, format_demand_time(NOW + 2.0)),  # the clock is ahead of the release: now
        (NOW, NOW, format_demand_time(NOW + 0.001)),  # same millisecond: one past it
        (NOW + 0.0004, NOW, format_demand_time(NOW + 0.001)),  # truncation would write the release's millisecond
        (NOW - 3.0, NOW, format_demand_time(NOW + 0.001)),  # this clock behind the controller's
    ],
)
def test_record_time(now: float, released: float | None, written: str) -> None:
    assert format_demand_time(record_time(now, released)) == written


ms_times = st.integers(min_value=int(NOW - 1000) * 1000, max_value=int(NOW + 1000) * 1000).map(
    lambda ms: parse_demand_time(format_demand_time(ms / 1000)) or 0.0
)


@given(
    latest=st.none() | times | ms_times,
    now=times,
    released=times | ms_times,
    kind=st.sampled_from([HELD, REFRESH]),
)
def test_a_held_request_for_a_released_member_always_writes_after_the_release(
    latest: float | None, now: float, released: float, kind: DemandKind
) -> None:
    """Whatever the ages: a held request whose member was released since its last record writes, and the record
    the pool controller reads back is later than the release, so it asks for a swap."""
    assume(latest is None or latest <= released)  # a record after the release: the plain limits (tested above)
    assert demand_due_in(latest, now, kind, released) == 0.0
    annotations = demand_patch("m", record_time(now, released))["metadata"]["annotations"]
    read = demand_of({"metadata": {"annotations": annotations}})["m"]
    assert read > released
    assert read >= now - 0.001
    assert asks_for_swap("m", {"m": read}, {"m": released}, now)
    # and once written, the plain limits hold again
    assert not stale_after_release(read, released)
