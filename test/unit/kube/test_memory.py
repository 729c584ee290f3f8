"""The in-memory store's semantics that FakeKube's tests do not reach: graceful pod deletion, clock and UIDs,
listeners, and that it needs no HTTP library."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from kthena_py.kube.errors import Conflict
from kthena_py.kube.memory import Change, MemoryStore
from kthena_py.kube.resources import PODS

_PROBE = "import sys, kthena_py.kube.memory; print([m for m in ('aiohttp', 'kubernetes_asyncio') if m in sys.modules])"


def _pod(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def test_a_graceful_pod_delete_marks_it_until_deleted_with_zero() -> None:
    store = MemoryStore(clock=lambda: "2030-01-01T00:00:00Z")
    uid = store.create(PODS, _pod("p"))["metadata"]["uid"]
    marked = store.delete(PODS, "p", "ns", uid=uid, grace_period_seconds=30)
    assert marked["metadata"]["deletionTimestamp"] == "2030-01-01T00:00:00Z"
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert store.delete(PODS, "p", "ns", grace_period_seconds=30) == marked  # the grace period runs on
    store.delete(PODS, "p", "ns", grace_period_seconds=0)
    assert store.peek(PODS, "p", "ns") is None


def test_clock_uids_and_listeners() -> None:
    numbers = itertools.count(1)
    store = MemoryStore(clock=lambda: "T", uids=lambda: f"uid-{next(numbers)}")
    seen: list[Change] = []
    stop = store.subscribe(seen.append)
    created = store.create(PODS, _pod("p"))
    assert created["metadata"]["uid"] == "uid-1" and created["metadata"]["creationTimestamp"] == "T"
    with pytest.raises(Conflict):
        store.delete(PODS, "p", "ns", uid="uid-2")
    stop()
    store.delete(PODS, "p", "ns", uid="uid-1")
    assert [(c.type, c.revision) for c in seen] == [("ADDED", 1)]
    assert [kind for kind, _ in store.changes(PODS)] == ["ADDED", "DELETED"]


def test_the_store_imports_no_http_library() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
