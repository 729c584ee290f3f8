"""The ``ModelCached`` condition of a ModelServing that names a ModelCache, and the Events of its transitions.

Guarantees:

* :func:`decide_model_cached` is pure: the gate (:mod:`kthena_py.plan.modelserving.core.modelcache`), the
  previous condition, the generation and ``now`` in; the condition and at most one Event out.
* ``True`` / ``ModelCacheReady`` while the gate is open; ``False`` with the gate's reason otherwise
  (``WaitingForModelCache``, ``ModelCacheFailed`` carrying the cache's Degraded reason and message,
  ``ModelCacheMountConflict``). ``lastTransitionTime`` moves only when the status changes, so an unchanged
  decision is the cached condition exactly (no write).
* Events come from transitions, never from repetition: a ``Warning`` with the condition's reason when it becomes
  ``ModelCacheFailed`` or ``ModelCacheMountConflict`` (or its message changes while it is), a ``Normal``
  ``ModelCacheReady`` when it becomes True after having been False. The caller records it only after the write
  that makes the transition succeeded, so a restart on a converged cluster records nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass

from kthena_py.api.common import Condition
from kthena_py.plan.modelserving.core.modelcache import CacheGate
from kthena_py.plan.modelserving.core.types import KubeObject, PlannedEvent
from kthena_py.plan.modelserving.groups.status import set_condition
from kthena_py.vocab.conditions import MODEL_CACHED, REASON_MODEL_CACHE_CONFLICT, REASON_MODEL_CACHE_FAILED

__all__ = ["ModelCachedDecision", "decide_model_cached"]

_WARNINGS = (REASON_MODEL_CACHE_FAILED, REASON_MODEL_CACHE_CONFLICT)


@dataclass(frozen=True)
class ModelCachedDecision:
    """The condition to hold and the Event of its transition (if any)."""

    condition: KubeObject
    event: PlannedEvent | None = None


def decide_model_cached(
    gate: CacheGate, previous: Condition | None, generation: int, now: float
) -> ModelCachedDecision:
    """Decide the ``ModelCached`` condition (see the module docstring).

    Args:
        gate: The ModelServing's gate.
        previous: Its current ``ModelCached`` condition, if any.
        generation: The ModelServing's ``metadata.generation`` (the condition's ``observedGeneration``).
        now: The current time (epoch seconds), for a transition.
    """
    condition = set_condition(
        [previous] if previous is not None else None,
        MODEL_CACHED,
        gate.open,
        gate.reason,
        gate.message,
        generation,
        now,
    )
    event: PlannedEvent | None = None
    if gate.reason in _WARNINGS and (
        previous is None or previous.reason != gate.reason or previous.message != gate.message
    ):
        event = PlannedEvent("Warning", gate.reason, gate.message)
    elif gate.open and previous is not None and previous.status != "True":
        event = PlannedEvent("Normal", gate.reason, gate.message)
    return ModelCachedDecision(condition, event)
