"""Whether a ModelServing's rollout has finished, read from its status (what ``kthena-py rollout status`` prints).

Guarantees (pure; the same ModelServing object always gives the same answer):

* Nothing counts as finished before the controller has observed the object's generation: ``status.observedGeneration``
  and, when present, the ``UpdateInProgress`` condition's ``observedGeneration`` must both have reached
  ``metadata.generation``.
* Finished (``done``) means either ``UpdateInProgress`` is False with reason ``PartitionReached`` (the partition
  keeps the rest on their revision), or the rollout is complete: ``UpdateInProgress`` is False with reason
  ``RolloutComplete`` or absent (no rollout ever started), and the counters agree: ``currentRevision`` equals
  ``updateRevision`` and ``updatedReplicas`` and ``availableReplicas`` reach ``spec.replicas``.
* Otherwise the message says how far it is (updated and available ServingGroups, live ones when they differ from
  ``spec.replicas``, and the condition's reason and message); ``stalled`` is set while the condition's reason is
  ``UpdateStalled`` (the rollout may still resume).
"""

from __future__ import annotations

from dataclasses import dataclass

from kthena_py.api.modelserving import ModelServing
from kthena_py.plan.modelserving.rollout.rollout import (
    REASON_COMPLETE,
    REASON_PARTITION,
    REASON_STALLED,
    UPDATE_IN_PROGRESS,
)

__all__ = ["Progress", "rollout_progress"]


@dataclass(frozen=True)
class Progress:
    """The state of a rollout, for a person."""

    done: bool
    message: str
    partition: bool = False
    """Finished because the partition was reached (the rest stays on its revision)."""
    stalled: bool = False


def rollout_progress(ms: ModelServing) -> Progress:
    """Read the rollout's progress from a ModelServing (see the module docstring)."""
    name = f'modelserving "{ms.name}"'
    status = ms.status
    generation = ms.generation
    if status is None or (status.observed_generation or 0) < generation:
        return Progress(False, f"Waiting for {name} spec update to be observed...")
    condition = next((c for c in status.conditions or [] if c.type == UPDATE_IN_PROGRESS), None)
    if condition is not None and (condition.observed_generation or 0) < generation:
        return Progress(False, f"Waiting for {name} rollout to be observed by the rollout controller...")
    replicas = ms.spec.replicas
    updated = status.updated_replicas or 0
    available = status.available_replicas or 0
    counts = f"{updated} of {replicas} ServingGroups updated, {available} available"
    if status.replicas is not None and status.replicas != replicas:
        counts += f", {status.replicas} live"
    if condition is not None and condition.status == "False" and condition.reason == REASON_PARTITION:
        return Progress(True, f"partitioned roll out complete: {counts}; {condition.message}", partition=True)
    complete = condition is None or (condition.status == "False" and condition.reason == REASON_COMPLETE)
    consistent = status.current_revision == status.update_revision and updated >= replicas and available >= replicas
    if complete and consistent:
        return Progress(True, f"{name} successfully rolled out ({counts}, revision {status.update_revision})")
    detail = f" ({condition.reason}: {condition.message})" if condition is not None and not complete else ""
    return Progress(
        False,
        f"Waiting for {name} rollout to finish: {counts}{detail}...",
        stalled=condition is not None and condition.reason == REASON_STALLED,
    )
