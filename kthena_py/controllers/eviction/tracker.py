"""Reads and writes the disruption tracker ConfigMap ``kthena-eviction-tracker-<ms>``.

Guarantees:

* Every write carries an optimistic-concurrency check: an update or delete names the ``resourceVersion`` it was
  decided on, a create fails if the ConfigMap appeared meanwhile. Any such race is raised as
  :class:`TrackerConflict`, so the caller reads again and decides again; no grant is ever written over another.
* A tracker is owned by its ModelServing (controller ownerReference with its UID, so the garbage collector
  removes it with the ModelServing) and labelled ``modelserving.volcano.sh/name=<ms>`` (so the manager caches
  only trackers). A tracker owned by another UID (left by a deleted ModelServing of the same name) is read as
  empty and taken over on the next write.
* A tracker left with no entries is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kthena_py.kube import AlreadyExists, Conflict, KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, resource_version_of
from kthena_py.kube.resources import CONFIGMAPS
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.types import MSRef
from kthena_py.plan.modelserving.eviction import (
    ENTRIES_KEY,
    TrackerEntry,
    render_entries,
    tracker_entries,
    tracker_name,
)

__all__ = ["TrackerConflict", "TrackerStore", "owned_entries"]


class TrackerConflict(Exception):
    """The tracker changed between the read a decision was based on and its write."""


def owned_entries(tracker: Mapping[str, Any] | None, ref: MSRef) -> dict[str, TrackerEntry]:
    """The tracker's entries if it belongs to ``ref`` (else none)."""
    return tracker_entries(tracker, ref.uid)


class TrackerStore:
    """The tracker ConfigMaps, through the API server.

    Args:
        client: The API client.
        field_manager: Who writes (``managedFields``).
    """

    def __init__(self, client: KubeApi, field_manager: str) -> None:
        self._client = client
        self._field_manager = field_manager

    async def read(self, ref: MSRef) -> KubeObject | None:
        """The tracker of ``ref`` as stored now (a quorum read), or ``None``."""
        try:
            return await self._client.get(CONFIGMAPS, tracker_name(ref.name), ref.namespace)
        except NotFound:
            return None

    async def write(self, ref: MSRef, current: KubeObject | None, entries: Mapping[str, TrackerEntry]) -> bool:
        """Store ``entries`` in place of ``current`` (the tracker the decision read; ``None``: there was none).

        Returns:
            Whether anything was written (deleting a tracker that is already gone writes nothing).

        Raises:
            TrackerConflict: The tracker changed (or appeared, or disappeared) since ``current`` was read.
            ApiError: Any other failure.
        """
        name = tracker_name(ref.name)
        try:
            if current is None:
                if not entries:
                    return False
                await self._client.create(
                    CONFIGMAPS, self._body(ref, entries), ref.namespace, field_manager=self._field_manager
                )
                return True
            version = resource_version_of(current)
            if not entries:
                await self._client.delete(CONFIGMAPS, name, ref.namespace, resource_version=version)
                return True
            body = self._body(ref, entries)
            body["metadata"]["resourceVersion"] = version
            await self._client.replace(CONFIGMAPS, body, ref.namespace, field_manager=self._field_manager)
            return True
        except (Conflict, AlreadyExists) as exc:
            raise TrackerConflict(str(exc)) from exc
        except NotFound as exc:
            if current is not None and entries:
                raise TrackerConflict(str(exc)) from exc
            return False

    @staticmethod
    def _body(ref: MSRef, entries: Mapping[str, TrackerEntry]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": tracker_name(ref.name),
                "namespace": ref.namespace,
                "labels": {naming.LABEL_NAME: ref.name},
                "ownerReferences": [naming.owner_reference(ref, block_owner_deletion=False)],
            },
            "data": {ENTRIES_KEY: render_entries(entries)},
        }
