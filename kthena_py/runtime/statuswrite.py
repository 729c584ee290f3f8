"""One status writer for every controller: the status subresource, one field manager, no write on a no-op.

A controller writes the status of the objects it reconciles in one of two ways, and :class:`StatusWriter` is
where both are made:

* :meth:`StatusWriter.apply`: its *share* of a status that several writers share. The share is written by
  server-side apply on the ``status`` subresource, forced, under the writer's field manager, with a body of
  ``apiVersion``, ``kind``, ``metadata`` (name, namespace, UID) and ``status``. ``conditions`` is a list-map
  keyed by ``type`` on the API server, so each field manager owns its own fields and condition types: a write
  never drops or overwrites what another field manager owns, and a field or condition type this manager wrote
  before and leaves out of the share is removed (unless another manager owns it too).
* :meth:`StatusWriter.replace`: the whole status of an object only one controller writes. The status becomes
  exactly the one given: a merge patch of the ``status`` subresource under the writer's field manager, in which
  every top-level key of the cached status that the new one lacks is set to ``null``.

Guarantees:

* **No write on a no-op.** Neither writes when the object as cached (the caller's copy) already shows what it
  would write: for :meth:`~StatusWriter.apply`, when the cached status holds every field of the share, each
  condition of the share equal to the cached condition of the same ``type`` (other conditions are other
  writers'); for :meth:`~StatusWriter.replace`, when the cached status equals the new one. A restart on a
  converged cluster therefore writes nothing. A caller that decides for itself whether a write is due (a share
  that gives up fields, which no cached status can show as held) passes ``always=True``.
* **The UID is carried, not relied on.** Both writes carry the cached object's UID, as the writers always did.
  FakeKube checks it, but a real kube-apiserver does not on the ``status`` subresource (it keeps only the status
  of the body): a write made from a stale copy after the object was deleted and re-created under the same name
  lands on the replacement, whose own next reconcile writes its status anew.
* **Errors.** NotFound means the object is gone: the outcome says so (:attr:`StatusWrite.gone`) and nothing is
  raised, since there is nothing left to report on. Every other failure (Conflict, Invalid, a 5xx, a transport
  failure) is raised as the :class:`~kthena_py.kube.ApiError` it is, unchanged, for the caller to report, and
  for the controller engine to retry with the key's backoff (:mod:`kthena_py.runtime.reconcile`): a fault is a
  retry, never a crash, and never a tight loop.
* Nothing is remembered between writes, and nothing is logged here: the callers' log lines and metrics are
  theirs. The writer knows no kind of its own: it writes the resource type it was made for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kthena_py.kube import KubeApi, NotFound
from kthena_py.kube.objects import KubeObject, meta
from kthena_py.kube.resources import ResourceType

__all__ = ["StatusWrite", "StatusWriter", "holds"]


def holds(current: Mapping[str, Any], share: Mapping[str, Any]) -> bool:
    """Whether the status ``current`` already holds every field of ``share`` (conditions compared by ``type``)."""
    for key, value in share.items():
        if key != "conditions":
            if current.get(key) != value:
                return False
            continue
        have = {c.get("type"): c for c in current.get("conditions") or [] if isinstance(c, dict)}
        if any(have.get(c.get("type")) != c for c in value or []):
            return False
    return True


@dataclass(frozen=True)
class StatusWrite:
    """What one status write did."""

    state: Literal["written", "unchanged", "gone"]
    """``written``: the API server took the write; ``unchanged``: nothing was due; ``gone``: the object is gone."""
    object: KubeObject | None = None
    """The object as the API server answered the write (``None`` unless written)."""

    @property
    def written(self) -> bool:
        """Whether the API server took a write."""
        return self.state == "written"

    @property
    def gone(self) -> bool:
        """Whether the object was gone (NotFound)."""
        return self.state == "gone"


_UNCHANGED = StatusWrite("unchanged")
_GONE = StatusWrite("gone")


class StatusWriter:
    """Writes statuses of one resource type under one field manager (see the module docstring).

    Args:
        client: The API client.
        rt: The resource type whose ``status`` subresource is written.
        field_manager: The field manager every write is made as.
    """

    def __init__(self, client: KubeApi, rt: ResourceType, field_manager: str) -> None:
        self.client = client
        self.rt = rt
        self.field_manager = field_manager

    async def apply(self, obj: KubeObject, share: Mapping[str, Any], *, always: bool = False) -> StatusWrite:
        """Server-side apply ``share`` as the status of the cached ``obj``, unless it already holds it.

        Args:
            obj: The object as cached.
            share: This field manager's fields of the status (all of them: fields it owned before and leaves
                out are removed).
            always: Write even if the cached status holds ``share``.

        Raises:
            ApiError: The write failed (other than the object being gone).
        """
        if not always and holds(obj.get("status") or {}, share):
            return _UNCHANGED
        md = meta(obj)
        body = {
            "apiVersion": self.rt.api_version,
            "kind": self.rt.kind,
            "metadata": {"name": md.get("name"), "namespace": md.get("namespace"), "uid": md.get("uid")},
            "status": dict(share),
        }
        try:
            written = await self.client.patch(
                self.rt,
                str(md.get("name")),
                body,
                md.get("namespace"),
                patch_type="apply",
                subresource="status",
                field_manager=self.field_manager,
                force=True,
            )
        except NotFound:
            return _GONE
        return StatusWrite("written", written)

    async def replace(self, obj: KubeObject, status: Mapping[str, Any]) -> StatusWrite:
        """Make ``status`` the whole status of the cached ``obj``, unless it already is.

        Args:
            obj: The object as cached.
            status: The status it must have.

        Raises:
            ApiError: The write failed (other than the object being gone).
        """
        current = obj.get("status") or {}
        if current == status:
            return _UNCHANGED
        patch: dict[str, Any] = {k: None for k in current if k not in status}
        patch.update(status)
        md = meta(obj)
        try:
            written = await self.client.patch(
                self.rt,
                str(md.get("name")),
                {"metadata": {"uid": md.get("uid")}, "status": patch},
                md.get("namespace"),
                subresource="status",
                field_manager=self.field_manager,
            )
        except NotFound:
            return _GONE
        return StatusWrite("written", written)
