"""The Kubernetes client: the only code in the project that calls kubernetes-asyncio.

Guarantees:

* Every operation works on plain JSON dicts for any :class:`~kthena_py.kube.resources.ResourceType`
  (core kinds and CRDs alike), so callers never see generated models.
* Every error answer is raised as an :class:`~kthena_py.kube.errors.ApiError` subclass; transport
  failures as :class:`~kthena_py.kube.errors.ApiUnavailable`.
* Writes can carry preconditions (UID, resourceVersion) so that a stale decision never deletes or
  overwrites a newer object.
* Server-side apply uses the field manager given per call, so that each reconciler owns its fields.
* Answers and watch events are decoded with pydantic-core's JSON parser (same values as :mod:`json`,
  about twice as fast; a busy manager decodes every pod update it watches).
* Two lanes through one connection pool (:mod:`.lanes`): requests that report or keep state (a ``status``
  subresource, leader-election Leases) and watches never wait for a connection behind other requests. Every
  other request first takes one of the pool's bulk slots, so a burst of them (a fleet's pod creates) never
  holds the whole pool; the time it waited is observed in ``rest_client_rate_limiter_duration_seconds``. Each
  lane is served in arrival order.
* Dead connections are noticed (:mod:`.transport`): every connection has TCP
  keepalive (probes after 15 s idle, every 5 s, 3 misses: a dead peer is dropped after ~30 s) and
  ``TCP_USER_TIMEOUT`` (unacknowledged data for 30 s drops the connection); connecting is bounded by
  :data:`CONNECT_TIMEOUT`; a request whose answer goes silent for :data:`READ_IDLE_TIMEOUT` fails; a
  watch that delivers nothing (no event, no bookmark) for its server-side ``timeoutSeconds`` plus
  :data:`WATCH_IDLE_MARGIN` fails. With the informers' 30-37 s watch timeouts a silently stalled watch
  is therefore noticed within 45 s, even where the kernel cannot tell (a stalled middlebox still
  acknowledges).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import yaml
from pydantic_core import from_json

from . import sdk
from .errors import ApiError, ApiUnavailable, error_from_response
from .lanes import bulk_slots, priority_request
from .managedfields import without_managed_fields
from .metrics import REST_CLIENT_LATENCY, REST_CLIENT_REQUESTS, REST_CLIENT_WAIT, WATCH_BYTES, WATCH_EVENTS
from .objects import KubeObject
from .resources import ResourceType
from .transport import pool_size, tune

PatchType = Literal["merge", "json", "strategic", "apply"]

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection (TCP and TLS)."""
READ_IDLE_TIMEOUT = 30.0
"""Seconds a (non-watch) answer may stay silent before the request fails (admission webhooks time out at 30 s)."""
WATCH_IDLE_MARGIN = 8.0
"""Seconds a watch may stay silent beyond its server-side ``timeoutSeconds`` before it counts as dead."""


def _request_timeout(total: float | None) -> aiohttp.ClientTimeout:
    bounds = aiohttp.ClientTimeout(total=total, sock_connect=CONNECT_TIMEOUT, sock_read=READ_IDLE_TIMEOUT)
    if len(_REQUEST_TIMEOUTS) < 16:
        _REQUEST_TIMEOUTS[total] = bounds
    return bounds


_REQUEST_TIMEOUTS: dict[float | None, aiohttp.ClientTimeout] = {}
"""The timeouts of :meth:`KubeClient.request` by total (a few distinct values in practice), built once each."""

_CONTENT_TYPES: dict[PatchType, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


@dataclass(frozen=True)
class ObjectList:
    """The result of a list call: the items and the collection's resourceVersion."""

    items: list[KubeObject]
    resource_version: str
    continue_token: str = ""


@dataclass(frozen=True)
class WatchEvent:
    """One event of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    type: str
    object: KubeObject = field(default_factory=dict)


class ConfigError(Exception):
    """No usable kubeconfig or in-cluster configuration was found."""


class KubeClient:
    """An async client for any resource type, over one kubernetes-asyncio ``ApiClient``.

    Use :meth:`from_kubeconfig` or :meth:`in_cluster` to build one, and :meth:`close` (or
    ``async with``) to release its connection pool.
    """

    def __init__(self, api_client: Any, *, user_agent: str = "kthena-py") -> None:
        self._api = api_client
        #: Where the configuration came from (a kubeconfig path or "in-cluster service account"), for logs.
        self.config_source = ""
        self._api.user_agent = user_agent
        tune(api_client)
        self._bulk = asyncio.Semaphore(bulk_slots(pool_size(api_client)))
        """Slots for requests outside the priority lane (:mod:`.lanes`)."""
        self._request_counters: dict[tuple[str, str], Any] = {}
        self._latencies: dict[str, Any] = {}
        self._waits: dict[str, Any] = {}
        self.answers_managed_fields = True
        """Whether the answers of single-object requests keep ``metadata.managedFields``.

        A process that never reads them (the manager: its cache drops them) sets this to False, and they are cut out
        of each answer before it is decoded (:mod:`.managedfields`). Lists are decoded whole; watches choose per call
        (:meth:`watch`'s ``managed_fields``)."""

    @property
    def user_agent(self) -> str:
        """The ``User-Agent`` every request carries (the API server's audit log records it per request)."""
        return str(self._api.user_agent)

    @user_agent.setter
    def user_agent(self, value: str) -> None:
        self._api.user_agent = value

    @classmethod
    async def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, *, qps_pool: int = 100
    ) -> KubeClient:
        """Build a client from a kubeconfig file.

        Args:
            path: Kubeconfig path; ``None`` means ``$KUBECONFIG`` or ``~/.kube/config``.
            context: Context name; ``None`` for the current context.
            qps_pool: Maximum number of concurrent connections.

        Raises:
            ConfigError: The file is missing or unusable.
        """
        conf = sdk.load().Configuration()
        try:
            await sdk.load().load_kube_config(config_file=path, context=context, client_configuration=conf)
        except (sdk.load().ConfigException, OSError, TypeError, KeyError) as exc:
            raise ConfigError(f"cannot load kubeconfig {path or '(default)'}: {exc}") from exc
        conf.connection_pool_maxsize = qps_pool
        return cls(sdk.load().ApiClient(configuration=conf))

    @classmethod
    async def from_environment(
        cls, path: str | None = None, context: str | None = None, *, qps_pool: int = 100
    ) -> KubeClient:
        """Build a client from the configuration client-go (and controller-runtime) would pick.

        In order: ``path`` (``--kubeconfig``); else ``$KUBECONFIG`` (a list of files joined with the OS path
        separator is merged, the first file winning); else the pod's service account, when running in a
        cluster (``$KUBERNETES_SERVICE_HOST`` set and the token mounted); else ``~/.kube/config``.
        :attr:`config_source` says which one was used.

        Args:
            path: An explicit kubeconfig path, or ``None``.
            context: Context name for a kubeconfig (``None``: its current context).
            qps_pool: Maximum number of concurrent connections.

        Raises:
            ConfigError: The chosen kubeconfig is unusable, or none of the four exists.
        """
        choice = _choose_config(path)
        if choice is None:
            client = cls.in_cluster(qps_pool=qps_pool)
            client.config_source = "in-cluster service account"
            return client
        file, source = choice
        if context is None and file == os.environ.get("KUBECONFIG"):
            context = _first_current_context(file)
        return await cls._from_file(file, context, qps_pool, source)

    @classmethod
    async def _from_file(cls, path: str, context: str | None, qps_pool: int, source: str) -> KubeClient:
        client = await cls.from_kubeconfig(path, context, qps_pool=qps_pool)
        client.config_source = source
        return client

    @classmethod
    def in_cluster(cls, *, qps_pool: int = 100) -> KubeClient:
        """Build a client from the pod's service account.

        Raises:
            ConfigError: Not running inside a cluster.
        """
        conf = sdk.load().Configuration()
        try:
            sdk.load().load_incluster_config(client_configuration=conf)
        except sdk.load().ConfigException as exc:
            raise ConfigError(f"not running in a cluster and no --kubeconfig given: {exc}") from exc
        conf.connection_pool_maxsize = qps_pool
        return cls(sdk.load().ApiClient(configuration=conf))

    async def close(self) -> None:
        """Close the underlying connection pool."""
        await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def host(self) -> str:
        """The API server URL."""
        return str(self._api.configuration.host)

    # -- transport -------------------------------------------------------------------------------

    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> Any:
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        started = time.monotonic()
        try:
            resp = await self._api.call_api(
                path,
                method,
                query_params=params,
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self._counted("<error>", method).inc()
            raise ApiUnavailable(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        self._counted(str(resp.status), method).inc()
        self._latency(method).observe(time.monotonic() - started)
        if not 200 <= resp.status <= 299:
            try:
                text = await resp.text()
            finally:
                resp.release()
            raise error_from_response(resp.status, text)
        return resp

    def _counted(self, code: str, method: str) -> Any:
        """``rest_client_requests_total{code,method,host}``'s child, looked up once per code and method."""
        child = self._request_counters.get((code, method))
        if child is None:
            child = self._request_counters[(code, method)] = REST_CLIENT_REQUESTS.labels(code, method, self.host)
        return child

    def _latency(self, method: str) -> Any:
        child = self._latencies.get(method)
        if child is None:
            child = self._latencies[method] = REST_CLIENT_LATENCY.labels(method, self.host)
        return child

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 60.0,
        whole: bool = False,
    ) -> KubeObject:
        """Send one request and decode its JSON answer.

        Without ``whole``, an answer's ``metadata.managedFields`` are left out unless :attr:`answers_managed_fields`;
        ``whole=True`` (lists, whose items all carry them) decodes the answer as sent.

        Raises:
            ApiError: The server answered with an error, or could not be reached.
        """
        bounds = _REQUEST_TIMEOUTS.get(timeout) or _request_timeout(timeout)
        async with self._lane(method, path):
            resp = await self._open(method, path, query=query, body=body, content_type=content_type, timeout=bounds)
            try:
                raw = await resp.read()
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise ApiUnavailable(f"{method} {path}: {exc}") from exc
            finally:
                resp.release()
        if not raw:
            return {}
        data = from_json(raw if whole or self.answers_managed_fields else without_managed_fields(raw))
        return data if isinstance(data, dict) else {"value": data}

    @contextlib.asynccontextmanager
    async def _lane(self, method: str, path: str) -> AsyncIterator[None]:
        """Hold a bulk slot for the request, unless it is in the priority lane (module docstring)."""
        if priority_request(path):
            yield
            return
        started = time.monotonic()
        async with self._bulk:
            waited = self._waits.get(method)
            if waited is None:
                waited = self._waits[method] = REST_CLIENT_WAIT.labels(method, self.host)
            waited.observe(time.monotonic() - started)
            yield

    # -- typed operations ------------------------------------------------------------------------

    async def get(
        self, rt: ResourceType, name: str, namespace: str | None = None, *, subresource: str | None = None
    ) -> KubeObject:
        """Read one object (or its ``status``/``scale`` subresource)."""
        return await self.request("GET", rt.path(namespace, name, subresource))

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
        """List objects of one type (one page when ``limit`` is set).

        ``shard_selector`` is sent as ``shardSelector`` (KEP-5866): an API server with ``ShardedListAndWatch`` answers
        only the objects whose hashed field falls in its ranges; one without ignores it.
        """
        data = await self.request(
            "GET",
            rt.path(namespace),
            query={
                "labelSelector": label_selector,
                "fieldSelector": field_selector,
                "resourceVersion": resource_version,
                "limit": limit,
                "continue": continue_token,
                "shardSelector": shard_selector,
            },
            whole=True,
        )
        md = data.get("metadata") or {}
        items = data.get("items") or []
        for item in items:
            # Lists omit apiVersion/kind on items; restore them so items look like watched objects.
            item.setdefault("apiVersion", rt.api_version)
            item.setdefault("kind", rt.kind)
        return ObjectList(items, str(md.get("resourceVersion") or ""), str(md.get("continue") or ""))

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
        """List every object of one type, following ``continue`` tokens."""
        items: list[KubeObject] = []
        token: str | None = None
        rv = ""
        while True:
            page = await self.list(
                rt,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
                shard_selector=shard_selector,
            )
            items.extend(page.items)
            rv = page.resource_version or rv
            if not page.continue_token:
                return ObjectList(items, rv)
            token = page.continue_token

    async def create(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> KubeObject:
        """Create an object; ``namespace`` defaults to ``body.metadata.namespace``."""
        ns = namespace or (body.get("metadata") or {}).get("namespace")
        payload = {"apiVersion": rt.api_version, "kind": rt.kind, **body}
        return await self.request(
            "POST",
            rt.path(ns),
            body=payload,
            query={"fieldManager": field_manager, "dryRun": "All" if dry_run else None},
        )

    async def replace(
        self,
        rt: ResourceType,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Replace an object (PUT); its ``metadata.resourceVersion`` acts as a precondition."""
        md = body.get("metadata") or {}
        ns = namespace or md.get("namespace")
        return await self.request(
            "PUT", rt.path(ns, md.get("name"), subresource), body=body, query={"fieldManager": field_manager}
        )

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
        """Patch an object or subresource.

        Args:
            rt: Resource type.
            name: Object name.
            body: A merge/strategic patch dict, a JSON patch list, or a full object for ``apply``.
            namespace: Namespace for namespaced types.
            patch_type: ``merge`` (RFC 7386), ``json`` (RFC 6902), ``strategic`` or ``apply`` (SSA).
            subresource: ``status`` or ``scale`` to patch a subresource.
            field_manager: Required for ``apply``; names the owner of the applied fields.
            force: For ``apply``, take ownership of conflicting fields.
        """
        if patch_type == "apply":
            if not field_manager:
                raise ValueError("server-side apply needs a field_manager")
            body = {"apiVersion": rt.api_version, "kind": rt.kind, **body}
        return await self.request(
            "PATCH",
            rt.path(namespace, name, subresource),
            body=body,
            content_type=_CONTENT_TYPES[patch_type],
            query={
                "fieldManager": field_manager,
                "force": "true" if (force and patch_type == "apply") else None,
            },
        )

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
        md = body.get("metadata") or {}
        return await self.patch(
            rt,
            str(md.get("name")),
            dict(body),
            namespace or md.get("namespace"),
            patch_type="apply",
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

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
        """Delete one object, optionally only if it still has the given UID/resourceVersion.

        Raises:
            Conflict: A precondition did not hold (the object was replaced meanwhile).
            NotFound: The object does not exist.
        """
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        pre: dict[str, str] = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        if pre:
            options["preconditions"] = pre
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return await self.request("DELETE", rt.path(namespace, name), body=options)

    async def get_scale(self, rt: ResourceType, name: str, namespace: str) -> KubeObject:
        """Read the ``scale`` subresource (an ``autoscaling/v1`` Scale)."""
        return await self.get(rt, name, namespace, subresource="scale")

    async def set_scale(self, rt: ResourceType, name: str, namespace: str, replicas: int) -> KubeObject:
        """Set ``spec.replicas`` through the ``scale`` subresource."""
        return await self.patch(rt, name, {"spec": {"replicas": replicas}}, namespace, subresource="scale")

    async def watch(
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

        ``shard_selector`` is sent as ``shardSelector`` (see :meth:`list`). With ``managed_fields=False`` the
        events' objects come without ``metadata.managedFields``, which are then cut out before decoding
        (:mod:`.managedfields`): for a reader that would drop them anyway.

        An ``ERROR`` event carrying a 410 Status is raised as :class:`~kthena_py.kube.errors.Gone`, other
        ``ERROR`` events as the matching :class:`~kthena_py.kube.errors.ApiError`. A stream that stays
        silent for ``timeout_seconds + WATCH_IDLE_MARGIN`` (the server would have ended it by then) is
        dead: :class:`~kthena_py.kube.errors.ApiUnavailable`. ``on_open`` is called once the server has
        accepted the watch (its answer's headers arrived).
        """
        idle = timeout_seconds + WATCH_IDLE_MARGIN
        resp = await self._open(
            "GET",
            rt.path(namespace),
            query={
                "watch": "true",
                "resourceVersion": resource_version,
                "labelSelector": label_selector,
                "fieldSelector": field_selector,
                "timeoutSeconds": timeout_seconds,
                "allowWatchBookmarks": "true" if allow_bookmarks else None,
                "shardSelector": shard_selector,
            },
            timeout=aiohttp.ClientTimeout(sock_connect=CONNECT_TIMEOUT, sock_read=idle),
        )
        if on_open is not None:
            on_open()
        resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
        received = WATCH_BYTES.labels(resource)
        by_type: dict[str, Any] = {}
        try:
            while True:
                try:
                    # The connection's read timeout (sock_read=idle, re-armed by aiohttp as data arrives) ends a
                    # silent stream: no timer per line.
                    line = await resp.content.readline()
                except (TimeoutError, aiohttp.ClientError) as exc:
                    raise ApiUnavailable(f"watch {rt.plural}: {type(exc).__name__}: {exc}") from exc
                if not line:
                    return
                received.inc(len(line))
                line = line.strip()
                if not line:
                    continue
                event = from_json(line if managed_fields else without_managed_fields(line))
                etype = str(event.get("type", ""))
                counter = by_type.get(etype)
                if counter is None:
                    counter = by_type[etype] = WATCH_EVENTS.labels(resource, etype)
                counter.inc()
                obj = event.get("object") or {}
                if etype == "ERROR":
                    raise error_from_response(int(obj.get("code") or 500), json.dumps(obj))
                yield WatchEvent(etype, obj)
        finally:
            resp.release()
            resp.close()

    async def server_version(self) -> KubeObject:
        """Return ``/version`` of the API server."""
        return await self.request("GET", "/version")

    async def resource_served(self, rt: ResourceType) -> bool:
        """Return whether discovery lists ``rt`` (for optional integrations such as Volcano)."""
        base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
        try:
            data = await self.request("GET", base)
        except ApiError as exc:
            if exc.status in (404, 503):
                return False
            raise
        return any(r.get("name") == rt.plural for r in data.get("resources") or [])


def _in_cluster_usable() -> bool:
    k8s = sdk.load()
    try:
        k8s.load_incluster_config(client_configuration=k8s.Configuration())
    except k8s.ConfigException:
        return False
    return True


def _choose_config(path: str | None) -> tuple[str, str] | None:
    """The kubeconfig to load and how it was chosen, or ``None`` for the in-cluster service account.

    Raises:
        ConfigError: Nothing is configured.
    """
    if path:
        return path, f"--kubeconfig {path}"
    env = os.environ.get("KUBECONFIG", "")
    if env.strip(os.pathsep):
        return env, f"$KUBECONFIG={env}"
    # Like client-go, an incomplete in-cluster environment (no token mounted) falls through to ~/.kube/config.
    if os.environ.get("KUBERNETES_SERVICE_HOST") and _in_cluster_usable():
        return None
    home = os.path.join(os.path.expanduser("~"), ".kube", "config")
    if os.path.exists(home):
        return home, home
    raise ConfigError(
        "no Kubernetes configuration found: pass --kubeconfig, set $KUBECONFIG, run in a cluster, or create " + home
    )


def _first_current_context(paths: str) -> str | None:
    """The ``current-context`` of a ``$KUBECONFIG`` list as client-go merges it: the first file that sets it wins.

    (kubernetes-asyncio lets the last one win; an unreadable file is left for the loader to report.)
    """
    for path in paths.split(os.pathsep):
        if not path:
            continue
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as handle:
                document = yaml.safe_load(handle)
        except (OSError, yaml.YAMLError):
            continue
        current = document.get("current-context") if isinstance(document, dict) else None
        if isinstance(current, str) and current:
            return current
    return None


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
