"""The thin apply layer of the ModelCache controller: creates, deletes, the finalizer and the status.

Guarantees:

* Children (Jobs, PodGroups, the claim) are created, never updated: their specs are immutable and their names
  deterministic, so AlreadyExists means the child is there (the cache lagged, or a previous manager made it)
  and is success. Every create carries the field manager :data:`FIELD_MANAGER`.
* A PodGroup is created before its Job, so the Job's pod never waits for a PodGroup that is not there; when the
  PodGroup CRD is not installed (NotFound) the Job is created without it and a warning is logged.
* A refused create records a Warning ``FailedCreate`` Event naming the object and the API server's words and
  raises :class:`ChildWriteError` (an :class:`~kthena_py.kube.ApiError`): the controller engine retries the key
  with its per-key exponential backoff, never in a tight loop. Nothing after the refused write is attempted.
  The reconciler then writes ``Progressing=False``/``FailedCreate`` in the status
  (:func:`~kthena_py.plan.modelcache.refusal.refused_status`) before the error propagates.
* A Job is deleted by name and UID with background propagation (its pods follow); its PodGroup of the same
  name goes with it. NotFound and UID conflicts are success.
* The finalizer is added and removed with a merge patch of ``metadata.finalizers`` that carries the cached
  ``resourceVersion`` (a concurrent change of the list is a Conflict and a retry, never a lost finalizer).
* The status is written only when it differs from the cached one
  (:meth:`~kthena_py.runtime.statuswrite.StatusWriter.replace`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from kthena_py.kube import AlreadyExists, ApiError, Conflict, KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, labels_of, meta
from kthena_py.kube.resources import JOBS, PERSISTENT_VOLUME_CLAIMS, PODGROUPS, ResourceType
from kthena_py.plan.modelcache import DOWNLOAD, Create, Delete
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.statuswrite import StatusWriter
from kthena_py.vocab.conditions import REASON_FAILED_CREATE, REASON_FAILED_DELETE
from kthena_py.vocab.labels import MODEL_CACHE_FINALIZER, MODEL_CACHE_JOB_KIND

from ..resources import MODELCACHES
from .metrics import JOB_WRITES

__all__ = ["FIELD_MANAGER", "ChildWriteError", "apply_changes", "set_finalizer", "write_status"]

FIELD_MANAGER = "kthena-py-modelcache"

log = structlog.get_logger("kthena_py.modelcache.apply")

_TYPES: dict[str, ResourceType] = {
    "Job": JOBS,
    "PodGroup": PODGROUPS,
    "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIMS,
}


class ChildWriteError(ApiError):
    """A child could not be written (already reported as a Warning Event); retried with backoff.

    ``verb`` is the refused write (``create`` or ``delete``).
    """

    def __init__(self, message: str, verb: str) -> None:
        super().__init__(0, "ChildWriteFailed", message)
        self.verb = verb


async def apply_changes(
    client: KubeApi, recorder: EventSink, cache: KubeObject, creates: tuple[Create, ...], deletes: tuple[Delete, ...]
) -> list[str]:
    """Delete, then create, as planned; return what was done (for logs).

    Raises:
        ChildWriteError: A write was refused.
    """
    namespace = str(meta(cache).get("namespace") or "")
    done: list[str] = []
    for step in deletes:
        for rt in (JOBS, PODGROUPS):
            try:
                await client.delete(
                    rt,
                    step.name,
                    namespace,
                    uid=step.uid if rt is JOBS and step.uid else None,
                    propagation_policy="Background",
                )
            except (NotFound, Conflict):
                continue
            except ApiError as exc:
                if rt is PODGROUPS and exc.status == 404:
                    continue  # the PodGroup CRD is not installed
                JOB_WRITES.labels(rt.kind, "delete", "error").inc()
                message = f"cannot delete {rt.kind} {step.name}: {exc.message or exc}"
                recorder.event(cache, "Warning", REASON_FAILED_DELETE, message)
                raise ChildWriteError(message, "delete") from exc
            JOB_WRITES.labels(rt.kind, "delete", "success").inc()
            done.append(f"deleted {rt.kind} {step.name} ({step.why})")
    for create in creates:
        rt = _TYPES[create.kind]
        try:
            await client.create(rt, create.body, namespace, field_manager=FIELD_MANAGER)
        except AlreadyExists:
            continue
        except NotFound:
            if create.kind != "PodGroup":
                raise
            # The PodGroup CRD is not installed: the Job is still created (its pod then waits for Volcano).
            log.warning("PodGroup CRD not installed; Job created without its PodGroup", podgroup=create.name)
            continue
        except ApiError as exc:
            JOB_WRITES.labels(create.kind, "create", "error").inc()
            message = f"cannot create {create.kind} {create.name}: {exc.message or exc}"
            recorder.event(cache, "Warning", REASON_FAILED_CREATE, message)
            raise ChildWriteError(message, "create") from exc
        JOB_WRITES.labels(create.kind, "create", "success").inc()
        done.append(f"created {create.kind} {create.name} ({create.why})")
        if create.kind == "Job":
            kind = labels_of(create.body).get(MODEL_CACHE_JOB_KIND) or DOWNLOAD
            recorder.event(cache, "Normal", "JobCreated", f"{kind} Job {create.name} created ({create.why})")
    return done


async def set_finalizer(client: KubeApi, cache: KubeObject, present: bool) -> KubeObject | None:
    """Add or remove :data:`MODEL_CACHE_FINALIZER`; return the patched object.

    ``None`` when nothing was due or the cache is gone.

    Raises:
        ApiError: The patch failed (Conflict included: the finalizers changed meanwhile).
    """
    md = meta(cache)
    finalizers = [str(f) for f in md.get("finalizers") or []]
    if (MODEL_CACHE_FINALIZER in finalizers) == present:
        return None
    wanted = [*finalizers, MODEL_CACHE_FINALIZER] if present else [f for f in finalizers if f != MODEL_CACHE_FINALIZER]
    body = {"metadata": {"finalizers": wanted, "resourceVersion": md.get("resourceVersion")}}
    try:
        return await client.patch(
            MODELCACHES, str(md.get("name")), body, str(md.get("namespace")), field_manager=FIELD_MANAGER
        )
    except NotFound:
        return None


async def write_status(client: KubeApi, cache: KubeObject, status: Mapping[str, Any]) -> bool:
    """Write ``status`` if it differs from the cached one; return whether a write happened.

    Raises:
        ApiError: The write failed (other than the cache being gone).
    """
    return (await StatusWriter(client, MODELCACHES, FIELD_MANAGER).replace(cache, status)).written
