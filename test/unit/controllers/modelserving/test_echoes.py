"""Own-write echoes: the watch event that shows a reconciler's own write does not wake that reconciler again."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.controllers.modelserving.echoes import OwnWrites
from kthena_py.controllers.modelserving.gang import CONTROLLER, PodGroupReconciler
from kthena_py.kube.resources import PODGROUPS, PODS
from kthena_py.runtime.controller import spec_changed
from kthena_py.runtime.metrics import REGISTRY

from .test_gang import REQUEST, ms_doc, scene


def obj(name: str = "llama-0", rv: str = "7", namespace: str = "ns", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}, "spec": spec}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def skipped(controller: str) -> float:
    return REGISTRY.get_sample_value("kthena_modelserving_echoes_skipped_total", {"controller": controller}) or 0.0


@pytest.mark.parametrize(
    ("event", "passes"),
    [
        (obj(), False),  # the very version written: the echo
        (obj(rv="8"), True),  # a later version (Volcano's status, another writer)
        (obj(name="llama-1"), True),
        (obj(namespace="other"), True),
    ],
)
def test_only_the_version_written_is_held_back(event: dict[str, Any], passes: bool) -> None:
    writes = OwnWrites("test-only")
    writes.remember(PODGROUPS, obj())
    assert writes.passes(PODGROUPS, spec_changed)(None, event) is passes


def test_an_echo_is_held_back_once_and_counted() -> None:
    writes = OwnWrites("test-once")
    before = skipped("test-once")
    writes.remember(PODGROUPS, obj())
    predicate = writes.passes(PODGROUPS, spec_changed)
    assert predicate(None, obj()) is False
    assert predicate(None, obj()) is True  # a relist that shows it again is an ordinary add
    assert skipped("test-once") == before + 1
    assert len(writes) == 0


def test_another_kind_at_the_same_name_and_version_is_not_an_echo() -> None:
    writes = OwnWrites("test-kind")
    writes.remember(PODGROUPS, obj())
    assert writes.passes(PODS, spec_changed)(None, obj()) is True
    assert writes.passes(PODGROUPS, spec_changed)(None, obj()) is False


def test_the_wrapped_predicate_still_decides_everything_else() -> None:
    writes = OwnWrites("test-wrapped")
    writes.remember(PODGROUPS, obj())
    predicate = writes.passes(PODGROUPS, spec_changed)
    unchanged = obj(rv="9", minMember=1)
    assert predicate(unchanged, obj(rv="10", minMember=1)) is False  # status-only: spec_changed says no
    assert predicate(unchanged, obj(rv="11", minMember=2)) is True


def test_writes_are_forgotten_after_the_ttl_and_beyond_the_limit() -> None:
    clock = Clock()
    writes = OwnWrites("test-bounds", ttl=10.0, limit=2, clock=clock)
    writes.remember(PODGROUPS, obj(rv="1"))
    clock.now = 11.0
    assert writes.is_echo(PODGROUPS, obj(rv="1")) is False  # expired: the look happens, as without the filter
    for rv in ("2", "3", "4"):
        writes.remember(PODGROUPS, obj(rv=rv))
    assert len(writes) == 2
    assert writes.is_echo(PODGROUPS, obj(rv="2")) is False  # the oldest went first
    assert writes.is_echo(PODGROUPS, obj(rv="4")) is True


def test_a_write_without_a_resource_version_is_not_remembered() -> None:
    writes = OwnWrites("test-norv")
    writes.remember(PODGROUPS, {"metadata": {"name": "llama-0", "namespace": "ns"}})
    assert len(writes) == 0


async def test_the_gang_reconciler_remembers_the_podgroups_it_creates_as_the_server_answered_them() -> None:
    kube, reconciler = scene(ms_doc(replicas=2))
    assert isinstance(reconciler, PodGroupReconciler)
    await reconciler.reconcile(REQUEST)
    stored = kube.objects(PODGROUPS, "ns")
    assert [o["metadata"]["name"] for o in stored] == ["llama-0", "llama-1"]
    echo = reconciler.own_writes.passes(PODGROUPS, spec_changed)
    before = skipped(CONTROLLER)
    assert [echo(None, o) for o in stored] == [False, False]
    assert skipped(CONTROLLER) == before + 2
    # Volcano's later write of the same PodGroup is another version: it passes to spec_changed as before.
    changed = {**stored[0], "metadata": {**stored[0]["metadata"], "resourceVersion": "999"}, "spec": {"x": 1}}
    assert echo(stored[0], changed) is True
