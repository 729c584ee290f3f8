"""Where the autoscaler keeps its state between passes: memory, checkpointed to an annotation.

State of one policy, per scaling unit (``homogeneous``, ``heterogeneous`` or ``role/<name>``):

* the **scaling history** (recommendations for the stabilization windows, replica counts applied for the rate
  limits, the end of panic mode): kept in memory and **checkpointed** to the AutoscalingPolicy annotation
  :data:`HISTORY_ANNOTATION` (compact JSON, a few hundred bytes);
* the **metric windows** and the **previous scrapes** (for counter rates and histogram increases): memory only,
  a cache of observations.

Guarantees:

* Level-based: the annotation is enough to rebuild the history. A fresh process (restart, new leader) loads it;
  so does a running one whenever the annotation differs from every value this process wrote or read (a user
  who deletes the annotation resets the history). A lagging informer cache showing one of our own earlier
  values is recognised and does not roll the memory back.
* Restored histories are re-seeded once with the current replica count at the time of the first pass (as a
  recommendation and as the applied count), because recommendations repeated since the last checkpoint are not
  in it: after a restart, no scale-down happens before one ``scaleDown.stabilizationWindow`` has passed, rate
  limits and panic mode continue from the checkpoint. With no usable annotation the planners seed an empty
  history the same way.
* Writes are rare: a checkpoint is due only when the history changed in substance (the sequence of
  recommendation values, the applied counts or the panic end), never merely because a repeated recommendation got
  a newer time; so a policy whose load and replicas are steady makes no writes at all once its last change has
  left the longest behaviour window.
* A checkpoint is written only after the pass's scaling patch succeeded (the caller's duty); a failed
  checkpoint write is retried by the next pass (it is still due).
* Degraded behaviour when the memory is lost (restart): metric windows restart empty, so the first pass
  averages only its own sample; counters and histograms have no value for one pass (they need two scrapes).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kthena_py.kube.objects import KubeObject, annotations_of, name_of, namespace_of, uid_of
from kthena_py.plan.autoscaling import MetricWindow, ScalingHistory, WindowState
from kthena_py.vocab.labels import AUTOSCALING_HISTORY

from .collector import ScrapeMemory

__all__ = ["HISTORY_ANNOTATION", "HistoryStore", "PolicyMemory", "decode_history", "encode_history"]

HISTORY_ANNOTATION = AUTOSCALING_HISTORY
_VERSION = 1
_MAX_ACCEPTED = 16


def _round(value: float) -> float:
    return round(value, 3)


def _history_data(history: ScalingHistory) -> dict[str, Any]:
    data: dict[str, Any] = {
        "recommendations": [[_round(t), v] for t, v in history.recommendations],
        "replicas": [[_round(t), v] for t, v in history.replicas],
    }
    if history.panic_until is not None:
        data["panicUntil"] = _round(history.panic_until)
    return data


def encode_history(histories: Mapping[str, ScalingHistory]) -> str:
    """Serialise per-unit histories for :data:`HISTORY_ANNOTATION` (sorted keys, times in ms precision)."""
    units = {unit: _history_data(h) for unit, h in sorted(histories.items()) if not h.empty}
    return json.dumps({"version": _VERSION, "units": units}, sort_keys=True, separators=(",", ":"))


def decode_history(text: str | None) -> dict[str, ScalingHistory]:
    """Read the annotation; anything missing or malformed gives no history (the planners then seed one)."""
    if not text:
        return {}
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(data.get("units"), dict):
            return {}
        out = {}
        for unit, raw in data["units"].items():
            state = WindowState.from_dict({"version": 1, "history": raw})
            out[str(unit)] = state.history
        return out
    except (ValueError, TypeError, AttributeError):
        return {}


def _substance(histories: Mapping[str, ScalingHistory]) -> str:
    """What a checkpoint must preserve: values and applied counts, not the age of a repeated recommendation."""
    units = {
        unit: {
            "recommendations": [v for _, v in h.recommendations],
            "replicas": [[_round(t), v] for t, v in h.replicas],
            "panicUntil": None if h.panic_until is None else _round(h.panic_until),
        }
        for unit, h in sorted(histories.items())
        if not h.empty
    }
    return json.dumps(units, sort_keys=True)


@dataclass
class PolicyMemory:
    """Everything the autoscaler remembers about one policy (see the module docstring).

    Attributes:
        uid: UID of the policy (a re-created policy of the same name starts afresh).
        units: Window state per scaling unit.
        scrapes: Previous scrapes per scaling unit.
        restored: Units whose history was just loaded from the annotation (re-seeded on their next pass).
        accepted: Annotation values that agree with this memory (written or read by this process).
        last_written: The newest annotation value this process wrote.
        checkpointed: The substance of the last checkpoint.
    """

    uid: str = ""
    units: dict[str, WindowState] = field(default_factory=dict)
    scrapes: dict[str, ScrapeMemory] = field(default_factory=dict)
    restored: set[str] = field(default_factory=set)
    accepted: set[str | None] = field(default_factory=set)
    last_written: str | None = None
    checkpointed: str = ""


class HistoryStore:
    """Per-policy memories of one controller, keyed by policy namespace and name."""

    def __init__(self) -> None:
        self._policies: dict[tuple[str, str], PolicyMemory] = {}

    def __len__(self) -> int:
        return len(self._policies)

    def forget(self, namespace: str, name: str) -> None:
        """Drop the memory of a deleted policy (or of one another controller now handles)."""
        self._policies.pop((namespace, name), None)

    def forget_namespaces(self, leaving: Callable[[str], bool]) -> None:
        """Drop the memories of the policies in the namespaces ``leaving`` accepts (another replica has them)."""
        for key in [key for key in self._policies if leaving(key[0])]:
            del self._policies[key]

    def open(self, obj: KubeObject) -> PolicyMemory:
        """Return the memory of the cached policy ``obj``, (re)loading the history from its annotation if needed."""
        uid = uid_of(obj)
        key = (namespace_of(obj), name_of(obj))
        raw = annotations_of(obj).get(HISTORY_ANNOTATION)
        memory = self._policies.get(key)
        if memory is not None and memory.uid != uid:
            memory = None
        if memory is not None and raw in memory.accepted:
            if raw is not None and raw == memory.last_written:
                memory.accepted = {raw}  # the cache has caught up: older values can no longer appear
            return memory
        histories = decode_history(raw)
        fresh = PolicyMemory(uid=uid)
        if memory is not None:  # the annotation changed behind our back: keep the observations, not the history
            fresh.scrapes = memory.scrapes
            for unit, state in memory.units.items():
                fresh.units[unit] = WindowState(state.metrics, ScalingHistory())
        for unit, history in histories.items():
            metrics = fresh.units[unit].metrics if unit in fresh.units else MetricWindow()
            fresh.units[unit] = WindowState(metrics, history)
        fresh.restored = set(histories)
        fresh.accepted = {raw}
        fresh.checkpointed = _substance(histories)
        self._policies[key] = fresh
        return fresh

    @staticmethod
    def state(memory: PolicyMemory, unit: str, now: float, current: int, horizon: float) -> WindowState:
        """Return the unit's state for the pass at ``now`` (re-seeding a restored history once)."""
        state = memory.units.get(unit) or WindowState()
        if unit in memory.restored:
            memory.restored.discard(unit)
            if not state.history.empty:
                state = WindowState(state.metrics, state.history.record(now, current, current, horizon))
        return state

    @staticmethod
    def retain_units(memory: PolicyMemory, units: Iterable[str]) -> None:
        """Forget units the policy no longer has (a removed role, a changed target type)."""
        keep = set(units)
        for table in (memory.units, memory.scrapes):
            for unit in [u for u in table if u not in keep]:
                del table[unit]
        memory.restored &= keep

    @staticmethod
    def due(memory: PolicyMemory) -> str | None:
        """Return the annotation value to write now, or ``None`` when the checkpoint is current."""
        histories = {unit: state.history for unit, state in memory.units.items()}
        if _substance(histories) == memory.checkpointed:
            return None
        return encode_history(histories)

    @staticmethod
    def written(memory: PolicyMemory, value: str) -> None:
        """Record that ``value`` was written to the annotation."""
        memory.checkpointed = _substance(decode_history(value))
        memory.last_written = value
        if len(memory.accepted) >= _MAX_ACCEPTED:
            memory.accepted = set()
        memory.accepted.add(value)
