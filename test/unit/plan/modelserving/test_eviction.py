"""The eviction budget (kthena_py.plan.modelserving.eviction): tracker format, units, thresholds, verdicts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kthena_py.api.intstr import IntOrString
from kthena_py.api.modelserving import ModelServing
from kthena_py.plan.modelserving.core.state import PlanningState, build_state
from kthena_py.plan.modelserving.eviction import (
    ENTRIES_KEY,
    IN_FLIGHT_SECONDS,
    BudgetStatus,
    PodIdentity,
    Target,
    TrackerEntry,
    UnitHealth,
    Verdict,
    budget_condition,
    budget_statuses,
    disrupted_units,
    evaluate,
    expire,
    group_key,
    next_expiry,
    parse_entries,
    prune,
    render_entries,
    resolve_min_available,
    role_key,
    target_by_name,
    target_of,
    tracker_entries,
    tracker_name,
    unit_disrupted,
    unit_index,
)
from kthena_py.plan.modelserving.groups.status import format_time

from .builders import NOW, VOLCANO, Cluster, ms_doc, parse, ref_of, role_doc

TTL = 60.0
G0, G1, G2 = (group_key("ns", "llama", f"llama-{g}") for g in range(3))


def make(strategy: dict[str, Any], *roles: dict[str, Any], replicas: int = 3) -> tuple[ModelServing, Cluster]:
    doc = ms_doc(*(roles or (role_doc("prefill"),)), replicas=replicas)
    doc["spec"]["rolloutStrategy"] = {"evictionStrategy": strategy}
    ms = parse(doc)
    cluster = Cluster()
    cluster.converge(ms)
    return ms, cluster


def state_of(ms: ModelServing, cluster: Cluster) -> PlanningState:
    return build_state(ms, ref_of(ms), cluster.observed(), VOLCANO)


def target(cluster: Cluster, pod: str) -> Target:
    found = target_of(cluster.pods()[pod])
    assert found is not None
    return found


def verdict(
    ms: ModelServing, cluster: Cluster, pod: str, entries: dict[str, TrackerEntry] | None = None, now: float = NOW
) -> Verdict:
    strategy = ms.spec.rollout_strategy.eviction_strategy  # type: ignore[union-attr]
    assert strategy is not None
    return evaluate(state_of(ms, cluster), strategy, target(cluster, pod), entries or {}, now=now, ttl=TTL)


def record(cluster: Cluster, pod: str, expires: float = NOW + 30) -> TrackerEntry:
    md = cluster.pods()[pod]["metadata"]
    return TrackerEntry(expires, md["uid"], pod)


# -- the tracker format ------------------------------------------------------------------------------------------


def test_tracker_name_and_keys_are_kthenas() -> None:
    assert tracker_name("llama") == "kthena-eviction-tracker-llama"
    assert group_key("ns", "llama", "llama-0") == "ServingGroup/ns/llama/llama-0"
    assert role_key("ns", "llama", "llama-0", "decode", "decode-1") == "Role/ns/llama/llama-0/decode/decode-1"


def test_entries_round_trip_and_read_kthenas_go_timestamps() -> None:
    entries = {
        G0: TrackerEntry(NOW + 60.5, "uid-1", "llama-0-prefill-0-0", ("uid-1", "uid-7")),
        G1: TrackerEntry(NOW + 1, "uid-2", "llama-1-prefill-0-0"),
    }
    text = render_entries(entries)
    assert parse_entries(text) == entries
    assert render_entries(parse_entries(text)) == text
    assert json.loads(text)[G0]["grantedPodUIDs"] == ["uid-1", "uid-7"]
    # An entry of one grant is exactly Kthena's: three fields.
    assert sorted(json.loads(text)[G1]) == ["expiresAt", "triggerPodName", "triggerPodUID"]
    go = json.dumps(
        {
            G0: {"expiresAt": "2023-11-14T22:13:20.123456789Z", "triggerPodUID": "u", "triggerPodName": "p"},
            G1: {"expiresAt": "2023-11-14T23:13:20+01:00", "triggerPodUID": "v", "triggerPodName": "q"},
        }
    )
    parsed = parse_entries(go)
    assert parsed[G0] == TrackerEntry(1_700_000_000.123456, "u", "p")
    assert parsed[G1].expires_at == 1_700_000_000.0


@pytest.mark.parametrize(
    "text",
    [None, "", "not json", "[]", '{"k": 1}', '{"k": {"expiresAt": "yesterday"}}', '{"k": {"triggerPodUID": "u"}}'],
)
def test_unreadable_entries_are_ignored(text: Any) -> None:
    assert parse_entries(text) == {}


def test_disrupted_units_are_the_unexpired_keys() -> None:
    entries = {
        G0: TrackerEntry(NOW + 1, "u", "p"),
        G1: TrackerEntry(NOW, "v", "q"),
        G2: TrackerEntry(NOW - 5, "w", "r"),
    }
    configmap = {"metadata": {"name": tracker_name("llama")}, "data": {ENTRIES_KEY: render_entries(entries)}}
    assert disrupted_units(configmap, NOW) == {G0}
    assert disrupted_units(configmap, NOW - 10) == {G0, G1, G2}
    assert disrupted_units(None, NOW) == frozenset()
    assert disrupted_units({"data": None}, NOW) == frozenset()
    assert tracker_entries(configmap) == parse_entries(render_entries(entries))
    assert next_expiry(entries) == NOW - 5
    assert next_expiry({}) is None


def test_a_key_of_one_level_covers_the_other() -> None:
    role = role_key("ns", "llama", "llama-0", "decode", "decode-1")
    assert unit_disrupted(G0, frozenset({role}))
    assert not unit_disrupted(G1, frozenset({role}))
    assert unit_disrupted(role, frozenset({G0}))
    assert not unit_disrupted(role, frozenset({G1}))
    assert not unit_disrupted(role_key("ns", "llama", "llama-0", "decode", "decode-2"), frozenset({role}))
    assert not unit_disrupted("Something/else", frozenset({G0}))


TRIGGER = TrackerEntry(NOW + 30, "uid-old", "llama-0-prefill-0-0")
TWO_GRANTS = TRIGGER.with_grant("uid-worker", NOW + 40)


def test_a_grant_in_a_recorded_unit_joins_its_entry() -> None:
    assert TrackerEntry(NOW + 40, "uid-old", "llama-0-prefill-0-0", ("uid-old", "uid-worker")) == TWO_GRANTS
    assert TWO_GRANTS.granted == {"uid-old", "uid-worker"}
    assert TWO_GRANTS.with_grant("uid-worker", NOW + 10) == TWO_GRANTS  # the expiry never moves back
    assert TRIGGER.with_grant("uid-old", NOW + 30) == TRIGGER  # one pod: still Kthena's form


@pytest.mark.parametrize(
    ("entry", "unit", "kept"),
    [
        (TrackerEntry(NOW, "u", "p"), None, False),  # expired
        (TRIGGER, None, True),  # not observed: kept until it expires
        (TRIGGER, UnitHealth(False, (PodIdentity(TRIGGER.trigger_pod_name, "uid-new"),)), True),  # rebuilding
        (TRIGGER, UnitHealth(True, (PodIdentity(TRIGGER.trigger_pod_name, "uid-old"),)), True),  # not gone
        (TRIGGER, UnitHealth(True, (PodIdentity(TRIGGER.trigger_pod_name, "uid-new"),)), False),  # recovered
        (TRIGGER, UnitHealth(True, (PodIdentity("other", "uid-x"),)), False),
        # A pod granted while the unit was already disrupted holds the entry until it is gone too.
        (TWO_GRANTS, UnitHealth(True, (PodIdentity("e", "uid-new"), PodIdentity("w", "uid-worker"))), True),
        (TWO_GRANTS, UnitHealth(True, (PodIdentity("e", "uid-new"), PodIdentity("w", "uid-w2"))), False),
    ],
)
def test_prune(entry: TrackerEntry, unit: UnitHealth | None, kept: bool) -> None:
    units = {} if unit is None else {G0: unit}
    assert prune({G0: entry}, units, NOW) == ({G0: entry} if kept else {})


def test_a_held_entry_is_kept_even_when_its_unit_looks_recovered() -> None:
    held = TrackerEntry(NOW + 30, "uid-old", "p", (), NOW + 1)
    whole = {G0: UnitHealth(True, (PodIdentity("p", "uid-new"),))}
    assert prune({G0: held}, whole, NOW) == {G0: held}
    assert prune({G0: held}, whole, NOW + 1) == {}


def test_expire_drops_only_expired_entries() -> None:
    entries = {G0: TRIGGER, G1: TrackerEntry(NOW, "u", "p")}
    assert expire(entries, NOW) == {G0: TRIGGER}


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        (None, 3, 1),
        (IntOrString(2), 3, 2),
        (IntOrString(0), 3, 0),
        (IntOrString("50%"), 3, 2),
        (IntOrString("34%"), 3, 2),
        (IntOrString("1%"), 3, 1),
        (IntOrString("75%"), 4, 3),
        (IntOrString("100%"), 4, 4),
        (IntOrString("0%"), 4, 0),
        (IntOrString("x"), 4, 4),  # unreadable: everything protected
        (IntOrString(-1), 4, 0),
    ],
)
def test_min_available_resolution_rounds_up(value: IntOrString | None, total: int, expected: int) -> None:
    assert resolve_min_available(value, total, 1) == expected


# -- ServingGroup level --------------------------------------------------------------------------------------------


def test_group_level_grants_while_more_than_min_available_are_ready() -> None:
    ms, cluster = make({"minAvailable": 2})
    first = verdict(ms, cluster, "llama-0-prefill-0-0")
    assert (first.allowed, first.reason, first.record, first.ready, first.min_available) == (
        True,
        "WithinBudget",
        G0,
        3,
        2,
    )
    entry = first.entries[G0]
    pod = cluster.pods()["llama-0-prefill-0-0"]["metadata"]
    assert entry == TrackerEntry(NOW + TTL, pod["uid"], "llama-0-prefill-0-0", (), NOW + IN_FLIGHT_SECONDS)
    second = verdict(ms, cluster, "llama-1-prefill-0-0", dict(first.entries))
    assert (second.allowed, second.reason) == (False, "BudgetExhausted")
    assert second.message == (
        "Eviction denied: protected by ModelServing llama. Current ready groups (2) <= minAvailable (2)."
    )
    assert second.entries == first.entries
    # Drain retries the first pod: already disrupted, nothing more is spent; the record is held anew, as the API
    # server may act on this grant too.
    again = verdict(ms, cluster, "llama-0-prefill-0-0", dict(first.entries), now=NOW + 5)
    assert (again.allowed, again.reason, again.record) == (True, "AlreadyDisrupted", G0)
    assert again.entries[G0] == TrackerEntry(NOW + 5 + TTL, pod["uid"], "llama-0-prefill-0-0", (), NOW + 5 + 17)
    # Once the record expires the budget is back.
    later = verdict(ms, cluster, "llama-1-prefill-0-0", dict(first.entries), now=NOW + TTL)
    assert (later.allowed, later.reason, later.ready) == (True, "WithinBudget", 3)
    assert set(later.entries) == {G1}


def test_group_level_counts_failed_missing_and_terminating_groups_as_unavailable() -> None:
    ms, cluster = make({"minAvailable": 2}, role_doc("prefill"), role_doc("decode", workers=1))
    cluster.fail("llama-1-decode-0-1", NOW - 10)
    exhausted = verdict(ms, cluster, "llama-0-prefill-0-0")
    assert (exhausted.allowed, exhausted.reason, exhausted.ready) == (False, "BudgetExhausted", 2)
    # A ready pod of the failed group: the group is not ready and not tracked.
    not_ready = verdict(ms, cluster, "llama-1-prefill-0-0")
    assert (not_ready.allowed, not_ready.reason) == (False, "UnitNotReady")
    assert not_ready.message == (
        "Eviction denied: protected by ModelServing llama. Target group llama-1 is not ready and not tracked; "
        "current ready groups (2) <= minAvailable (2)."
    )
    # The failed pod itself: not ready, allowed without spending the budget, and recorded.
    failed = verdict(ms, cluster, "llama-1-decode-0-1")
    assert (failed.allowed, failed.reason, failed.record) == (True, "PodNotReady", G1)
    # A missing pod makes a group incomplete, hence not ready, though every pod left is ready.
    ms, cluster = make({"minAvailable": 2}, role_doc("prefill"), role_doc("decode", workers=1))
    cluster.remove("llama-2-decode-0-1")
    assert verdict(ms, cluster, "llama-0-prefill-0-0").reason == "BudgetExhausted"
    # So does a terminating pod.
    ms, cluster = make({"minAvailable": 2})
    cluster.terminate("llama-2-prefill-0-0", NOW)
    assert verdict(ms, cluster, "llama-0-prefill-0-0").reason == "BudgetExhausted"
    assert verdict(ms, cluster, "llama-2-prefill-0-0").reason == "PodNotReady"


def test_group_level_with_a_spare_group_allows_pods_of_groups_that_are_not_ready() -> None:
    ms, cluster = make({"minAvailable": 1}, role_doc("prefill"), role_doc("decode"))
    cluster.fail("llama-1-decode-0-0", NOW - 10)
    allowed = verdict(ms, cluster, "llama-1-prefill-0-0")
    assert (allowed.allowed, allowed.reason, allowed.record) == (True, "WithinBudget", G1)


def test_group_level_target_not_observed() -> None:
    ms, cluster = make({"minAvailable": 3})
    strategy = ms.spec.rollout_strategy.eviction_strategy  # type: ignore[union-attr]
    assert strategy is not None
    ghost = Target("llama-7-prefill-0-0", "uid-ghost", True, "llama-7", "prefill", "prefill-0")
    found = evaluate(state_of(ms, cluster), strategy, ghost, {}, now=NOW, ttl=TTL)
    assert (found.allowed, found.reason) == (False, "UnitNotObserved")
    assert found.message == (
        "Eviction denied: protected by ModelServing llama. Target group llama-7 was not observed while "
        "current ready groups (3) <= minAvailable (3)."
    )


@pytest.mark.parametrize(
    ("min_available", "replicas", "grants"),
    [("50%", 3, 1), ("34%", 3, 1), ("75%", 4, 1), ("25%", 4, 3), ("100%", 2, 0), ("0%", 2, 2), (0, 2, 2), (1, 1, 0)],
)
def test_percentages_round_up_against_spec_replicas(min_available: Any, replicas: int, grants: int) -> None:
    ms, cluster = make({"minAvailable": min_available}, replicas=replicas)
    entries: dict[str, TrackerEntry] = {}
    granted = 0
    for group in range(replicas):
        result = verdict(ms, cluster, f"llama-{group}-prefill-0-0", entries)
        if result.allowed:
            granted += 1
            entries = dict(result.entries)
    assert granted == grants


def test_no_replicas_nothing_to_protect() -> None:
    ms, cluster = make({"minAvailable": 1}, replicas=1)
    scaled = parse(
        {
            **ms_doc(role_doc("prefill"), replicas=0),
            "spec": {**ms.spec.model_dump(by_alias=True, mode="json"), "replicas": 0},
        }
    )
    result = verdict(scaled, cluster, "llama-0-prefill-0-0")
    assert (result.allowed, result.reason) == (True, "NoReplicas")


# -- Role level ------------------------------------------------------------------------------------------------------

ROLES = (role_doc("prefill", replicas=2), role_doc("decode", replicas=1, workers=1))


def role_key0(role: str, ordinal: int, group: int = 0) -> str:
    return role_key("ns", "llama", f"llama-{group}", role, f"{role}-{ordinal}")


def test_role_level_protects_listed_roles_per_group() -> None:
    ms, cluster = make({"protectionLevel": "Role", "roleMinAvailable": {"prefill": 1}}, *ROLES, replicas=2)
    unprotected = verdict(ms, cluster, "llama-0-decode-0-1")
    assert (unprotected.allowed, unprotected.reason, unprotected.record, unprotected.entries) == (
        True,
        "Unprotected",
        None,
        {},
    )
    first = verdict(ms, cluster, "llama-0-prefill-0-0")
    assert (first.allowed, first.record, first.ready, first.min_available) == (True, role_key0("prefill", 0), 2, 1)
    second = verdict(ms, cluster, "llama-0-prefill-1-0", dict(first.entries))
    assert (second.allowed, second.reason) == (False, "BudgetExhausted")
    assert second.message == (
        "Eviction denied: protected by ModelServing llama. ServingGroup llama-0 role prefill "
        "ready instances (1) <= minAvailable (1)."
    )
    other_group = verdict(ms, cluster, "llama-1-prefill-1-0", dict(first.entries))
    assert (other_group.allowed, other_group.record) == (True, role_key0("prefill", 1, group=1))
    # A ServingGroup record (its trigger pod still there) covers the group's role instances.
    covered = verdict(ms, cluster, "llama-0-prefill-1-0", {G0: record(cluster, "llama-0-decode-0-0")})
    assert covered.reason == "AlreadyDisrupted"


def test_role_level_messages_for_units_not_ready_or_not_observed() -> None:
    ms, cluster = make({"protectionLevel": "Role", "roleMinAvailable": {"decode": "100%"}}, *ROLES, replicas=1)
    cluster.fail("llama-0-decode-0-1", NOW - 10)
    result = verdict(ms, cluster, "llama-0-decode-0-0")
    assert (result.allowed, result.reason) == (False, "UnitNotReady")
    assert result.message == (
        "Eviction denied: protected by ModelServing llama. ServingGroup llama-0 role decode instance decode-0 "
        "is not ready and not tracked; current ready instances (0) <= minAvailable (1)."
    )
    strategy = ms.spec.rollout_strategy.eviction_strategy  # type: ignore[union-attr]
    assert strategy is not None
    ghost = Target("llama-0-decode-3-0", "uid-ghost", True, "llama-0", "decode", "decode-3")
    found = evaluate(state_of(ms, cluster), strategy, ghost, {}, now=NOW, ttl=TTL)
    assert found.reason == "UnitNotObserved"
    assert found.message.endswith(
        "ServingGroup llama-0 role decode instance decode-3 was not observed while "
        "current ready instances (0) <= minAvailable (1)."
    )


def test_role_percentages_round_up_against_role_replicas() -> None:
    ms, cluster = make(
        {"protectionLevel": "Role", "roleMinAvailable": {"prefill": "50%"}}, role_doc("prefill", replicas=3), replicas=1
    )
    entries: dict[str, TrackerEntry] = {}
    granted = []
    for ordinal in range(3):
        result = verdict(ms, cluster, f"llama-0-prefill-{ordinal}-0", entries)
        if result.allowed:
            granted.append(ordinal)
            entries = dict(result.entries)
    assert granted == [0]  # 50% of 3 rounds up to 2: one of three may go


# -- index, statuses -------------------------------------------------------------------------------------------


def test_unit_index_covers_both_levels_and_statuses_report_the_budget() -> None:
    ms, cluster = make({"minAvailable": 2}, *ROLES, replicas=3)
    state = state_of(ms, cluster)
    index = unit_index(state)
    assert {G0, G1, G2, role_key0("prefill", 1), role_key0("decode", 0, group=2)} <= set(index)
    assert all(health.healthy for health in index.values())
    assert {pod.name for pod in index[G0].pods} == {
        "llama-0-prefill-0-0",
        "llama-0-prefill-1-0",
        "llama-0-decode-0-0",
        "llama-0-decode-0-1",
    }
    strategy = ms.spec.rollout_strategy.eviction_strategy  # type: ignore[union-attr]
    assert strategy is not None
    (status,) = budget_statuses(state, strategy, frozenset({G1}))
    assert (status.level, status.ready, status.total, status.min_available, status.disrupted, status.allowed) == (
        "ServingGroup",
        2,
        3,
        2,
        1,
        0,
    )
    role_strategy = strategy.model_copy(
        update={"protection_level": "Role", "role_min_available": {"prefill": IntOrString(1)}}
    )
    statuses = budget_statuses(state, role_strategy, frozenset({role_key0("prefill", 0)}))
    assert [(s.group, s.role, s.ready, s.disrupted, s.allowed) for s in statuses] == [
        ("llama-0", "prefill", 1, 1, 0),
        ("llama-1", "prefill", 2, 0, 1),
        ("llama-2", "prefill", 2, 0, 1),
    ]
    # A recorded group being rebuilt (no pod observed) still counts as disrupted.
    for name in [n for n in cluster.pods() if n.startswith("llama-1-")]:
        cluster.remove(name)
    (status,) = budget_statuses(state_of(ms, cluster), strategy, frozenset({G1}))
    assert (status.ready, status.disrupted, status.allowed) == (2, 1, 0)


def test_target_of_reads_labels_and_readiness() -> None:
    _, cluster = make({"minAvailable": 1}, replicas=1)
    pod = cluster.pods()["llama-0-prefill-0-0"]
    found = target_of(pod)
    assert found is not None
    assert (found.group, found.role, found.role_id, found.pod_ready) == ("llama-0", "prefill", "prefill-0", True)
    assert target_of({"metadata": {"name": "x", "labels": {}}}) is None
    pod["metadata"]["deletionTimestamp"] = format_time(NOW)
    terminating = target_of(pod)
    assert terminating is not None and not terminating.pod_ready


# -- the DisruptionAllowed condition ---------------------------------------------------------------------------------


def _status(group: str | None, role: str | None, ready: int, minimum: int, disrupted: int = 0) -> BudgetStatus:
    level = "Role" if role else "ServingGroup"
    return BudgetStatus(level, group, role, ready, 3, minimum, disrupted, max(0, ready - minimum))


@pytest.mark.parametrize(
    ("level", "statuses", "expected"),
    [
        (
            "ServingGroup",
            [_status(None, None, 3, 2)],
            (
                True,
                "SufficientReady",
                "ServingGroup level: 3 of 3 ServingGroups ready, minAvailable 2: 1 eviction allowed",
            ),
        ),
        (
            "ServingGroup",
            [_status(None, None, 2, 2, disrupted=1)],
            (
                False,
                "InsufficientReady",
                "ServingGroup level: 2 of 3 ServingGroups ready (1 disrupted), minAvailable 2: 0 evictions allowed",
            ),
        ),
        ("ServingGroup", [], (True, "NoProtectedUnits", "ServingGroup level: no ServingGroup to protect")),
        ("Role", [], (True, "NoProtectedUnits", "Role level: no instance of a protected role to protect")),
        (
            "Role",
            [_status("llm-0", "prefill", 2, 1), _status("llm-1", "prefill", 1, 1, disrupted=1)],
            (
                False,
                "InsufficientReady",
                "Role level: 1 of 2 role budgets allow an eviction; blocked: "
                "llm-1 prefill: 1/3 ready, 1 disrupted, minAvailable 1, 0 allowed",
            ),
        ),
        (
            "Role",
            [_status("llm-0", "prefill", 2, 1)],
            (
                True,
                "SufficientReady",
                "Role level: 1 of 1 role budgets allow an eviction; budgets: "
                "llm-0 prefill: 2/3 ready, minAvailable 1, 1 allowed",
            ),
        ),
    ],
)
def test_budget_condition(level: Any, statuses: list[BudgetStatus], expected: tuple[bool, str, str]) -> None:
    assert budget_condition(level, statuses) == expected


def test_budget_condition_lists_at_most_a_dozen_budgets() -> None:
    statuses = [_status(f"llm-{g}", "prefill", 1, 1) for g in range(20)]
    _, _, message = budget_condition("Role", statuses)
    assert message.count("llm-") == 12 and message.endswith("; and 8 more")


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ("llama-0-prefill-0-0", ("llama-0", "prefill", "prefill-0")),
        ("llama-12-decode-3-1", ("llama-12", "decode", "decode-3")),
        ("llama-1-pre-fill-2-0", ("llama-1", "pre-fill", "pre-fill-2")),  # a role name with a dash
        ("llama-x-prefill-0-0", None),
        ("llama-0-other-0-0", None),
        ("llama-0-prefill-0", None),
        ("llama-0-prefill-00-0", None),  # not a name the controller gives
        ("other-0-prefill-0-0", None),
    ],
)
def test_a_pod_not_found_is_placed_by_its_name(pod: str, expected: tuple[str, str, str] | None) -> None:
    found = target_by_name("llama", ["prefill", "decode", "pre-fill"], pod)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert (found.group, found.role, found.role_id) == expected
        assert (found.pod_name, found.pod_uid, found.pod_ready) == (pod, "", False)


def test_a_short_ttl_never_ends_a_record_while_it_is_held() -> None:
    ms, cluster = make({"minAvailable": 2})
    strategy = ms.spec.rollout_strategy.eviction_strategy  # type: ignore[union-attr]
    assert strategy is not None
    state = state_of(ms, cluster)
    first = evaluate(state, strategy, target(cluster, "llama-0-prefill-0-0"), {}, now=NOW, ttl=1)
    assert first.entries[G0].expires_at == NOW + IN_FLIGHT_SECONDS
    again = evaluate(state, strategy, target(cluster, "llama-0-prefill-0-0"), dict(first.entries), now=NOW + 5, ttl=1)
    assert again.entries[G0].expires_at == NOW + 5 + IN_FLIGHT_SECONDS


def test_the_next_change_is_an_expiry_or_the_end_of_a_hold() -> None:
    entries = {G0: TrackerEntry(NOW + 60, "u", "p", (), NOW + 17), G1: TrackerEntry(NOW + 30, "v", "q")}
    assert next_expiry(entries) == NOW + 30
    assert next_expiry(entries, NOW) == NOW + 17
    assert next_expiry(entries, NOW + 20) == NOW + 30  # the hold is over


def test_a_tracker_of_another_uid_records_nothing_for_this_modelserving() -> None:
    entries = {G0: TrackerEntry(NOW + 30, "u", "p")}
    configmap = {
        "metadata": {"name": tracker_name("llama"), "ownerReferences": [{"uid": "old", "controller": True}]},
        "data": {ENTRIES_KEY: render_entries(entries)},
    }
    assert tracker_entries(configmap, "old") == entries
    assert tracker_entries(configmap, "new") == {}
    assert tracker_entries(configmap) == entries  # not checked
    assert disrupted_units(configmap, NOW, "new") == frozenset()
    assert disrupted_units(configmap, NOW, "old") == {G0}
