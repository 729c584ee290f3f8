"""client-go's event correlator as a pure state machine: similar writes combined, a burst per object, then a trickle.

Table-driven cases pin client-go's defaults (10 distinct messages in 10 minutes; 25 writes, then one every five
minutes); hypothesis properties hold for any sequence of writes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.runtime.eventcorrelator import (
    COMBINED_PREFIX,
    DEFAULT_BURST,
    DEFAULT_MAX_SIMILAR,
    EventCorrelator,
    ObjectKey,
    Verdict,
)

MS: ObjectKey = ("workload.serving.volcano.sh/v1alpha1", "ModelServing", "ns", "ms", "u1")
OTHER: ObjectKey = ("workload.serving.volcano.sh/v1alpha1", "ModelServing", "ns", "other", "u2")


def role_message(i: int) -> str:
    return f"Role prefill/prefill-{i} in ServingGroup ms-0 is now Creating"


def unlimited() -> EventCorrelator:
    """A correlator whose burst never runs out, to look at combining alone."""
    return EventCorrelator(burst=0)


def test_the_tenth_distinct_message_is_the_first_combined_one() -> None:
    correlator = unlimited()
    verdicts = [correlator.correlate(MS, "Normal", "RoleCreating", role_message(i), 0.0) for i in range(12)]
    assert [v.combined for v in verdicts] == [False] * 9 + [True] * 3
    assert verdicts[0] == Verdict(send=True, message=role_message(0))
    assert verdicts[9] == Verdict(send=True, message=COMBINED_PREFIX + role_message(9), combined=True)


def test_a_message_still_remembered_passes_as_itself_after_the_threshold() -> None:
    correlator = unlimited()
    for i in range(10):
        correlator.correlate(MS, "Normal", "RoleCreating", role_message(i), 0.0)
    # the tenth dropped the least recently seen (message 0); message 5 is still one of the nine remembered
    assert correlator.correlate(MS, "Normal", "RoleCreating", role_message(5), 1.0).combined is False
    assert correlator.correlate(MS, "Normal", "RoleCreating", role_message(0), 2.0).combined is True


@pytest.mark.parametrize(
    ("obj", "type_", "reason"),
    [
        (OTHER, "Normal", "RoleCreating"),  # another object
        (MS, "Warning", "RoleCreating"),  # another type
        (MS, "Normal", "RoleRunning"),  # another reason
    ],
)
def test_similar_means_same_object_type_and_reason(obj: ObjectKey, type_: str, reason: str) -> None:
    correlator = unlimited()
    for i in range(DEFAULT_MAX_SIMILAR - 1):
        correlator.correlate(MS, "Normal", "RoleCreating", role_message(i), 0.0)
    assert correlator.correlate(obj, type_, reason, role_message(99), 0.0).combined is False
    assert correlator.correlate(MS, "Normal", "RoleCreating", role_message(99), 0.0).combined is True


@pytest.mark.parametrize(("gap", "combined"), [(600.0, True), (600.5, False)])
def test_the_count_restarts_after_a_quiet_window(gap: float, combined: bool) -> None:
    correlator = unlimited()
    for i in range(9):
        correlator.correlate(MS, "Normal", "RoleCreating", role_message(i), float(i))
    assert correlator.correlate(MS, "Normal", "RoleCreating", role_message(9), 8.0 + gap).combined is combined


def test_a_burst_of_25_then_one_every_five_minutes() -> None:
    correlator = EventCorrelator()
    sent = [correlator.correlate(MS, "Normal", f"R{i}", "m", 0.0).send for i in range(30)]
    assert sent == [True] * DEFAULT_BURST + [False] * 5
    assert correlator.correlate(MS, "Normal", "R", "m", 299.0).send is False
    assert correlator.correlate(MS, "Normal", "R", "m", 300.0).send is True
    assert correlator.correlate(MS, "Normal", "R", "m", 301.0).send is False
    # a long quiet spell refills the whole burst, not more
    later = [correlator.correlate(MS, "Normal", f"R{i}", "m", 300.0 + 300.0 * 100).send for i in range(30)]
    assert later.count(True) == DEFAULT_BURST


def test_warnings_and_other_objects_have_buckets_of_their_own() -> None:
    correlator = EventCorrelator()
    for i in range(DEFAULT_BURST):
        assert correlator.correlate(MS, "Normal", f"R{i}", "m", 0.0).send
    assert correlator.correlate(MS, "Normal", "R", "m", 0.0).send is False
    assert correlator.correlate(MS, "Warning", "W", "m", 0.0).send is True
    assert correlator.correlate(OTHER, "Normal", "R", "m", 0.0).send is True


def test_combined_writes_take_tokens_too() -> None:
    correlator = EventCorrelator(burst=12)
    verdicts = [correlator.correlate(MS, "Normal", "RoleCreating", role_message(i), 0.0) for i in range(14)]
    assert [(v.send, v.combined) for v in verdicts] == [(True, False)] * 9 + [(True, True)] * 3 + [(False, True)] * 2


def test_a_forgotten_object_starts_afresh() -> None:
    correlator = EventCorrelator(burst=1, max_keys=2)
    assert correlator.correlate(MS, "Normal", "R", "m", 0.0).send
    assert not correlator.correlate(MS, "Normal", "R", "m", 0.0).send
    correlator.correlate(OTHER, "Normal", "R", "m", 0.0)
    correlator.correlate(OTHER, "Warning", "R", "m", 0.0)  # the third key: MS's bucket is forgotten
    assert correlator.correlate(MS, "Normal", "R", "m", 0.0).send


def test_zero_turns_either_stage_off() -> None:
    correlator = EventCorrelator(max_similar=0, burst=0)
    verdicts = [correlator.correlate(MS, "Normal", "RoleCreating", role_message(i), 0.0) for i in range(100)]
    assert all(v.send and not v.combined and v.message == role_message(i) for i, v in enumerate(verdicts))


writes = st.lists(
    st.tuples(
        st.sampled_from([MS, OTHER]),
        st.sampled_from(["Normal", "Warning"]),
        st.sampled_from(["RoleCreating", "RoleRunning"]),
        st.integers(min_value=0, max_value=14),  # which message
        st.floats(min_value=0.0, max_value=900.0, allow_nan=False),  # seconds since the previous write
    ),
    max_size=120,
)


def replay(correlator: EventCorrelator, sequence: list[tuple[ObjectKey, str, str, int, float]]) -> list[Verdict]:
    now = 0.0
    out = []
    for obj, type_, reason, message, gap in sequence:
        now += gap
        out.append(correlator.correlate(obj, type_, reason, role_message(message), now))
    return out


@settings(max_examples=200, deadline=None)
@given(writes)
def test_the_same_writes_get_the_same_verdicts(sequence: list[tuple[ObjectKey, str, str, int, float]]) -> None:
    assert replay(EventCorrelator(), sequence) == replay(EventCorrelator(), sequence)


@settings(max_examples=200, deadline=None)
@given(writes, st.integers(min_value=1, max_value=30), st.floats(min_value=0.001, max_value=1.0))
def test_sends_per_object_and_type_never_exceed_the_bucket(
    sequence: list[tuple[ObjectKey, str, str, int, float]], burst: int, refill: float
) -> None:
    verdicts = replay(EventCorrelator(burst=burst, refill_per_second=refill), sequence)
    now = 0.0
    first: dict[tuple[ObjectKey, str], float] = {}
    sent: dict[tuple[ObjectKey, str], int] = {}
    for (obj, type_, _, _, gap), verdict in zip(sequence, verdicts, strict=True):
        now += gap
        key = (obj, type_)
        first.setdefault(key, now)
        sent[key] = sent.get(key, 0) + verdict.send
        assert sent[key] <= burst + (now - first[key]) * refill + 1e-9


@settings(max_examples=200, deadline=None)
@given(writes)
def test_fewer_distinct_messages_than_the_threshold_are_never_combined(
    sequence: list[tuple[ObjectKey, str, str, int, float]],
) -> None:
    few = [
        (obj, type_, reason, message % (DEFAULT_MAX_SIMILAR - 1), gap) for obj, type_, reason, message, gap in sequence
    ]
    verdicts = replay(EventCorrelator(), few)
    assert not any(v.combined for v in verdicts)
    assert all(v.message == role_message(m) for (_, _, _, m, _), v in zip(few, verdicts, strict=True))


@settings(max_examples=200, deadline=None)
@given(writes)
def test_a_combined_message_is_the_write_s_own_behind_client_go_s_prefix(
    sequence: list[tuple[ObjectKey, str, str, int, float]],
) -> None:
    for (_, _, _, message, _), verdict in zip(sequence, replay(EventCorrelator(burst=0), sequence), strict=True):
        assert verdict.send
        assert verdict.message == (COMBINED_PREFIX if verdict.combined else "") + role_message(message)
