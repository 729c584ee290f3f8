"""The thin apply layer of the ModelBooster controller: executes a child plan and writes the status.

Guarantees:

* Children are written with server-side apply under the field manager :data:`FIELD_MANAGER`, forced, so this
  controller owns exactly the fields it renders and fields others own (a replica count set through the scale
  subresource, labels added by users) stay theirs. An update carries the cached ``resourceVersion``, so a
  decision made on a stale cache fails with a conflict and is retried instead of overwriting a newer change.
* A create first reads the object live: if it exists (the cache lags, or someone else made it) nothing is
  written and the informer's event brings the next reconcile. A foreign object is never adopted.
* Deletions carry the planned UID; NotFound and precondition conflicts are success.
* Every write is followed by a Normal Event (``<Kind>Created``/``Updated``/``Deleted``); a failed one by a
  Warning ``<Kind>Failed`` Event and :class:`ChildWriteError`, after which nothing else is written.
* Read your own writes: before returning, the applier waits (bounded) until the cache shows its writes.
* The status is written (merge patch of the ``status`` subresource, carrying the booster's UID) only when
  it differs from the cached one (:meth:`~kthena_py.runtime.statuswrite.StatusWriter.replace`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from kthena_py.kube import ApiError, Conflict, KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, controller_ref, is_deleting, meta, resource_version_of, uid_of
from kthena_py.kube.resources import ResourceType
from kthena_py.plan.modelbooster import ChildPlan, Remove, Write
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventSink
from kthena_py.runtime.statuswrite import StatusWriter

from ..resources import MODELBOOSTERS
from .metrics import CHILD_WRITES
from .observe import CHILD_TYPES

__all__ = ["FIELD_MANAGER", "ChildApplier", "ChildWriteError", "write_status"]

FIELD_MANAGER = "kthena-py-modelbooster"

log = structlog.get_logger("kthena_py.modelbooster.apply")


class ChildWriteError(ApiError):
    """A child could not be written; :attr:`message` says which and why (for the ``Failed`` condition).

    An :class:`~kthena_py.kube.ApiError`, so the controller retries it with backoff like any failed write.
    """

    def __init__(self, message: str) -> None:
        super().__init__(0, "ChildWriteFailed", message)


@dataclass(frozen=True)
class _Written:
    rt: ResourceType
    name: str
    namespace: str
    uid: str
    resource_version: str
    gone: bool

    def observed(self, cache: SharedCache) -> bool:
        cached = cache.get(self.rt, self.name, self.namespace)
        if self.gone:
            return cached is None or uid_of(cached) != self.uid or is_deleting(cached)
        if cached is None or uid_of(cached) != self.uid:
            return False
        try:
            return int(resource_version_of(cached)) >= int(self.resource_version)
        except ValueError:
            return resource_version_of(cached) == self.resource_version


class ChildApplier:
    """Applies child plans for the ModelBooster reconciler."""

    def __init__(self, client: KubeApi, recorder: EventSink, cache: SharedCache, *, sync_timeout: float = 10.0) -> None:
        self.client = client
        self.recorder = recorder
        self.cache = cache
        self.sync_timeout = sync_timeout

    async def apply(self, booster: KubeObject, plan: ChildPlan) -> int:
        """Execute ``plan`` for the cached ``booster``; return the number of writes.

        Raises:
            ChildWriteError: A write failed (earlier writes stand; later ones were not attempted).
        """
        namespace = str(meta(booster).get("namespace", ""))
        written: list[_Written] = []
        try:
            for step in plan.steps:
                if isinstance(step, Write):
                    await self._write(booster, step, namespace, written)
                else:
                    await self._remove(booster, step, namespace, written)
        finally:
            await self._await_observed(written)
        return len(written)

    def _failed(self, booster: KubeObject, kind: str, action: str, name: str, exc: ApiError) -> ChildWriteError:
        CHILD_WRITES.labels(kind, action, "error").inc()
        message = f"cannot {action} {kind} {name}: {exc.message or exc}"
        self.recorder.event(booster, "Warning", f"{kind}Failed", message)
        return ChildWriteError(message)

    async def _write(self, booster: KubeObject, step: Write, namespace: str, written: list[_Written]) -> None:
        rt = CHILD_TYPES[step.kind]
        action = "create" if step.create else "update"
        try:
            if step.create:
                try:
                    live = await self.client.get(rt, step.name, namespace)
                except NotFound:
                    pass
                else:
                    owner = controller_ref(live)
                    if owner is None or owner.get("uid") != meta(booster).get("uid"):
                        CHILD_WRITES.labels(step.kind, action, "error").inc()
                        message = f"{step.kind} {step.name} already exists and is not controlled by this ModelBooster"
                        self.recorder.event(booster, "Warning", f"{step.kind}Failed", message)
                        raise ChildWriteError(message)
                    log.info("child exists already; waiting for the cache", kind=step.kind, child=step.name)
                    return
            obj = await self.client.apply(rt, step.body, field_manager=FIELD_MANAGER, namespace=namespace)
        except ChildWriteError:
            raise  # already reported (a foreign object of the child's name)
        except ApiError as exc:
            raise self._failed(booster, step.kind, action, step.name, exc) from exc
        CHILD_WRITES.labels(step.kind, action, "success").inc()
        md = meta(obj)
        written.append(
            _Written(rt, step.name, namespace, str(md.get("uid", "")), str(md.get("resourceVersion", "")), False)
        )
        verb = "created" if step.create else "updated"
        self.recorder.event(booster, "Normal", f"{step.kind}{verb.capitalize()}", f"{step.kind} {step.name} {verb}")

    async def _remove(self, booster: KubeObject, step: Remove, namespace: str, written: list[_Written]) -> None:
        rt = CHILD_TYPES[step.kind]
        try:
            await self.client.delete(rt, step.name, namespace, uid=step.uid or None, propagation_policy="Background")
        except (NotFound, Conflict):
            return
        except ApiError as exc:
            raise self._failed(booster, step.kind, "delete", step.name, exc) from exc
        CHILD_WRITES.labels(step.kind, "delete", "success").inc()
        written.append(_Written(rt, step.name, namespace, step.uid, "", True))
        self.recorder.event(booster, "Normal", f"{step.kind}Deleted", f"{step.kind} {step.name} deleted: {step.why}")

    async def _await_observed(self, written: list[_Written]) -> None:
        objects = [(w.rt, w.name, w.namespace) for w in written]
        if not await self.cache.wait_for(
            objects, lambda: all(w.observed(self.cache) for w in written), self.sync_timeout
        ):
            log.warning(
                "cache did not reflect our writes in time",
                pending=[w.name for w in written if not w.observed(self.cache)],
            )


async def write_status(client: KubeApi, booster: KubeObject, status: Mapping[str, Any]) -> bool:
    """Write ``status`` if it differs from the cached booster's; return whether a write happened.

    Raises:
        ApiError: The write failed (other than the booster being gone).
    """
    return (await StatusWriter(client, MODELBOOSTERS, FIELD_MANAGER).replace(booster, status)).written
