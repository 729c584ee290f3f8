"""``kthena-py status [NAME] [-n NS] [-w] [-o json]``: one look at a ModelServing or a ModelPool, from a cluster.

``NAME`` is a ModelServing, else a ModelPool of that name (``modelpool/NAME`` or ``mpool/NAME`` asks for the pool
when both exist); without ``NAME`` the namespace's ModelPools are listed, one line each. A pool is shown by
:mod:`kthena_py.cli.poolview` from the pool, its members' ModelServings and their pods; with ``-w`` it is read
again every :data:`POOL_POLL_SECONDS` and printed when what it shows changed, until the pool is deleted.

What it reads, in one namespace: the ModelServing, its pods, headless Services, PodGroups (when Volcano's CRD is
served) and ControllerRevisions (label ``modelserving.volcano.sh/name=NAME``), and its eviction tracker ConfigMap
if there is one, and the namespace's ModelPools (when their CRD is served: a member at zero replicas is shown
as not resident in its pool, not as scaled to zero by the activator). The tree and its rendering are the pure
functions of :mod:`kthena_py.plan.modelserving.view`; this module only reads and prints.

Guarantees:

* :func:`status_text` is the whole command without a process around it: given any client of the cluster seam
  (:class:`~kthena_py.kube.api.KubeApi`: a :class:`~kthena_py.kube.KubeClient`, or the in-memory FakeKube of the
  tests) it returns exactly what ``kthena-py status`` prints (plain, or JSON).
* ``-w`` (:func:`follow`) prints the tree, then watches the ModelServing, its pods (and PodGroups) and the ModelCache
  its annotation names, and prints it again after every burst of changes (reads are repeated in full: what is
  printed is always one consistent read, never a patched-up copy); a tree identical to the last one printed is not
  printed again. A watch that ends or expires is started again from a fresh read; so are all of them when the
  annotation names another cache. A type the server does not serve (the ModelCache CRD not installed) is simply
  not watched. It returns 0 with ``modelserving "NAME" was deleted`` (with
  ``-o json``, a last line ``{"name": ..., "namespace": ..., "deleted": true}``) when the ModelServing goes, and
  ends quietly on Ctrl-C (exit status 130, the client closed, no traceback).
* The client comes from :func:`kthena_py.cli.rollout.connect` (the client-go kubeconfig order, as the manager).
  Errors (missing object, unreachable server, an unreadable ModelServing) end with one line on stderr and exit
  status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kthena_py.api.validation.poolmembers import pool_members
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELCACHES, MODELPOOLS, MODELSERVINGS
from kthena_py.kube import ApiError, ApiUnavailable, Gone, KubeApi, KubeObject, NotFound, WatchApi, WatchEvent
from kthena_py.kube.resources import CONFIGMAPS, CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES, ResourceType
from kthena_py.plan.activator.pools import member_names
from kthena_py.plan.activator.targets import opted_in
from kthena_py.plan.adapters.desired import adapters_of
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.eviction.tracker import tracker_name
from kthena_py.plan.modelserving.view import StatusView, build_view, render_json, render_text, status_document
from kthena_py.vocab.labels import MODEL_CACHE

from .common import CommandError
from .poolview import build_pool_view, pool_document, render_pool_list, render_pool_text
from .rollout import connect

__all__ = [
    "POOL_POLL_SECONDS",
    "Snapshot",
    "follow",
    "follow_pool",
    "pool_list_text",
    "pool_status_text",
    "read_snapshot",
    "render",
    "run",
    "status_text",
    "view_of",
]

POOL_POLL_SECONDS = 1.0
"""How often ``status -w`` reads a ModelPool again."""
_POOL_PREFIXES = ("modelpool/", "modelpools/", "mpool/")

Output = Literal["text", "json"]
_WATCH_SECONDS = 300
_clock: Callable[[], float] = time.time
"""The time ages are measured to (tests replace it)."""


@dataclass(frozen=True)
class Snapshot:
    """What one read of the cluster returned for a ModelServing."""

    ms: KubeObject
    pods: tuple[KubeObject, ...] = ()
    services: tuple[KubeObject, ...] = ()
    podgroups: tuple[KubeObject, ...] = ()
    revisions: tuple[KubeObject, ...] = ()
    tracker: KubeObject | None = None
    pods_version: str = ""
    podgroups_served: bool = False
    model_cache: KubeObject | None = None
    """The ModelCache the ModelServing's annotation names, when it names one and it can be read."""
    model_cache_name: str | None = None
    """The name of the ModelCache the annotation names (``None``: it names none), found or not."""
    policies: tuple[KubeObject, ...] = ()
    """The namespace's AutoscalingPolicies, read only for a ModelServing at zero replicas."""
    model_pools: tuple[str, ...] = ()
    """The names of the namespace's ModelPools listing the ModelServing as a member (none when the CRD is absent)."""


async def _optional_list(client: KubeApi, rt: ResourceType, namespace: str, selector: str) -> list[KubeObject] | None:
    try:
        return (await client.list_all(rt, namespace, label_selector=selector)).items
    except NotFound:  # the resource type is not served (Volcano not installed)
        return None


async def read_snapshot(client: KubeApi, name: str, namespace: str) -> Snapshot:
    """Read the ModelServing and everything the tree shows of it.

    Raises:
        NotFound: The ModelServing does not exist.
        ApiError: Any other failure of a read.
    """
    ms = await client.get(MODELSERVINGS, name, namespace)
    selector = f"{naming.LABEL_NAME}={name}"
    pods, services, revisions = await asyncio.gather(
        client.list_all(PODS, namespace, label_selector=selector),
        client.list_all(SERVICES, namespace, label_selector=selector),
        client.list_all(CONTROLLER_REVISIONS, namespace, label_selector=selector),
    )
    podgroups = await _optional_list(client, PODGROUPS, namespace, selector)
    try:
        tracker: KubeObject | None = await client.get(CONFIGMAPS, tracker_name(name), namespace)
    except NotFound:
        tracker = None
    model_cache: KubeObject | None = None
    annotated = ((ms.get("metadata") or {}).get("annotations") or {}).get(MODEL_CACHE)
    cache_name = annotated.strip() if isinstance(annotated, str) and annotated.strip() else None
    if cache_name is not None:
        try:
            model_cache = await client.get(MODELCACHES, cache_name, namespace)
        except NotFound:
            model_cache = None  # absent, or its CRD is not installed: the view says "not found"
    policies: list[KubeObject] | None = None
    if (ms.get("spec") or {}).get("replicas") == 0:
        policies = await _optional_list(client, AUTOSCALINGPOLICIES, namespace, "")
    pools = await _optional_list(client, MODELPOOLS, namespace, "")
    return Snapshot(
        model_pools=tuple(
            str((p.get("metadata") or {}).get("name") or "") for p in pools or () if name in member_names(p)
        ),
        policies=tuple(policies or ()),
        model_cache=model_cache,
        model_cache_name=cache_name,
        ms=ms,
        pods=tuple(pods.items),
        services=tuple(services.items),
        podgroups=tuple(podgroups or ()),
        revisions=tuple(revisions.items),
        tracker=tracker,
        pods_version=pods.resource_version,
        podgroups_served=podgroups is not None,
    )


def view_of(snapshot: Snapshot, now: float) -> StatusView:
    """The tree of a snapshot at ``now``.

    Raises:
        CommandError: The ModelServing cannot be read.
    """
    try:
        return build_view(
            snapshot.ms,
            snapshot.pods,
            now=now,
            services=snapshot.services,
            podgroups=snapshot.podgroups,
            revisions=snapshot.revisions,
            tracker=snapshot.tracker,
            model_cache=snapshot.model_cache,
            scale_from_zero=opted_in(snapshot.ms, snapshot.policies),
            adapters={a.name: a.digest for a in adapters_of(snapshot.ms)},
            model_pools=snapshot.model_pools,
        )
    except ValueError as err:
        first = str(err).splitlines()
        raise CommandError(f"cannot read the ModelServing: {' '.join(first[:3])}") from err


def render(view: StatusView, output: Output = "text", *, colour: bool = False, ages: bool = True) -> str:
    """The printed form of a tree: the text tree or indented JSON (each ends with a newline)."""
    return render_json(view) if output == "json" else render_text(view, colour=colour, ages=ages)


async def status_text(
    client: KubeApi,
    name: str,
    namespace: str,
    *,
    output: Output = "text",
    now: float | None = None,
    colour: bool = False,
    ages: bool = True,
) -> str:
    """What ``kthena-py status NAME -n NAMESPACE`` prints, for tests and other programs.

    Args:
        client: Any client of the cluster seam.
        name: The ModelServing.
        namespace: Its namespace.
        output: ``text`` or ``json``.
        now: The time ages are measured to (default: the clock).
        colour: ANSI colours in the text.
        ages: Show ages in the text (``False`` for output compared across runs).

    Raises:
        NotFound: The ModelServing does not exist.
        CommandError: It cannot be read.
    """
    snapshot = await read_snapshot(client, name, namespace)
    view = view_of(snapshot, _clock() if now is None else now)
    return render(view, output, colour=colour, ages=ages)


# --- -w ----------------------------------------------------------------------------------------------------------

_Item = tuple[ResourceType, WatchEvent] | None


async def _pump(
    client: WatchApi,
    queue: asyncio.Queue[_Item],
    rt: ResourceType,
    namespace: str,
    version: str,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    optional: bool = False,
) -> None:
    restart = True
    try:
        async for event in client.watch(
            rt,
            namespace,
            resource_version=version or None,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=_WATCH_SECONDS,
        ):
            await queue.put((rt, event))
    except (Gone, ApiUnavailable):
        pass
    except NotFound:
        if not optional:
            raise
        restart = False  # the type is not served: nothing to watch, nothing to start again
    finally:
        if restart:
            await queue.put(None)  # this watch ended: start again from a fresh read


def _deleted(item: _Item) -> bool:
    return item is not None and item[0] is MODELSERVINGS and item[1].type == "DELETED"


def _restart(item: _Item) -> bool:
    return item is None or item[1].type == "ERROR"


async def follow(
    client: WatchApi,
    name: str,
    namespace: str,
    write: Callable[[str], None],
    *,
    output: Output = "text",
    colour: bool = False,
    clock: Callable[[], float] | None = None,
    settle: float = 0.2,
) -> int:
    """Print the tree, then again after every burst of changes, until the ModelServing is deleted.

    Args:
        client: Any client of the cluster seam that can watch.
        name: The ModelServing.
        namespace: Its namespace.
        write: Where printed text goes (the whole tree at once).
        output: ``text`` (trees separated by a blank line) or ``json`` (one compact document per line; the
            deletion is the line ``{"name": ..., "namespace": ..., "deleted": true}``).
        colour: ANSI colours in the text.
        clock: The time ages are measured to (default: the clock).
        settle: Seconds to let a burst of events land before reading again.

    Returns:
        0 once the ModelServing is deleted (after saying so).

    Raises:
        NotFound: The ModelServing does not exist at the start.
    """
    last = ""
    shown = False

    def show(snapshot: Snapshot) -> None:
        nonlocal last, shown
        view = view_of(snapshot, (clock or _clock)())
        if output == "json":
            text = json.dumps(status_document(view), separators=(",", ":"), ensure_ascii=False) + "\n"
        else:
            text = render_text(view, colour=colour)
        if text != last:
            write(("\n" if shown and output == "text" else "") + text)
            last, shown = text, True

    def gone() -> int:
        if output == "json":
            write(json.dumps({"name": name, "namespace": namespace, "deleted": True}) + "\n")
        else:
            write(f'modelserving "{name}" was deleted\n')
        return 0

    while True:
        try:
            snapshot = await read_snapshot(client, name, namespace)
        except NotFound:
            if not shown:
                raise
            return gone()
        show(snapshot)
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        version = str(snapshot.ms.get("metadata", {}).get("resourceVersion") or "")
        tasks = [
            asyncio.create_task(
                _pump(client, queue, MODELSERVINGS, namespace, version, field_selector=f"metadata.name={name}")
            ),
            asyncio.create_task(
                _pump(
                    client, queue, PODS, namespace, snapshot.pods_version, label_selector=f"{naming.LABEL_NAME}={name}"
                )
            ),
        ]
        if snapshot.podgroups_served:
            tasks.append(
                asyncio.create_task(
                    _pump(client, queue, PODGROUPS, namespace, "", label_selector=f"{naming.LABEL_NAME}={name}")
                )
            )
        watched_cache = snapshot.model_cache_name
        if watched_cache is not None:
            cache_version = str(((snapshot.model_cache or {}).get("metadata") or {}).get("resourceVersion") or "")
            tasks.append(
                asyncio.create_task(
                    _pump(
                        client,
                        queue,
                        MODELCACHES,
                        namespace,
                        cache_version,
                        field_selector=f"metadata.name={watched_cache}",
                        optional=True,
                    )
                )
            )
        try:
            while True:
                items = [await queue.get()]
                await asyncio.sleep(settle)
                while not queue.empty():
                    items.append(queue.get_nowait())
                if any(_deleted(item) for item in items):
                    return gone()
                if any(_restart(item) for item in items):
                    break
                try:
                    snapshot = await read_snapshot(client, name, namespace)
                except NotFound:
                    return gone()
                show(snapshot)
                if snapshot.model_cache_name != watched_cache:
                    break  # the annotation names another cache: watch that one
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(settle)


# --- ModelPools ----------------------------------------------------------------------------------------------------


async def _pool_text(client: KubeApi, name: str, namespace: str, output: Output, now: float, ages: bool) -> str:
    pool = await client.get(MODELPOOLS, name, namespace)
    members = [member for _, member in pool_members(pool)]

    async def serving(member: str) -> KubeObject | None:
        try:
            return await client.get(MODELSERVINGS, member, namespace)
        except NotFound:
            return None

    servings = await asyncio.gather(*(serving(member) for member in members))
    pods = await asyncio.gather(
        *(client.list_all(PODS, namespace, label_selector=f"{naming.LABEL_NAME}={member}") for member in members)
    )
    view = build_pool_view(
        pool, dict(zip(members, servings, strict=True)), {m: p.items for m, p in zip(members, pods, strict=True)}, now
    )
    if output == "json":
        return json.dumps(pool_document(view), indent=2, ensure_ascii=False) + "\n"
    return render_pool_text(view, ages=ages)


async def pool_status_text(
    client: KubeApi, name: str, namespace: str, *, output: Output = "text", now: float | None = None, ages: bool = True
) -> str:
    """What ``kthena-py status POOL -n NAMESPACE`` prints.

    Raises:
        NotFound: The ModelPool does not exist (or its CRD is not installed).
    """
    return await _pool_text(client, name, namespace, output, _clock() if now is None else now, ages)


async def pool_list_text(client: KubeApi, namespace: str, *, output: Output = "text") -> str:
    """What ``kthena-py status -n NAMESPACE`` prints: the namespace's ModelPools (none when the CRD is absent)."""
    try:
        pools = (await client.list_all(MODELPOOLS, namespace)).items
    except NotFound:
        pools = []
    if output == "json":
        return json.dumps({"namespace": namespace, "modelPools": pools}, indent=2, ensure_ascii=False) + "\n"
    return render_pool_list(pools, namespace)


async def follow_pool(
    client: KubeApi,
    name: str,
    namespace: str,
    write: Callable[[str], None],
    *,
    output: Output = "text",
    interval: float = POOL_POLL_SECONDS,
) -> int:
    """Print the pool, then again whenever what it shows changed, until it is deleted (then return 0).

    Ages are left out, so the pool is printed again for a change, not for the clock.

    Raises:
        NotFound: The ModelPool does not exist at the start.
    """
    last, shown = "", False
    while True:
        try:
            text = await _pool_text(client, name, namespace, output, _clock(), ages=False)
        except NotFound:
            if not shown:
                raise
            if output == "json":
                write(json.dumps({"name": name, "namespace": namespace, "deleted": True}) + "\n")
            else:
                write(f'modelpool "{name}" was deleted\n')
            return 0
        if text != last:
            write(("\n" if shown and output == "text" else "") + text)
            last, shown = text, True
        await asyncio.sleep(interval)


def _pool_name(name: str) -> str | None:
    for prefix in _POOL_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return None


_CLOSE_SECONDS = 5.0
"""The longest closing the client may take when the command ends."""

# --- the command -------------------------------------------------------------------------------------------------


def _colour(choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def _show_pool(client: KubeApi, name: str, namespace: str, args: argparse.Namespace) -> int:
    if args.watch:
        return await follow_pool(client, name, namespace, _write, output=args.output)
    _write(await pool_status_text(client, name, namespace, output=args.output))
    return 0


def run(args: argparse.Namespace) -> int:
    """Print (or follow) the status of one ModelServing or ModelPool, or list the namespace's pools."""

    async def main() -> int:
        client, default_namespace = await connect(args.kubeconfig, args.context)
        namespace = args.namespace or default_namespace
        colour = args.output == "text" and _colour(args.color)
        pool = _pool_name(args.name) if args.name else None
        try:
            if not args.name:
                _write(await pool_list_text(client, namespace, output=args.output))
                return 0
            if pool is not None:
                return await _show_pool(client, pool, namespace, args)
            try:
                await client.get(MODELSERVINGS, args.name, namespace)
            except NotFound:
                try:
                    return await _show_pool(client, args.name, namespace, args)
                except NotFound as err:
                    raise CommandError(
                        f'neither a modelserving nor a modelpool "{args.name}" in namespace {namespace}'
                    ) from err
            if args.watch:
                return await follow(client, args.name, namespace, _write, output=args.output, colour=colour)
            _write(await status_text(client, args.name, namespace, output=args.output, colour=colour))
            return 0
        except NotFound as err:
            kind = "modelpool" if pool is not None else "modelserving"
            raise CommandError(f'{kind} "{pool or args.name}" not found in namespace {namespace}') from err
        except ApiUnavailable as err:
            raise CommandError(f"cannot reach the API server at {client.host}: {err.message}") from err
        except ApiError as err:
            raise CommandError(str(err)) from err
        finally:
            # Bounded: on Ctrl-C an open watch connection must not hold the exit up.
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await asyncio.wait_for(client.close(), _CLOSE_SECONDS)

    return asyncio.run(main())  # Ctrl-C: the client is closed, kthena_py.main exits 130 without a traceback
