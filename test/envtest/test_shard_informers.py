"""Three sharded managers with per-range informers (``--shard-informers``) on an API server that filters shards.

The envtest API server (1.36.3, ``ShardedListAndWatch`` on) applies each replica's ``shardSelector``: every
replica's cache holds the objects of exactly the namespaces its slots cut out of the raw hash space, and writes to
a namespace come from its owner only. A family of namespaces created later drifts the shares: the group recuts
(every replica releases, the new cuts apply, the slots are taken again) and the caches follow the new ranges, with
no namespace written by two replicas in turn more than once.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import AlreadyExists, KubeClient, NotFound
from kthena_py.kube.resources import LEASES, NAMESPACES, PODS
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.shards.member import namespace_owner, read_cut_state
from kthena_py.testing.wait import eventually

from .test_sharded_managers import WriteLog, handed_over_cleanly, modelserving, pods_of, sharded_manager, writers

pytestmark = pytest.mark.envtest

GROUP = "shard-informers"


class CreateLog(WriteLog):
    """A :class:`WriteLog` that also records every workload create the API server refused as already existing."""

    refused: list[tuple[str, str]]

    async def _open(self, method: str, path: str, **kw: Any) -> Any:
        try:
            return await super()._open(method, path, **kw)
        except AlreadyExists:
            if method == "POST" and "/leases" not in path and "/events" not in path:
                self.refused.append((self.identity, path))
            raise


def cached_namespaces(manager: Manager, rt: Any) -> set[str]:
    return {o["metadata"]["namespace"] for o in manager.cache.list(rt)}


async def only_own_objects_cached(replicas: dict[str, Manager], namespaces: list[str]) -> None:
    """Each replica's cache holds the ModelServings and pods of ``namespaces`` it owns, and nobody else's.

    Other tests' namespaces may still be there (deleted, not yet gone): they too must be cached by their owner only.
    """
    owned = {
        name: {ns for ns in namespaces if m.shard_member and m.shard_member.owns(ns)} for name, m in replicas.items()
    }
    assert sorted(ns for mine in owned.values() for ns in mine) == sorted(namespaces)  # each has one owner
    for name, manager in replicas.items():
        member = manager.shard_member
        assert member is not None
        for rt in (MODELSERVINGS, PODS):
            cached = cached_namespaces(manager, rt)
            assert {ns for ns in cached if not member.owns(ns)} == set(), (name, rt.plural)
        assert cached_namespaces(manager, MODELSERVINGS) >= owned[name], name


async def test_each_replica_lists_only_its_ranges_and_follows_a_recut(
    kubeconfig: Path, kube: KubeClient, namespace: str, make_namespace: Callable[..., str]
) -> None:
    log: list[tuple[float, str, str]] = []
    refused: list[tuple[str, str]] = []
    teams = [make_namespace(f"inf-team-{i}") for i in range(12)]
    family = f"b{uuid.uuid4().hex[:6]}"
    burst = [f"{family}-{i}" for i in range(40)]
    async with contextlib.AsyncExitStack() as stack:
        replicas = {
            name: (
                await stack.enter_async_context(
                    sharded_manager(
                        kubeconfig,
                        name,
                        namespace,
                        log,
                        group=GROUP,
                        client_type=CreateLog,
                        client_attributes={"refused": refused},
                    )
                )
            ).manager
            for name in ("a", "b", "c")
        }

        async def settled(generation: int) -> dict[str, str] | None:
            """Each namespace's owner once the group holds ``generation`` and every replica listed its slots."""
            try:
                lease = await kube.get(LEASES, f"{GROUP}-slots", namespace)
            except NotFound:
                return None
            state = read_cut_state(lease)
            if state is None or state.generation < generation or state.pending is not None:
                return None
            members = [m.shard_member for m in replicas.values()]
            if sorted(len(m.owned) if m is not None else 0 for m in members) != [21, 21, 22]:
                return None
            if any(m._listed != m.shard_member.owned for m in replicas.values() if m.shard_member is not None):
                return None
            owners = {ns: (namespace_owner(lease, ns) or "").split("@")[0] for ns in teams + burst}
            return owners if all(owners.values()) else None

        owners = await eventually(lambda: settled(1), timeout=60, description="the first cuts applied and listed")
        for manager in replicas.values():  # known once the manager asked the API server, before its controllers ran
            assert manager.caches_own_namespaces_only
        for ms in teams:
            await kube.create(MODELSERVINGS, modelserving("llm"), ms)

        async def every_entry_pod(namespaces: list[str]) -> bool:
            return all([await pods_of(kube, ns) for ns in namespaces])

        await eventually(lambda: every_entry_pod(teams), timeout=60, description="an entry pod in every namespace")
        for team in teams:
            assert writers(log, team) == [owners[team]], team
        await only_own_objects_cached(replicas, teams)
        for name, manager in replicas.items():
            mine = {ns for ns in teams if owners[ns] == name}
            assert {ns for ns in teams if manager.responsible_for(ns)} == mine, name

        # a family of names created after the cut: the shares drift, the group recuts, the caches follow
        for ns in burst:
            await kube.create(NAMESPACES, {"metadata": {"name": ns, "labels": {"kthena-py/test": "1"}}})
        try:
            owners = await eventually(lambda: settled(2), timeout=90, description="the recut applied and listed")
            for ns in burst[:6]:
                await kube.create(MODELSERVINGS, modelserving("llm"), ns)
            await eventually(lambda: every_entry_pod(burst[:6]), timeout=60, description="pods after the recut")
            for ns in burst[:6]:
                assert writers(log, ns) == [owners[ns]], ns
            await only_own_objects_cached(replicas, teams + burst[:6])
            for team in teams:  # a recut may move a namespace: from one owner to the next, never back and forth
                assert handed_over_cleanly(log, team), team
            # a new owner reconciled a namespace only once its cache held the namespace's objects: it never tried
            # to create what its predecessor had created
            assert refused == []
        finally:
            for ns in burst:
                with contextlib.suppress(NotFound):
                    await kube.delete(NAMESPACES, ns)
