"""What the rest of the project uses of the API server: the cluster seam.

Guarantees:

* :class:`KubeApi` names every call controllers, the runtime's writers (events, leases) and the webhooks make:
  reads (get, list), writes (create, replace, merge/JSON patch, server-side apply, delete with preconditions)
  and the ``scale`` subresource. :class:`WatchApi` adds the watch an informer needs.
* :class:`~kthena_py.kube.client.KubeClient` satisfies both structurally (``mypy --strict`` checks it wherever
  a client is passed where one of them is expected); so does the in-memory API server of
  :mod:`kthena_py.testing.fake`, which is what unit tests pass instead.
* Every failure is an :class:`~kthena_py.kube.errors.ApiError` (the errors are part of the contract, whichever
  implementation answers).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal, Protocol

from .client import ObjectList, PatchType, WatchEvent
from .objects import KubeObject
from .resources import ResourceType

__all__ = ["KubeApi", "WatchApi"]


class KubeApi(Protocol):
    """Reads and writes of any resource type, on plain JSON dicts (see :class:`~kthena_py.kube.client.KubeClient`)."""

    async def get(
        self, rt: ResourceType, name: str, namespace: str | None = None, *, subresource: str | None = None
    ) -> KubeObject:
        """Read one object (or its ``status``/``scale`` subresource); NotFound if it does not exist."""
        ...

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        shard_selector: str | None = None,
    ) -> ObjectList:
        """List objects of one type (one page when ``limit`` is set; ``shard_selector``: KEP-5866's)."""
        ...

    async def list_all(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        shard_selector: str | None = None,
    ) -> ObjectList:
        """List every object of one type."""
        ...

    async def create(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        """Create an object; AlreadyExists if its name is taken."""
        ...

    async def replace(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Replace an object; its ``metadata.resourceVersion`` is a precondition (Conflict when stale)."""
        ...

    async def patch(
        self,
        rt: ResourceType,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> KubeObject:
        """Patch an object or subresource (merge, JSON, strategic or apply)."""
        ...

    async def apply(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        namespace: str | None = None,
        subresource: str | None = None,
        force: bool = True,
    ) -> KubeObject:
        """Server-side apply ``body`` as ``field_manager``."""
        ...

    async def delete(
        self,
        rt: ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: Literal["Foreground", "Background", "Orphan"] | None = None,
        grace_period_seconds: int | None = None,
    ) -> KubeObject:
        """Delete one object, optionally only if it still has the given UID/resourceVersion."""
        ...

    async def get_scale(self, rt: ResourceType, name: str, namespace: str) -> KubeObject:
        """Read the ``scale`` subresource."""
        ...

    async def set_scale(self, rt: ResourceType, name: str, namespace: str, replicas: int) -> KubeObject:
        """Set ``spec.replicas`` through the ``scale`` subresource."""
        ...


class WatchApi(KubeApi, Protocol):
    """:class:`KubeApi` and the watch an informer keeps its store current with."""

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        on_open: Callable[[], None] | None = None,
        shard_selector: str | None = None,
        managed_fields: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """Stream watch events from ``resource_version`` until the server ends the watch.

        With ``managed_fields=False`` the objects may come without ``metadata.managedFields`` (a reader that drops
        them anyway lets the client skip decoding them).
        """
        ...
