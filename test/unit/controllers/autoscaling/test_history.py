"""The history checkpoint: encoding, substance-only writes, cache lag, user resets, restart seeding."""

from __future__ import annotations

import json
from typing import Any

from kthena_py.controllers.autoscaling.history import (
    HISTORY_ANNOTATION,
    HistoryStore,
    decode_history,
    encode_history,
)
from kthena_py.plan.autoscaling import ScalingHistory, WindowState

from .conftest import policy


def obj(annotation: str | None = None, uid: str = "uid-p") -> dict[str, Any]:
    o = policy("p", {})
    o["metadata"]["uid"] = uid
    if annotation is not None:
        o["metadata"]["annotations"] = {HISTORY_ANNOTATION: annotation}
    return o


def history(*recs: tuple[float, int], replicas: tuple[tuple[float, int], ...] = ((0.0, 1),)) -> ScalingHistory:
    return ScalingHistory(tuple(recs), replicas, None)


def test_round_trip_and_malformed() -> None:
    h = ScalingHistory(((1.0004, 3), (2.0, 5)), ((1.0, 3),), 9.5)
    text = encode_history({"homogeneous": h, "empty": ScalingHistory()})
    assert json.loads(text)["units"].keys() == {"homogeneous"}
    back = decode_history(text)["homogeneous"]
    assert back.recommendations == ((1.0, 3), (2.0, 5)) and back.replicas == ((1.0, 3),) and back.panic_until == 9.5
    for bad in (None, "", "{", "[]", '{"version": 2, "units": {}}', '{"version": 1, "units": {"x": {"replicas": 3}}}'):
        assert decode_history(bad) == {}


def test_checkpoint_only_on_substance() -> None:
    store = HistoryStore()
    memory = store.open(obj())
    assert store.due(memory) is None
    memory.units["u"] = WindowState(history=history((10.0, 3)))
    first = store.due(memory)
    assert first is not None
    store.written(memory, first)
    # The same recommendation again, later: only its time moved, nothing to write.
    memory.units["u"] = WindowState(history=history((25.0, 3)))
    assert store.due(memory) is None
    memory.units["u"] = WindowState(history=history((25.0, 3), (40.0, 4)))
    assert store.due(memory) is not None
    memory.units["u"] = WindowState(history=history((25.0, 3), replicas=((0.0, 1), (40.0, 3))))
    assert store.due(memory) is not None


def test_lagging_cache_keeps_memory_and_external_change_reloads() -> None:
    store = HistoryStore()
    memory = store.open(obj())
    memory.units["u"] = WindowState(history=history((10.0, 3)))
    value = store.due(memory)
    assert value is not None
    store.written(memory, value)
    # The cache still shows the object before our write: memory is kept.
    assert store.open(obj()) is memory
    # The cache caught up.
    assert store.open(obj(value)) is memory
    # A user deletes the annotation: the history is reset (observations kept).
    reset = store.open(obj())
    assert reset is not memory
    assert reset.units["u"].history.empty


def test_fresh_process_restores_and_reseeds_once() -> None:
    text = encode_history({"u": history((10.0, 5), replicas=((0.0, 5),))})
    store = HistoryStore()
    memory = store.open(obj(text))
    state = store.state(memory, "u", 100.0, 5, 300.0)
    assert state.history.recommendations == ((100.0, 5),)  # seeded: no scale-down for one window from now
    again = store.state(memory, "u", 115.0, 5, 300.0)
    assert again.history == ScalingHistory(((10.0, 5),), ((0.0, 5),), None)  # the seed is not re-applied
    # A re-created policy (new UID) starts afresh.
    assert store.open(obj(text, uid="other")) is not memory


def test_retain_units() -> None:
    store = HistoryStore()
    memory = store.open(obj())
    memory.units.update({"role/a": WindowState(), "role/b": WindowState()})
    memory.scrapes["role/b"] = {}
    store.retain_units(memory, ["role/a"])
    assert set(memory.units) == {"role/a"} and memory.scrapes == {}
