"""Why a target has no Ready backend, in the words ``kthena-py status`` uses.

Guarantees:

* The text is built from the ``kthena-py status`` tree (:func:`~kthena_py.plan.modelserving.view.build_view`):
  each distinct reason a pod is not Ready (waiting for GPUs, image pull, crash loop, starting, not ready, ...) with
  how many pods it holds, most pods first (then by text), at most :data:`MAX_REASONS`; then the ModelServing's
  own notes. A ModelServing at zero replicas says so; one without pods says no pod exists yet.
* Never raises: a ModelServing the status tree cannot read is described from its pods' phases alone.
* Pure: ``now`` is passed in; the inputs are not changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kthena_py.plan.modelserving.view import build_view
from kthena_py.plan.modelserving.view.model import StatusView

__all__ = ["MAX_REASONS", "unavailable_reason"]

MAX_REASONS = 3


def _pod_reasons(view: StatusView) -> Counter[str]:
    counts: Counter[str] = Counter()
    for group in view.groups:
        for instance in group.instances:
            for pod in instance.pods:
                if pod.why is not None:
                    counts[pod.why.text] += 1
    return counts


def _fallback(pods: Sequence[Mapping[str, Any]]) -> str:
    phases = Counter(str((p.get("status") or {}).get("phase") or "Pending") for p in pods)
    return ", ".join(f"{count} pod(s) {phase}" for phase, count in sorted(phases.items())) or "no pod exists yet"


def unavailable_reason(
    ms: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]], *, now: float, scale_from_zero: bool
) -> str:
    """Why ``ms`` (with its ``pods``) has no Ready entry pod (see the module docstring)."""
    if ms is None:
        return "the ModelServing no longer exists"
    replicas = (ms.get("spec") or {}).get("replicas", 1)
    if replicas == 0 and not pods:
        if scale_from_zero:
            return "scaled to zero; waking it up"
        return "scaled to zero and not opted in to scale from zero"
    try:
        view = build_view(ms, [dict(p) for p in pods], now=now)
    except (ValueError, TypeError, KeyError):
        return _fallback(pods)
    counts = _pod_reasons(view)
    ranked = sorted(((n, t) for t, n in counts.items() if n), key=lambda item: (-item[0], item[1]))
    parts = [f"{text} ({n} pod{'s' if n != 1 else ''})" for n, text in ranked[:MAX_REASONS]]
    parts.extend(note.text for note in view.notes if note.text not in parts)
    if not parts:
        parts.append("no pod exists yet" if not pods else "no entry pod is Ready yet")
    return "; ".join(parts)
