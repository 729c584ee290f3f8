"""What the activator knows of the cluster: ModelServings, their entry pods and AutoscalingPolicies, from informers.

Guarantees:

* One :class:`~kthena_py.runtime.cache.SharedCache` per watched namespace (one for all namespaces by default);
  pods are narrowed to those labelled ``modelserving.volcano.sh/name`` and filed by it. AutoscalingPolicy is
  optional (a cluster without the CRD still routes, with annotation opt-in only), and so are Kthena's ModelRoute
  and ModelServer (their model names are added when served, :mod:`kthena_py.plan.activator.routes`) and
  kthena_py's ModelPool (its members are held up to its swap budget, :mod:`kthena_py.plan.activator.pools`).
* The model directory (:func:`~kthena_py.plan.activator.directory.build_directory`) is rebuilt on the first read
  after a ModelServing, AutoscalingPolicy, ModelRoute, ModelServer or ModelPool changed, never more often. A
  target's backends (all its Ready entry pods, or those with one adapter loaded) are computed on the first read
  after one of its pods (or, for a pod whose label moved, its former ModelServing's) changed, and kept until
  then; a relist delivers its differences as changes, so nothing stays stale after one.
* :meth:`Catalog.wait_until` waits for a condition about one ModelServing without polling: it is looked at again
  only when an informer delivers a change of that ModelServing or of one of its pods (or a policy or pool), and
  once more at the deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from kthena_py.kube import WatchApi
from kthena_py.kube.objects import KubeObject, labels_of, name_of, namespace_of
from kthena_py.plan.activator.backends import Backend, entry_backends
from kthena_py.plan.activator.directory import AdapterRoute, Directory, build_directory
from kthena_py.plan.activator.pools import PoolRef
from kthena_py.plan.activator.routes import route_targets
from kthena_py.plan.activator.targets import Target
from kthena_py.runtime.cache import SharedCache
from kthena_py.vocab.labels import SERVING_NAME

from .resources import AUTOSCALINGPOLICIES, MODELPOOLS, MODELROUTES, MODELSERVERS, MODELSERVINGS, PODS

__all__ = ["Catalog"]


class _Notify:
    """An informer handler that wakes the waiters of the ModelServing an object belongs to."""

    def __init__(self, catalog: Catalog, key_of: Callable[[KubeObject], str | None], rebuild: bool) -> None:
        self._catalog = catalog
        self._key_of = key_of
        self._rebuild = rebuild

    def _changed(self, obj: KubeObject) -> None:
        if self._rebuild:
            self._catalog.invalidate()
        key = self._key_of(obj)
        if key is None:
            self._catalog.forget_backends()
            self._catalog.wake_all()
        else:
            self._catalog.forget_backends(key)
            self._catalog.wake(key)

    def on_add(self, obj: KubeObject) -> None:
        self._changed(obj)

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        old_key = self._key_of(old)
        if old_key is not None and old_key != self._key_of(new):
            self._catalog.forget_backends(old_key)  # a pod moved to another ModelServing (its label changed)
        self._changed(new)

    def on_delete(self, obj: KubeObject) -> None:
        self._changed(obj)


def _ms_key(obj: KubeObject) -> str | None:
    return f"{namespace_of(obj)}/{name_of(obj)}"


def _pod_key(obj: KubeObject) -> str | None:
    owner = labels_of(obj).get(SERVING_NAME)
    return f"{namespace_of(obj)}/{owner}" if owner else None


class Catalog:
    """ModelServings, their entry pods and policies, as informers see them (see the module docstring)."""

    def __init__(self, client: WatchApi, namespaces: Iterable[str] = (), *, default_budget: float) -> None:
        scopes: list[str | None] = list(dict.fromkeys(namespaces)) or [None]
        self._caches: dict[str | None, SharedCache] = {ns: SharedCache(client, namespace=ns) for ns in scopes}
        self._default_budget = default_budget
        self._directory: Directory | None = None
        self._backends: dict[tuple[str, int, tuple[str, str] | None], tuple[Backend, ...]] = {}
        self._events: dict[str, asyncio.Event] = {}
        for cache in self._caches.values():
            cache.select(PODS, SERVING_NAME)
            cache.index_label(PODS, SERVING_NAME)
            cache.informer(PODS).add_handler(_Notify(self, _pod_key, rebuild=False))
            cache.informer(MODELSERVINGS).add_handler(_Notify(self, _ms_key, rebuild=True))
            for optional in (AUTOSCALINGPOLICIES, MODELROUTES, MODELSERVERS, MODELPOOLS):
                cache.informer(optional, optional=True).add_handler(_Notify(self, lambda _: None, rebuild=True))

    @property
    def caches(self) -> list[SharedCache]:
        """The caches (one per namespace scope)."""
        return list(self._caches.values())

    async def start(self) -> None:
        """Start every informer."""
        for cache in self._caches.values():
            await cache.start()

    async def stop(self) -> None:
        """Stop every informer."""
        for cache in self._caches.values():
            await cache.stop()

    @property
    def synced(self) -> bool:
        """Whether every informer has listed its objects."""
        return all(cache.synced for cache in self._caches.values())

    async def wait_for_sync(self, timeout: float) -> bool:
        """Wait until every informer listed its objects; ``False`` on timeout."""
        results = [await cache.wait_for_sync(timeout) for cache in self._caches.values()]
        return all(results)

    # -- reads ---------------------------------------------------------------------------------

    def _cache_for(self, namespace: str) -> SharedCache:
        return self._caches.get(namespace) or self._caches[next(iter(self._caches))]

    def directory(self) -> Directory:
        """Model names to targets (rebuilt after a change)."""
        if self._directory is None:
            modelservings = [ms for cache in self._caches.values() for ms in cache.list(MODELSERVINGS)]
            policies = [p for cache in self._caches.values() for p in cache.list(AUTOSCALINGPOLICIES)]
            routes = route_targets(
                [r for cache in self._caches.values() for r in cache.list(MODELROUTES)],
                [s for cache in self._caches.values() for s in cache.list(MODELSERVERS)],
                modelservings,
            )
            self._directory = build_directory(modelservings, policies, self._default_budget, routes, self.pools())
        return self._directory

    def modelserving(self, target: Target) -> KubeObject | None:
        """The cached ModelServing of ``target``."""
        return self._cache_for(target.namespace).get(MODELSERVINGS, target.name, target.namespace)

    def modelserving_at(self, namespace: str, name: str) -> KubeObject | None:
        """The cached ModelServing ``namespace/name``."""
        return self._cache_for(namespace).get(MODELSERVINGS, name, namespace)

    def modelservings(self) -> list[KubeObject]:
        """Every cached ModelServing."""
        return [ms for cache in self._caches.values() for ms in cache.list(MODELSERVINGS)]

    def policies(self) -> list[KubeObject]:
        """Every cached AutoscalingPolicy (none when the CRD is not served)."""
        return [p for cache in self._caches.values() for p in cache.list(AUTOSCALINGPOLICIES)]

    def pods(self, target: Target) -> list[KubeObject]:
        """The cached pods of ``target``."""
        return self._cache_for(target.namespace).by_label(PODS, SERVING_NAME, target.name, target.namespace)

    def backends(self, target: Target) -> tuple[Backend, ...]:
        """The Ready entry pods of ``target`` (kept until a pod of ``target`` changes)."""
        key = (target.key, target.port, None)
        found = self._backends.get(key)
        if found is None:
            found = self._backends[key] = tuple(entry_backends(self.pods(target), target.port))
        return found

    def adapter_backends(self, route: AdapterRoute) -> tuple[Backend, ...]:
        """The Ready entry pods of ``route``'s target with its adapter loaded (kept until one of its pods changes)."""
        target = route.target
        key = (target.key, target.port, route.requirement)
        found = self._backends.get(key)
        if found is None:
            found = self._backends[key] = tuple(entry_backends(self.pods(target), target.port, route.requirement))
        return found

    def pool(self, ref: PoolRef) -> KubeObject | None:
        """The cached ModelPool ``ref`` (``None`` when gone or the CRD is not served)."""
        return self.pool_at(ref.namespace, ref.name)

    def pool_at(self, namespace: str, name: str) -> KubeObject | None:
        """The cached ModelPool ``namespace/name``."""
        return self._cache_for(namespace).get(MODELPOOLS, name, namespace)

    def pools(self) -> list[KubeObject]:
        """Every cached ModelPool (none when the CRD is not served)."""
        return [p for cache in self._caches.values() for p in cache.list(MODELPOOLS)]

    # -- change notification --------------------------------------------------------------------

    def invalidate(self) -> None:
        """Rebuild the directory on the next read."""
        self._directory = None

    def forget_backends(self, key: str | None = None) -> None:
        """Compute the backends of ``namespace/name`` (of every target if ``None``) again on the next read."""
        if key is None:
            self._backends.clear()
            return
        for cached in [k for k in self._backends if k[0] == key]:
            del self._backends[cached]

    def wake(self, key: str) -> None:
        """Wake the waiters of ``namespace/name``."""
        event = self._events.pop(key, None)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        """Wake every waiter."""
        events, self._events = self._events, {}
        for event in events.values():
            event.set()

    async def wait_until(self, key: str, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``condition`` holds, looking again after each change of ``key``; ``False`` after ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            event = self._events.setdefault(key, asyncio.Event())
            if condition():
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                async with asyncio.timeout(remaining):
                    await event.wait()
            except TimeoutError:
                return condition()
