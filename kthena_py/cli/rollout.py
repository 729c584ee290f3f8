"""``kthena-py rollout status|history|undo NAME``: follow, list and revert a ModelServing's rollouts in a cluster.

* ``status NAME`` prints a line each time the rollout's progress changes (updated/available ServingGroups and the
  ``UpdateInProgress`` reason and message) until it is finished, like ``kubectl rollout status``: exit status 0
  when the rollout is complete or its partition is reached, 1 on ``--timeout`` (Go duration or seconds; 0, the
  default, waits for ever) or when the ModelServing is deleted. ``--watch=false`` prints the state once: exit
  status 0 when finished, 1 when not.
* ``history NAME`` prints one line per ControllerRevision (number, hash, current/update, live pods, images per
  role, what changed since the line before); ``--revision N`` prints revision ``N`` in full (YAML).
* ``undo NAME [--to-revision N]`` patches the spec back to a ControllerRevision's roles, ``schedulerName`` and
  ``plugins`` (keeping the current role ``replicas`` and rollout settings; default: the previous revision, see
  :mod:`kthena_py.plan.modelserving.rollout.history`) and prints what it changed. The patch is refused, rather than
  applied over it, when the object changed since it was read.

Guarantees: the decisions are the pure functions of :mod:`kthena_py.plan.modelserving.rollout.progress` and
:mod:`kthena_py.plan.modelserving.rollout.history`; this module only reads and patches. The client comes from
:func:`connect` alone. Errors (unreachable server, missing object, rejected patch) end with one line on stderr and
exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pydantic
import yaml

from kthena_py.api.common import to_dict
from kthena_py.api.modelserving import ModelServing
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import ApiError, ApiUnavailable, ConfigError, Conflict, Gone, KubeClient, NotFound
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODS
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.revision import revision_data
from kthena_py.plan.modelserving.rollout.history import (
    HistoryEntry,
    HistoryError,
    describe_changes,
    history,
    spec_revision,
    undo_patch,
    undo_target,
)
from kthena_py.plan.modelserving.rollout.progress import rollout_progress

from .common import CommandError

__all__ = ["connect", "run_history", "run_status", "run_undo"]

FIELD_MANAGER = "kthena-py-rollout-undo"
_SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_FIELDS = ("apiVersion", "kind", "metadata", "spec", "status")


# --- the client ---------------------------------------------------------------------------------------------------


def _context_namespace(path: str | None, context: str | None) -> str | None:
    """The namespace of the kubeconfig context in use (first file of ``$KUBECONFIG`` when ``path`` is None)."""
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = next((p for p in env.split(os.pathsep) if p), os.path.expanduser("~/.kube/config"))
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError):
        return None
    wanted = context or config.get("current-context")
    for entry in config.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == wanted:
            namespace = (entry.get("context") or {}).get("namespace")
            return namespace if isinstance(namespace, str) and namespace else None
    return None


def _discover(kubeconfig: str | None, context: str | None) -> tuple[bool, str]:
    """Whether to load a kubeconfig file (else the in-cluster service account), and the default namespace."""
    if kubeconfig or os.environ.get("KUBECONFIG") or os.path.exists(os.path.expanduser("~/.kube/config")):
        return True, _context_namespace(kubeconfig, context) or "default"
    try:
        with open(_SA_NAMESPACE, encoding="utf-8") as f:
            return False, f.read().strip() or "default"
    except OSError:
        return False, "default"


async def connect(kubeconfig: str | None, context: str | None) -> tuple[KubeClient, str]:
    """The client and default namespace of the rollout commands: the one place that loads a configuration.

    ``--kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config`` when present, else the in-cluster service
    account. The namespace is the context's (the service account's in a cluster), else ``default``.

    Raises:
        CommandError: No usable configuration.
    """
    _, namespace = _discover(kubeconfig, context)
    try:
        return await KubeClient.from_environment(kubeconfig, context), namespace
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc


@contextlib.asynccontextmanager
async def _session(args: argparse.Namespace) -> AsyncIterator[tuple[KubeClient, str]]:
    client, namespace = await connect(args.kubeconfig, args.context)
    try:
        yield client, args.namespace or namespace
    finally:
        await client.close()


def _sync(args: argparse.Namespace, body: Callable[[KubeClient, str], Awaitable[int]]) -> int:
    async def main() -> int:
        async with _session(args) as (client, namespace):
            try:
                return await body(client, namespace)
            except NotFound as err:
                raise CommandError(f'modelserving "{args.name}" not found in namespace {namespace}') from err
            except ApiUnavailable as err:
                raise CommandError(f"cannot reach the API server at {client.host}: {err}") from err
            except ApiError as err:
                raise CommandError(str(err)) from err

    return asyncio.run(main())


def _parse(obj: KubeObject) -> ModelServing:
    try:
        return ModelServing.model_validate(
            {k: v for k, v in obj.items() if k in ("apiVersion", "kind", "metadata", "spec", "status")}
        )
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CommandError(f"cannot read the ModelServing: {where}: {first['msg']}") from err


# --- status -------------------------------------------------------------------------------------------------------


class _Printer:
    def __init__(self) -> None:
        self.last = ""

    def show(self, obj: KubeObject) -> bool:
        progress = rollout_progress(_parse(obj))
        if progress.message != self.last:
            print(progress.message, flush=True)
            self.last = progress.message
        return progress.done


async def _follow(client: KubeClient, namespace: str, name: str, printer: _Printer) -> int:
    while True:
        obj = await client.get(MODELSERVINGS, name, namespace)
        if printer.show(obj):
            return 0
        version = str(obj.get("metadata", {}).get("resourceVersion") or "")
        try:
            async for event in client.watch(
                MODELSERVINGS,
                namespace,
                resource_version=version,
                field_selector=f"metadata.name={name}",
                timeout_seconds=60,
            ):
                if event.type == "DELETED":
                    raise CommandError(f'modelserving "{name}" was deleted')
                if event.type in ("ADDED", "MODIFIED") and printer.show(event.object):
                    return 0
        except (Gone, ApiUnavailable):
            await asyncio.sleep(1)  # start again from a fresh read


def run_status(args: argparse.Namespace) -> int:
    """Follow (or print once) the rollout of a ModelServing."""

    async def body(client: KubeClient, namespace: str) -> int:
        printer = _Printer()
        if not args.watch:
            return 0 if printer.show(await client.get(MODELSERVINGS, args.name, namespace)) else 1
        try:
            async with asyncio.timeout(args.timeout or None):
                return await _follow(client, namespace, args.name, printer)
        except TimeoutError:
            raise CommandError(f"timed out waiting for the rollout of {args.name} to finish") from None

    return _sync(args, body)


# --- history ------------------------------------------------------------------------------------------------------


async def _history(client: KubeClient, namespace: str, name: str) -> tuple[ModelServing, list[HistoryEntry]]:
    obj = await client.get(MODELSERVINGS, name, namespace)
    ms = _parse(obj)
    selector = f"{naming.LABEL_NAME}={name}"
    revisions = (await client.list_all(CONTROLLER_REVISIONS, namespace, label_selector=selector)).items
    pods = (await client.list_all(PODS, namespace, label_selector=selector)).items
    return ms, history(ms, revisions, pods)


def _status_of(entry: HistoryEntry) -> str:
    return ",".join(word for word, flag in (("current", entry.current), ("update", entry.update)) if flag) or "-"


def history_table(entries: list[HistoryEntry]) -> str:
    """The ``rollout history`` table."""
    rows = [["REVISION", "HASH", "STATUS", "PODS", "IMAGES", "CHANGE"]]
    rows += [
        [str(e.number), e.hash, _status_of(e), str(e.pods), e.images, "; ".join(e.changes) or "-"] for e in entries
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)), row[-1]]) for row in rows
    )


def revision_document(entry: HistoryEntry) -> dict[str, Any]:
    """One revision in full, as ``rollout history --revision N`` prints it."""
    doc: dict[str, Any] = {
        "revision": entry.number,
        "hash": entry.hash,
        "controllerRevision": entry.name,
        "current": entry.current,
        "update": entry.update,
        "pods": entry.pods,
        "changes": list(entry.changes),
    }
    if entry.data is not None:
        doc["schedulerName"] = entry.data.scheduler_name
        doc["plugins"] = [to_dict(p) for p in entry.data.plugins]
        doc["roles"] = [to_dict(r) for r in entry.data.roles]
    return doc


def run_history(args: argparse.Namespace) -> int:
    """Print the revisions of a ModelServing."""

    async def body(client: KubeClient, namespace: str) -> int:
        _, entries = await _history(client, namespace, args.name)
        if args.revision is None:
            if not entries:
                print(f'No ControllerRevisions found for modelserving "{args.name}"')
                return 0
            print(history_table(entries))
            return 0
        found = [e for e in entries if e.number == args.revision]
        if not found:
            raise CommandError(
                f"revision {args.revision} not found (revisions: {', '.join(str(e.number) for e in entries) or 'none'})"
            )
        sys.stdout.write(yaml.safe_dump(revision_document(found[0]), sort_keys=False))
        return 0

    return _sync(args, body)


# --- undo ---------------------------------------------------------------------------------------------------------


def run_undo(args: argparse.Namespace) -> int:
    """Patch the ModelServing back to an earlier revision."""

    async def body(client: KubeClient, namespace: str) -> int:
        ms, entries = await _history(client, namespace, args.name)
        try:
            target = undo_target(ms, entries, args.to_revision)
        except HistoryError as err:
            raise CommandError(str(err)) from err
        assert target.data is not None  # undo_target only returns readable revisions
        if target.hash == spec_revision(ms):
            print(f'modelserving "{args.name}": skipped rollback (the spec already matches revision {target.number})')
            return 0
        changes = describe_changes(revision_data(ms.spec), target.data)
        try:
            await client.patch(
                MODELSERVINGS, args.name, undo_patch(ms, target.data), namespace, field_manager=FIELD_MANAGER
            )
        except Conflict as err:
            raise CommandError(f'modelserving "{args.name}" changed while undoing; run the command again') from err
        print(f'modelserving "{args.name}" rolled back to revision {target.number} ({target.hash})')
        for change in changes:
            print(f"  {change}")
        return 0

    return _sync(args, body)
