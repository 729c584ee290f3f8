"""Answers kept once per event: the same as computing them every time, reused only for the very same objects."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.resources import CONFIGMAPS, PODS
from kthena_py.runtime.controller import (
    _Handler,
    _Watch,
    became_ready_only,
    owner_mapper,
    pod_state_changed,
)
from kthena_py.runtime.perevent import once_per_event, once_per_object
from kthena_py.runtime.reconcile import Request


def _pod(phase: str, ready: bool, uid: str = "u1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"a": "b"},
            "ownerReferences": [
                {
                    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
                    "kind": "ModelServing",
                    "name": "ms",
                    "uid": uid,
                    "controller": True,
                }
            ],
        },
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


class _Counting:
    def __init__(self) -> None:
        self.calls = 0

    def pair(self, old: object, new: object) -> tuple[int, int]:
        self.calls += 1
        return (id(old), id(new))

    def one(self, obj: object) -> tuple[int]:
        self.calls += 1
        return (id(obj),)


def test_the_same_objects_are_answered_once() -> None:
    counting = _Counting()
    wrapped = once_per_event(counting.pair)
    old, new = {"v": 1}, {"v": 2}
    first = wrapped(old, new)
    assert wrapped(old, new) is first
    assert counting.calls == 1
    wrapped.forget()
    assert wrapped(old, new) == first
    assert counting.calls == 2


def test_equal_objects_that_are_not_the_same_are_answered_afresh() -> None:
    counting = _Counting()
    wrapped = once_per_event(counting.pair)
    old, new = {"v": 1}, {"v": 2}
    wrapped(old, new)
    wrapped(dict(old), new)
    assert counting.calls == 2
    wrapped(old, dict(new))
    assert counting.calls == 3


def test_an_add_and_a_later_update_of_the_same_object_are_told_apart() -> None:
    counting = _Counting()
    wrapped = once_per_event(counting.pair)
    obj = {"v": 1}
    assert wrapped(None, obj) != wrapped(obj, obj)
    assert counting.calls == 2


objects = st.sampled_from(range(4))


@given(st.lists(st.tuples(st.one_of(st.none(), objects), objects), max_size=40))
def test_wrapped_answers_equal_computed_answers(calls: list[tuple[int | None, int]]) -> None:
    """Any run of calls over a few objects (some equal, never the same) answers as the function does."""
    pool: list[dict[str, Any]] = [{"k": i % 2} for i in range(4)]  # pairs of equal objects

    def fn(old: dict[str, Any] | None, new: dict[str, Any]) -> tuple[int | None, int]:
        return (None if old is None else id(old), id(new))

    wrapped = once_per_event(fn)
    single = once_per_object(lambda o: id(o))
    for a, b in calls:
        old = None if a is None else pool[a]
        assert wrapped(old, pool[b]) == fn(old, pool[b])
        assert single(pool[b]) == id(pool[b])


def test_pod_predicates_answer_as_before_for_each_new_version() -> None:
    pending, running, ready = _pod("Pending", False), _pod("Running", False), _pod("Running", True)
    for _ in range(2):  # the second round reuses the kept answers
        assert pod_state_changed(pending, running)
        assert not pod_state_changed(running, {**running})
        assert became_ready_only(running, ready)
        assert not became_ready_only(pending, running)
    relabelled = {**ready, "metadata": {**ready["metadata"], "labels": {"a": "c"}}}
    assert pod_state_changed(ready, relabelled)
    assert not became_ready_only(running, relabelled)  # the labels moved too


def test_owners_are_mapped_once_for_every_controller_that_owns_through_the_type() -> None:
    assert owner_mapper(MODELSERVINGS) is owner_mapper(MODELSERVINGS)
    assert owner_mapper(MODELSERVINGS) is not owner_mapper(CONFIGMAPS)
    pod = _pod("Running", True)
    requests = owner_mapper(MODELSERVINGS)(pod)
    assert list(requests) == [Request("ns", "ms")]
    assert owner_mapper(MODELSERVINGS)(pod) is requests
    assert list(owner_mapper(CONFIGMAPS)(pod)) == []
    moved = {**pod, "metadata": {**pod["metadata"], "ownerReferences": []}}
    assert list(owner_mapper(MODELSERVINGS)(moved)) == []


class _Queue:
    def __init__(self) -> None:
        self.added: list[Request] = []

    def add(self, key: Request, *, urgent: bool = False) -> None:
        self.added.append(key)

    def add_after(self, key: Request, delay: float, *, retry: bool = True) -> None:
        self.added.append(key)


def test_every_handler_of_one_event_hears_the_shared_answers() -> None:
    """Two controllers owning pods through the same mapper both queue the owner of each event's pod."""
    queues = [_Queue(), _Queue()]
    handlers = [_Handler(_Watch(PODS, owner_mapper(MODELSERVINGS), pod_state_changed), q) for q in queues]
    first, second = _pod("Running", False, uid="u1"), _pod("Running", True, uid="u1")
    pending = _pod("Pending", False)
    other = {**pending, "metadata": {**pending["metadata"], "name": "q", "namespace": "other"}}
    other["metadata"]["ownerReferences"] = [{**pending["metadata"]["ownerReferences"][0], "name": "ms2"}]
    for old, new in ((first, second), (second, other)):
        for h in handlers:
            h.on_update(old, new)
    for q in queues:
        assert q.added == [Request("ns", "ms"), Request("other", "ms2")]
