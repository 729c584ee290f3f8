"""Render a :class:`~kthena_py.plan.modelserving.view.model.StatusView`: a text tree for people, JSON for scripts.

Guarantees:

* Pure and deterministic: the same tree gives the same text; ages are rendered from the tree's ages (relative to
  the ``now`` it was built at), or left out (``ages=False``) for comparisons across runs.
* :func:`render_text` without ``colour`` writes no escape sequence at all; with ``colour`` it only adds ANSI SGR
  codes around words (removing them gives the plain text back). Pod columns are aligned over the whole tree.
  Conditions that report nothing wrong and are not one of ``Available``, ``Progressing``, ``Scheduled`` and
  ``UpdateInProgress`` are left out. A terminating pod's phase reads ``Terminating`` (as in ``kubectl get``). A
  pod's reason follows it on its line; the underlying message (the scheduler's, the kubelet's) on the next line,
  shortened, unless the line above already showed the same one.
* A ModelServing at zero replicas says ``scaled to zero (activator)`` only when the activator would wake it; a
  ModelPool member at zero says ``not resident in ModelPool <name>`` instead (:func:`not_resident_words`): its
  pool swaps it in, the activator never does.
* :func:`render_json` holds every field of the tree (messages in full, ages in seconds) under camelCase keys.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from kthena_py.vocab.conditions import (
    AVAILABLE,
    COORDINATION_BLOCKED,
    DISRUPTION_ALLOWED,
    GANG_FAILURE,
    PROGRESSING,
    REPLICA_FAILURE,
    SCHEDULED,
    UPDATE_IN_PROGRESS,
)
from kthena_py.vocab.labels import ACTIVATOR_SCALED_TO_ZERO
from kthena_py.vocab.pods import PHASE_RUNNING

from .model import BAD_KINDS, ConditionView, GroupView, InstanceView, PodView, StatusView, Why

__all__ = ["format_age", "not_resident_words", "render_json", "render_text", "status_document"]

_ORDER = (AVAILABLE, PROGRESSING, SCHEDULED, UPDATE_IN_PROGRESS, COORDINATION_BLOCKED, DISRUPTION_ALLOWED)
_ALWAYS = frozenset({AVAILABLE, PROGRESSING, SCHEDULED, UPDATE_IN_PROGRESS})
_HEALTHY = {COORDINATION_BLOCKED: "False", DISRUPTION_ALLOWED: "True", REPLICA_FAILURE: "False", GANG_FAILURE: "False"}
_GOOD = {AVAILABLE: "True", SCHEDULED: "True", PROGRESSING: "False", UPDATE_IN_PROGRESS: "False"}
_DETAIL = 140
_TERMINATING = "Terminating"
_SPACE = re.compile(r"\s+")

_RED, _GREEN, _YELLOW, _DIM, _BOLD = "31", "32", "33", "2", "1"


def not_resident_words(pools: tuple[str, ...]) -> str:
    """What the header says of a ModelPool member at zero replicas (``pools``: the pools listing it, not empty)."""
    if len(pools) == 1:
        return f"not resident in ModelPool {pools[0]}"
    return f"not resident in ModelPools {', '.join(pools)}"


def format_age(seconds: float | None) -> str:
    """A duration the way ``kubectl get`` shows ages (``45s``, ``3m20s``, ``17m``, ``5h8m``, ``2d3h``)."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    m, h, d = s // 60, s // 3600, s // 86400
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    return f"{d}d"


def _short(text: str, limit: int = _DETAIL) -> str:
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


class _Painter:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and text else text

    def why(self, why: Why, text: str) -> str:
        return self(text, _RED if why.kind in BAD_KINDS else _YELLOW)


def _shown(condition: ConditionView) -> bool:
    if condition.type in _ALWAYS:
        return True
    return _HEALTHY.get(condition.type) != condition.status


def _sorted_conditions(conditions: tuple[ConditionView, ...]) -> list[ConditionView]:
    rank = {kind: i for i, kind in enumerate(_ORDER)}
    return sorted(conditions, key=lambda c: (rank.get(c.type, len(rank)), c.type))


class _Text:
    def __init__(self, view: StatusView, colour: bool, ages: bool) -> None:
        self.view = view
        self.paint = _Painter(colour)
        self.ages = ages
        self.lines: list[str] = []
        pods = [pod for group in view.groups for inst in group.instances for pod in inst.pods]
        self.widths = (
            max((len(p.name) for p in pods), default=0),
            max((len(self._phase(p)) for p in pods), default=0),
            max((len(self._revision(p)) for p in pods), default=0),
            max((len(p.node or "-") for p in pods), default=0),
            max((len(format_age(p.age)) for p in pods), default=0),
        )
        self.last_detail = ""

    # -- header ----------------------------------------------------------------------------------------------

    def header(self) -> None:
        v, paint = self.view, self.paint
        ready = paint(f"{v.ready}/{v.desired} ready", _GREEN if v.ready >= v.desired else _YELLOW)
        parts = [f"{paint('ModelServing', _BOLD)} {v.namespace}/{v.name}: {ready}"]
        if v.desired == 0 and v.model_pools:
            parts.append(paint(not_resident_words(v.model_pools), _GREEN))
        elif v.desired == 0 and v.scale_from_zero:
            parts.append(paint(ACTIVATOR_SCALED_TO_ZERO, _GREEN))
        if v.current_revision and v.current_revision != v.update_revision:
            parts.append(f"{v.updated}/{v.desired} updated")
            parts.append(f"revision {v.current_revision} -> {v.update_revision}")
        else:
            parts.append(f"revision {v.update_revision}")
        if v.live != v.desired:
            parts.append(f"{v.live} live")
        if v.queue:
            parts.append(f"queue {v.queue}")
        if self.ages and v.age is not None:
            parts.append(f"age {format_age(v.age)}")
        self.lines.append(", ".join(parts))
        for condition in _sorted_conditions(v.conditions):
            if _shown(condition):
                self.lines.append("  " + self.condition(condition))
        if v.model_cache is not None:
            cache = v.model_cache
            state = paint(cache.phase or "Pending", _GREEN if cache.ready else _YELLOW)
            detail = f" ({cache.progress})" if cache.progress else ""
            self.lines.append(f"  ModelCache {cache.name}: {state}{detail}, {cache.reason}: {cache.message}")
            if cache.model:
                self.lines.append(f"    model: {cache.model}")
        for note in v.notes:
            self.lines.append("  " + paint.why(note, f"! {note.text}"))

    def condition(self, c: ConditionView) -> str:
        good = _GOOD.get(c.type, _HEALTHY.get(c.type)) == c.status
        text = self.paint(f"{c.type}={c.status}", _GREEN if good else _YELLOW) + f" {c.reason}"
        if self.ages and c.age is not None:
            text += f" ({format_age(c.age)})"
        return text + (f": {_short(c.message, 200)}" if c.message else "")

    # -- the tree --------------------------------------------------------------------------------------------

    def tree(self) -> None:
        for i, group in enumerate(self.view.groups):
            last = i == len(self.view.groups) - 1
            self.group(group, "└─ " if last else "├─ ", "   " if last else "│  ")

    def group(self, g: GroupView, head: str, cont: str) -> None:
        paint = self.paint
        state = paint("ready", _GREEN) if g.ready else paint("missing" if g.missing else "not ready", _YELLOW)
        parts = [f"{head}{paint(g.name, _BOLD)}  {state}"]
        if g.roles:
            parts.append(", ".join(f"{role} {ready}/{want}" for role, ready, want in g.roles))
        if g.revision:
            parts.append(f"revision {g.revision}" + (f" ({g.revision_state})" if g.revision_state else ""))
        if g.podgroup_phase:
            parts.append(f"PodGroup {g.podgroup_phase}")
        self.lines.append("  ".join(parts))
        below = cont + ("│  " if g.instances else "   ")
        for note in g.notes:
            if note.kind != "missing":
                self.lines.append(below + paint.why(note, f"! {note.text}"))
        for j, inst in enumerate(g.instances):
            last = j == len(g.instances) - 1
            self.instance(inst, cont + ("└─ " if last else "├─ "), cont + ("   " if last else "│  "))

    def instance(self, inst: InstanceView, head: str, cont: str) -> None:
        paint = self.paint
        count = f"{inst.ready_pods}/{inst.expected_pods} pods ready"
        line = f"{head}{inst.name}  " + (paint(count, _GREEN) if inst.ready else paint(count, _YELLOW))
        self.lines.append(line)
        below = cont + ("│  " if inst.pods else "   ")
        for note in inst.notes:
            if not (note.kind == "missing" and inst.missing):
                self.lines.append(below + paint.why(note, f"! {note.text}"))
        for k, pod in enumerate(inst.pods):
            last = k == len(inst.pods) - 1
            self.pod(pod, cont + ("└─ " if last else "├─ "), cont + ("   " if last else "│  "))

    @staticmethod
    def _phase(pod: PodView) -> str:
        return _TERMINATING if pod.terminating else pod.phase

    @staticmethod
    def _revision(pod: PodView) -> str:
        if pod.revision_state == "old":
            return f"old {pod.revision}"
        return pod.revision_state or "-"

    def pod(self, pod: PodView, head: str, cont: str) -> None:
        paint = self.paint
        name_w, phase_w, rev_w, node_w, age_w = self.widths
        phase_code = _DIM if pod.terminating else _GREEN if pod.phase == PHASE_RUNNING else _YELLOW
        cells = [
            pod.name.ljust(name_w),
            paint(self._phase(pod).ljust(phase_w), phase_code),
            paint("ready    ", _GREEN) if pod.ready else paint("not ready", _YELLOW),
            self._revision(pod).ljust(rev_w),
            (pod.node or "-").ljust(node_w),
        ]
        if self.ages:
            cells.append(format_age(pod.age).rjust(age_w))
        if pod.restarts:
            cells.append(f"{pod.restarts} restarts")
        if pod.adapters:
            cells.append("adapters: " + ", ".join(pod.adapters))
        if pod.adapters_missing:
            cells.append(paint("not loaded: " + ", ".join(pod.adapters_missing), _YELLOW))
        line = head + "  ".join(cells)
        if pod.why is not None:
            line += "  " + paint.why(pod.why, pod.why.text)
        self.lines.append(line.rstrip())
        detail = _short(pod.why.detail) if pod.why is not None and pod.why.detail else ""
        if detail and detail != self.last_detail:
            self.lines.append(cont + "   " + paint(detail, _DIM))
        self.last_detail = detail or self.last_detail


def render_text(view: StatusView, *, colour: bool = False, ages: bool = True) -> str:
    """The status tree as text (see the module docstring); ends with a newline.

    Args:
        view: The tree.
        colour: Add ANSI colours (for a terminal).
        ages: Show ages (``False``: leave every age out, for output compared across runs).
    """
    text = _Text(view, colour, ages)
    text.header()
    text.tree()
    if not view.groups:
        text.lines.append("(no ServingGroups)")
    return "\n".join(text.lines) + "\n"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _document(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {_camel(f.name): _document(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_document(item) for item in value]
    return value


def status_document(view: StatusView) -> dict[str, Any]:
    """The tree as a JSON-compatible dict (camelCase keys; group roles as ``{name, ready, desired}``)."""
    doc: dict[str, Any] = _document(view)
    if view.model_cache is None:
        del doc["modelCache"]  # a ModelServing without a cache reads exactly as before
    if not view.scale_from_zero:
        del doc["scaleFromZero"]
    if not view.model_pools:
        del doc["modelPools"]  # a ModelServing in no pool reads exactly as before
    for group, source in zip(doc["groups"], view.groups, strict=True):
        for instance in group["instances"]:
            for pod in instance["pods"]:
                for key in ("adapters", "adaptersMissing"):
                    if not pod[key]:
                        del pod[key]  # a pod without LoRA adapters reads exactly as before
        group["roles"] = [{"name": n, "ready": r, "desired": d} for n, r, d in source.roles]
    return doc


def render_json(view: StatusView) -> str:
    """The tree as indented JSON (see :func:`status_document`); ends with a newline."""
    return json.dumps(status_document(view), indent=2, ensure_ascii=False) + "\n"
