"""The per-pod adapter planner: table cases for each rule, and properties over random pods."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_py.plan.adapters.desired import Adapter
from kthena_py.plan.adapters.endpoint import ENGINE, SIDECAR, LoadEndpoint, expected_root, output_dir_of
from kthena_py.plan.adapters.plan import (
    INTENT_GRACE_SECONDS,
    INTENT_POLL_SECONDS,
    LOAD_TIMEOUT_SECONDS,
    Failure,
    IntentState,
    PodPlan,
    intent_state,
    plan_pod,
    retry_delay,
)
from kthena_py.plan.adapters.pods import LoadIntent, PodView

FIN = Adapter("fin", "hf://acme/fin")
LAW = Adapter("law", "s3://b/law")
FIN2 = Adapter("fin", "hf://acme/fin-v2")
SIDE = LoadEndpoint(SIDECAR, 8100)
NOW = 1000.0


def pod(**kw: object) -> PodView:
    base = PodView("p", "uid", "127.100.0.1", ready=True, restarts=0, recorded_restarts=0)
    return replace(base, **kw)  # type: ignore[arg-type]


def test_retry_delay_doubles_up_to_the_cap() -> None:
    assert [retry_delay(n) for n in range(0, 5)] == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert retry_delay(9) == 256.0 and retry_delay(10) == 300.0 and retry_delay(1000) == 300.0


def test_a_fresh_ready_pod_needs_the_inventory_before_loading() -> None:
    plan = plan_pod([FIN, LAW], SIDE, pod(), now=NOW)
    assert plan.needs_inventory and plan.loads == (FIN, LAW) and plan.missing == ("fin", "law")
    plan = plan_pod([FIN, LAW], SIDE, pod(), now=NOW, inventory={}, probed=True)
    assert not plan.needs_inventory and plan.loads == (FIN, LAW) and plan.unloads == ()


def test_a_failed_probe_lets_the_loads_go() -> None:
    plan = plan_pod([FIN], SIDE, pod(), now=NOW, inventory=None, probed=True)
    assert plan.loads == (FIN,) and not plan.needs_inventory


@pytest.mark.parametrize(
    ("labels", "desired", "loads", "unloads", "loaded"),
    [
        ({"fin": FIN.digest}, [FIN], (), (), ("fin",)),
        ({"fin": FIN.digest, "law": LAW.digest}, [FIN], (), ("law",), ("fin",)),
        ({"fin": FIN.digest}, [FIN2], (FIN2,), ("fin",), ()),
        ({}, [], (), (), ()),
        ({"law": LAW.digest}, [], (), ("law",), ()),
    ],
)
def test_labels_decide_what_is_loaded(
    labels: dict[str, str],
    desired: list[Adapter],
    loads: tuple[Adapter, ...],
    unloads: tuple[str, ...],
    loaded: tuple[str, ...],
) -> None:
    plan = plan_pod(desired, SIDE, pod(labels=labels), now=NOW, inventory={}, probed=True)
    assert (plan.loads, plan.unloads, plan.loaded) == (loads, unloads, loaded)
    assert plan.complete == (not loads)


def test_a_pod_that_is_not_ready_gets_no_engine_call_and_keeps_its_labels() -> None:
    plan = plan_pod([FIN, LAW], SIDE, pod(ready=False, labels={"law": "old"}), now=NOW)
    assert plan.loads == plan.unloads == plan.drop_labels == () and not plan.needs_inventory
    assert plan.missing == ("fin", "law") and not plan.complete


def test_a_restart_drops_labels_and_intents_and_reloads_once_ready() -> None:
    restarted = pod(
        ready=False,
        restarts=1,
        recorded_restarts=0,
        labels={"fin": FIN.digest},
        intents={"law": LoadIntent(LAW.digest, NOW)},
    )
    plan = plan_pod([FIN, LAW], SIDE, restarted, now=NOW)
    assert plan.stale and plan.drop_labels == ("fin",) and plan.drop_intents == ("law",) and plan.writes
    ready = plan_pod([FIN, LAW], SIDE, replace(restarted, ready=True), now=NOW, inventory={}, probed=True)
    assert ready.loads == (FIN, LAW) and ready.unloads == ()


def test_an_adapter_the_engine_lists_with_the_expected_root_is_adopted_not_loaded() -> None:
    inventory = {"fin": output_dir_of(FIN), "law": "/somewhere/else"}
    plan = plan_pod([FIN, LAW], SIDE, pod(), now=NOW, inventory=inventory, probed=True)
    assert plan.adopt == (FIN,) and plan.loads == (LAW,) and plan.unloads == ("law",)
    engine = LoadEndpoint(ENGINE, 8000)
    path = Adapter("fin", "/models/fin")
    assert plan_pod([path], engine, pod(), now=NOW, inventory={"fin": "/models/fin"}, probed=True).adopt == (path,)


def test_a_load_under_way_is_waited_for_then_given_up() -> None:
    waiting = pod(intents={"fin": LoadIntent(FIN.digest, NOW - 10)})
    plan = plan_pod([FIN], SIDE, waiting, now=NOW)
    assert plan.needs_inventory and plan.loads == ()
    plan = plan_pod([FIN], SIDE, waiting, now=NOW, inventory={}, probed=True)
    assert plan.waiting == ("fin",) and plan.loads == () and plan.wake_at == NOW + INTENT_POLL_SECONDS
    done = plan_pod([FIN], SIDE, waiting, now=NOW, inventory={"fin": expected_root(FIN, SIDE)}, probed=True)
    assert done.adopt == (FIN,) and done.drop_intents == ("fin",)
    late = NOW + LOAD_TIMEOUT_SECONDS
    expired = plan_pod([FIN], SIDE, waiting, now=late, inventory={}, probed=True)
    assert expired.loads == (FIN,) and expired.drop_intents == ("fin",)


ME = "me-1"
GRACE = INTENT_GRACE_SECONDS
TIMEOUT = LOAD_TIMEOUT_SECONDS


@pytest.mark.parametrize(
    ("owner", "age", "listed", "expected"),
    [
        # Listed: landed, whoever wrote it and however old.
        ("dead", 1.0, True, IntentState("landed")),
        (ME, TIMEOUT + 1, True, IntentState("landed")),
        # Another (dead) process's intent, not listed: in doubt for the grace, then lost (sent again).
        ("dead", 1.0, False, IntentState("doubt", NOW - 1.0 + GRACE)),
        ("dead", GRACE - 0.001, False, IntentState("doubt", NOW - (GRACE - 0.001) + GRACE)),
        ("dead", GRACE, False, IntentState("lost")),
        ("", GRACE + 5, False, IntentState("lost")),
        # This process's own intent: its request may still be running, so the whole load timeout.
        (ME, GRACE + 5, False, IntentState("doubt", NOW - (GRACE + 5) + TIMEOUT)),
        (ME, TIMEOUT, False, IntentState("lost")),
        # No inventory (the probe failed): nobody can tell, so the load timeout for anyone's.
        ("dead", GRACE + 5, None, IntentState("doubt", NOW - (GRACE + 5) + TIMEOUT)),
        ("dead", TIMEOUT, None, IntentState("lost")),
    ],
)
def test_an_intent_resolves_by_the_inventory_its_age_and_its_writer(
    owner: str, age: float, listed: bool | None, expected: IntentState
) -> None:
    intent = LoadIntent(FIN.digest, NOW - age, owner)
    got = intent_state(intent, listed, now=NOW, me=ME, intent_grace=GRACE, load_timeout=TIMEOUT)
    assert got.state == expected.state
    assert got.until == pytest.approx(expected.until) if expected.until is not None else got.until is None


def test_no_identity_owns_nothing() -> None:
    intent = LoadIntent(FIN.digest, NOW - GRACE, "")
    assert intent_state(intent, False, now=NOW, me="", intent_grace=GRACE, load_timeout=TIMEOUT).state == "lost"


def test_a_dead_managers_intent_never_sent_is_sent_again_after_the_grace_not_the_timeout() -> None:
    view = pod(intents={"fin": LoadIntent(FIN.digest, NOW - GRACE - 1, "dead")})
    first = plan_pod([FIN], SIDE, view, now=NOW, me=ME)
    assert first.needs_inventory and first.loads == ()  # the engine is asked before anything is decided
    plan = plan_pod([FIN], SIDE, view, now=NOW, inventory={}, probed=True, me=ME)
    assert plan.loads == (FIN,) and plan.drop_intents == ("fin",) and plan.waiting == ()
    young = pod(intents={"fin": LoadIntent(FIN.digest, NOW - 5, "dead")})
    wait = plan_pod([FIN], SIDE, young, now=NOW, inventory={}, probed=True, me=ME)
    assert wait.loads == () and wait.waiting == ("fin",) and wait.wake_at == NOW + INTENT_POLL_SECONDS
    listed = plan_pod([FIN], SIDE, young, now=NOW, inventory={"fin": expected_root(FIN, SIDE)}, probed=True, me=ME)
    assert listed.adopt == (FIN,) and listed.loads == () and listed.drop_intents == ("fin",)


def test_an_own_intent_is_waited_for_up_to_the_load_timeout() -> None:
    view = pod(intents={"fin": LoadIntent(FIN.digest, NOW - GRACE - 1, ME)})
    plan = plan_pod([FIN], SIDE, view, now=NOW, inventory={}, probed=True, me=ME)
    assert plan.loads == () and plan.waiting == ("fin",)
    late = plan_pod([FIN], SIDE, view, now=NOW - GRACE - 1 + TIMEOUT, inventory={}, probed=True, me=ME)
    assert late.loads == (FIN,) and late.drop_intents == ("fin",)


def test_a_grace_and_a_timeout_can_be_given() -> None:
    view = pod(intents={"fin": LoadIntent(FIN.digest, NOW - 6, "dead")})
    assert plan_pod([FIN], SIDE, view, now=NOW, inventory={}, probed=True, intent_grace=5).loads == (FIN,)
    assert plan_pod([FIN], SIDE, view, now=NOW, inventory={}, probed=True, intent_grace=10).waiting == ("fin",)
    assert plan_pod([FIN], SIDE, view, now=NOW, inventory={}, probed=True, load_timeout=5).loads == (FIN,)


@pytest.mark.parametrize(
    ("age", "inventory", "unloads", "drop", "wake"),
    [
        (5.0, {}, (), (), NOW + INTENT_POLL_SECONDS),  # in doubt: kept, looked at again
        (5.0, None, (), (), NOW + INTENT_POLL_SECONDS),  # in doubt, no inventory: kept
        (GRACE + 1, {}, (), ("gone",), None),  # lost: dropped, nothing to unload
        (5.0, {"gone": "/adapters/whatever"}, ("gone",), (), None),  # landed: unloaded, intent kept till then
        (TIMEOUT + 1, {"gone": "/x"}, ("gone",), (), None),  # landed late: still unloaded
    ],
)
def test_an_in_doubt_load_of_a_removed_adapter_resolves_then_is_unloaded_if_it_landed(
    age: float, inventory: dict[str, str] | None, unloads: tuple[str, ...], drop: tuple[str, ...], wake: float | None
) -> None:
    view = pod(intents={"gone": LoadIntent("x", NOW - age, "dead")})
    plan = plan_pod([FIN], SIDE, view, now=NOW, inventory=inventory, probed=True, me=ME)
    assert plan.unloads == unloads and plan.drop_intents == drop and plan.loads == (FIN,)
    assert plan.wake_at == wake


def test_a_removed_adapters_intent_needs_the_inventory_and_survives_a_pod_not_ready() -> None:
    view = pod(intents={"gone": LoadIntent("x", NOW - GRACE - 1, "dead")})
    assert plan_pod([], SIDE, view, now=NOW, me=ME).needs_inventory
    not_ready = plan_pod([], SIDE, replace(view, ready=False), now=NOW, me=ME)
    assert not_ready.drop_intents == () and not_ready.unloads == ()


def test_a_new_source_waits_for_the_old_sources_load_in_doubt() -> None:
    view = pod(intents={"fin": LoadIntent(FIN.digest, NOW - 5, "dead")})
    doubt = plan_pod([FIN2], SIDE, view, now=NOW, inventory={}, probed=True, me=ME)
    assert doubt.loads == () and doubt.waiting == ("fin",) and doubt.drop_intents == ()
    landed = plan_pod([FIN2], SIDE, view, now=NOW, inventory={"fin": expected_root(FIN, SIDE)}, probed=True, me=ME)
    assert landed.unloads == ("fin",) and landed.loads == (FIN2,)
    lost = plan_pod(
        [FIN2],
        SIDE,
        replace(view, intents={"fin": LoadIntent(FIN.digest, NOW - GRACE, "dead")}),
        now=NOW,
        inventory={},
        probed=True,
        me=ME,
    )
    assert lost.unloads == () and lost.loads == (FIN2,) and lost.drop_intents == ("fin",)


def test_a_failed_unload_of_a_landed_orphan_backs_off() -> None:
    view = pod(intents={"gone": LoadIntent("x", NOW - 5, "dead")})
    failures = {"gone": Failure("x", 1, NOW, "busy")}
    held = plan_pod([], SIDE, view, now=NOW, failures=failures, inventory={"gone": "/r"}, probed=True, me=ME)
    assert held.unloads == () and held.wake_at == NOW + 1.0 and held.drop_intents == ()
    again = plan_pod([], SIDE, view, now=NOW + 1, failures=failures, inventory={"gone": "/r"}, probed=True, me=ME)
    assert again.unloads == ("gone",)


def test_a_failure_holds_the_same_source_until_its_retry_time() -> None:
    failures = {"fin": Failure(FIN.digest, 3, NOW - 1, "nope")}
    plan = plan_pod([FIN], SIDE, pod(), now=NOW, failures=failures, inventory={}, probed=True)
    assert plan.backing_off == ("fin",) and plan.loads == () and plan.wake_at == NOW - 1 + 4.0
    later = plan_pod([FIN], SIDE, pod(), now=NOW + 3, failures=failures, inventory={}, probed=True)
    assert later.loads == (FIN,)
    fixed = plan_pod([FIN2], SIDE, pod(), now=NOW, failures=failures, inventory={}, probed=True)
    assert fixed.loads == (FIN2,)


def test_a_failed_unload_of_a_removed_adapter_backs_off() -> None:
    failures = {"law": Failure(LAW.digest, 1, NOW, "busy")}
    plan = plan_pod([], SIDE, pod(labels={"law": LAW.digest}), now=NOW, failures=failures)
    assert plan.unloads == () and plan.wake_at == NOW + 1.0
    assert plan_pod([], SIDE, pod(labels={"law": LAW.digest}), now=NOW + 1, failures=failures).unloads == ("law",)


_adapters = st.lists(
    st.builds(Adapter, st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["/m/1", "/m/2", "hf://x/3"])),
    max_size=4,
    unique_by=lambda a: a.name,
)
_digests = st.sampled_from([Adapter("x", s).digest for s in ("/m/1", "/m/2", "hf://x/3")])
_pods = st.builds(
    PodView,
    name=st.just("p"),
    uid=st.just("u"),
    ip=st.just("127.100.0.9"),
    ready=st.booleans(),
    restarts=st.integers(0, 2),
    recorded_restarts=st.one_of(st.none(), st.integers(0, 2)),
    labels=st.dictionaries(st.sampled_from(["a", "b", "c", "e"]), _digests, max_size=4),
    intents=st.dictionaries(
        st.sampled_from(["a", "b", "e"]),
        st.builds(LoadIntent, _digests, st.floats(NOW - 600, NOW), st.sampled_from(["", ME, "dead"])),
        max_size=3,
    ),
)
_inventories = st.one_of(
    st.none(), st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["/m/1", "/m/2", "/adapters/zz"]))
)


@given(_adapters, _pods, _inventories, st.booleans(), st.sampled_from([SIDE, LoadEndpoint(ENGINE, 8000)]))
def test_properties(
    desired: list[Adapter], view: PodView, inventory: dict[str, str] | None, probed: bool, endpoint: LoadEndpoint
) -> None:
    plan: PodPlan = plan_pod(desired, endpoint, view, now=NOW, inventory=inventory, probed=probed, me=ME)
    names = {a.name for a in desired}
    # Only Ready pods get engine calls.
    if not view.ready:
        assert plan.loads == plan.unloads == plan.adopt == ()
    # Nothing is both loaded and adopted, nor loaded while a load under way is waited for or backing off.
    loading = {a.name for a in plan.loads}
    assert not loading & {a.name for a in plan.adopt}
    assert not loading & set(plan.waiting) and not loading & set(plan.backing_off)
    # Loads and adoptions are of desired adapters; every desired adapter is accounted for on a Ready pod.
    assert loading <= names and {a.name for a in plan.adopt} <= names
    if view.ready:
        accounted = (
            set(plan.loaded) | loading | {a.name for a in plan.adopt} | set(plan.waiting) | set(plan.backing_off)
        )
        assert accounted == names
    # An adapter the engine lists with its expected root is never loaded again.
    for adapter in desired:
        if inventory is not None and inventory.get(adapter.name) == expected_root(adapter, endpoint):
            assert adapter not in plan.loads
    # A load under way (of any source under that name) is re-sent only once known lost: not listed for longer than
    # the grace when another process wrote it, else past the load timeout.
    stale = view.recorded_restarts is not None and view.recorded_restarts != view.restarts
    for adapter in plan.loads:
        intent = view.intents.get(adapter.name)
        if stale or intent is None or adapter.name in plan.unloads:
            continue  # (an older source's load that landed is unloaded first)
        window = GRACE if intent.owner != ME and inventory is not None else TIMEOUT
        assert NOW - intent.since >= window
    # An intent is dropped only when it is resolved: landed and labelled (adopted), or lost.
    for name in plan.drop_intents:
        intent = view.intents[name]
        adopted = name in {a.name for a in plan.adopt}
        window = GRACE if intent.owner != ME and inventory is not None else TIMEOUT
        assert stale or adopted or NOW - intent.since >= window
    # A landed intent of a name (or source) no longer wanted is unloaded, unless an unload failure holds it.
    wanted = {a.name: a.digest for a in desired}
    if view.ready and not stale and inventory is not None:
        for name, intent in view.intents.items():
            if wanted.get(name) != intent.digest and name in inventory and name not in {a.name for a in plan.adopt}:
                assert name in plan.unloads
    # Unloads are of labelled or listed names that are not wanted as they are.
    for name in plan.unloads:
        assert name in view.labels or (inventory is not None and name in inventory)
    # Loads go only with the inventory read (or its read failed).
    if plan.loads:
        assert inventory is not None or probed or plan.needs_inventory


def test_a_failed_unload_of_an_old_source_holds_the_new_load() -> None:
    failures = {"fin": Failure(FIN.digest, 2, NOW, "busy")}
    view = pod(labels={"fin": FIN.digest})
    plan = plan_pod([FIN2], SIDE, view, now=NOW, failures=failures, inventory={}, probed=True)
    assert plan.unloads == () and plan.loads == () and plan.backing_off == ("fin",) and plan.wake_at == NOW + 2.0
    later = plan_pod([FIN2], SIDE, view, now=NOW + 2, failures=failures, inventory={}, probed=True)
    assert later.unloads == ("fin",) and later.loads == (FIN2,)
