"""Three sharded managers on one API server: each namespace reconciled by exactly one replica, handed over cleanly.

Every manager runs every controller (``sharding=True``) through a client that logs each write it sends with the
namespace it goes to and when, so a namespace written by two replicas, or by two at once, shows in the log. The
managers run as by default, with per-range informers (this API server filters shards), except in the kill test,
whose namespaces are created after the group settled and which therefore keeps the mixed-hash slots
(``--no-shard-informers``): a recut meanwhile would move them. Drops of other replicas' requests are still counted
(PodGroups and cluster-scoped objects reach every replica).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kthena_py.controllers import register_all
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient, NotFound
from kthena_py.kube.resources import EVENTS, LEASES, PODS
from kthena_py.runtime import metrics
from kthena_py.runtime.manager import Manager, ManagerOptions
from kthena_py.runtime.shards.member import SLOT_MAP_ANNOTATION, lease_name
from kthena_py.testing.slots import SlotOwners
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest

TIMING = {"lease_duration": 6.0, "renew_deadline": 4.0, "retry_period": 0.5}
GROUP = "sharded-managers"
NAMESPACED = re.compile(r"/namespaces/([^/]+)/([^/]+)")
ENTRY = {"containers": [{"name": "engine", "image": "nginx:1.27"}]}


class WriteLog(KubeClient):
    """A client that logs every write it sends to a namespaced object (leases and Events aside)."""

    identity = ""
    log: list[tuple[float, str, str]]

    async def _open(self, method: str, path: str, **kw: Any) -> Any:
        found = NAMESPACED.search(path)
        if method != "GET" and found is not None and found.group(2) not in ("leases", "events"):
            self.log.append((time.monotonic(), self.identity, found.group(1)))
        return await super()._open(method, path, **kw)


@dataclass
class Replica:
    manager: Manager
    stop: Callable[[], Awaitable[None]]


@contextlib.asynccontextmanager
async def sharded_manager(
    kubeconfig: Path,
    identity: str,
    lease_namespace: str,
    log: list[tuple[float, str, str]],
    *,
    shard_informers: bool = True,
    group: str = GROUP,
    client_type: type[WriteLog] = WriteLog,
    client_attributes: dict[str, Any] | None = None,
) -> AsyncIterator[Replica]:
    """A sharded manager in this process; a ``client_type`` client (given ``client_attributes``) logs its writes."""
    client = await client_type.from_kubeconfig(str(kubeconfig))
    assert isinstance(client, client_type)
    client.identity, client.log = identity, log
    for attribute, value in (client_attributes or {}).items():
        setattr(client, attribute, value)
    options = ManagerOptions(
        sharding=True,
        shard_informers=shard_informers,
        lease_group=group,
        leader_election_namespace=lease_namespace,
        identity=identity,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        shutdown_timeout=10,
        **TIMING,
    )
    manager = Manager(client, options)
    register_all(manager, workers=2)
    stopping = asyncio.Event()
    task = asyncio.create_task(manager.run(stopping))

    async def stop() -> None:
        stopping.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)

    try:
        yield Replica(manager, stop)
    finally:
        await stop()
        await client.close()


def modelserving(name: str) -> dict[str, Any]:
    role = {"name": "prefill", "replicas": 1, "workerReplicas": 0, "entryTemplate": {"spec": ENTRY}}
    return {
        "metadata": {"name": name},
        "spec": {"replicas": 1, "schedulerName": "default-scheduler", "template": {"roles": [role]}},
    }


async def slot_owners(kube: KubeClient, lease_namespace: str) -> SlotOwners:
    lease = await kube.get(LEASES, f"{GROUP}-slots", lease_namespace)
    assert SLOT_MAP_ANNOTATION in lease["metadata"]["annotations"]
    return SlotOwners(lease)


async def pods_of(kube: KubeClient, namespace: str) -> list[str]:
    items = (await kube.list(PODS, namespace)).items
    return [p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")]


def writers(log: list[tuple[float, str, str]], namespace: str, since: float = 0.0) -> list[str]:
    """The replicas that wrote to ``namespace`` (after ``since``), in the order of their first write."""
    seen: list[str] = []
    for at, who, ns in log:
        if ns == namespace and at >= since and who not in seen:
            seen.append(who)
    return seen


def handed_over_cleanly(log: list[tuple[float, str, str]], namespace: str) -> bool:
    """Every write to ``namespace`` by one replica comes before every write by the next: writers never alternate."""
    sequence = [who for _, who, ns in sorted(log) if ns == namespace]
    changes = sum(1 for a, b in itertools.pairwise(sequence) if a != b)
    return changes <= len(set(sequence)) - 1


async def shards_command(kubeconfig: Path, lease_namespace: str) -> dict[str, Any]:
    """What ``kthena-py shards -o json`` prints for the test's lease group."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "shards",
        f"--kubeconfig={kubeconfig}",
        f"--lease-group={GROUP}",
        f"--namespace={lease_namespace}",
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    shown: dict[str, Any] = json.loads(out)
    return shown


def filtered(controller: str) -> float:
    return sum(
        metrics.REGISTRY.get_sample_value(
            "kthena_shard_filtered_requests_total", {"controller": controller, "stage": stage}
        )
        or 0.0
        for stage in ("event", "queued")
    )


async def test_each_namespace_is_reconciled_by_one_replica_and_handed_over_on_a_stop(
    kubeconfig: Path, kube: KubeClient, namespace: str, make_namespace: Callable[..., str]
) -> None:
    log: list[tuple[float, str, str]] = []
    teams = [make_namespace(f"shard-team-{i}") for i in range(12)]
    filtered_before = filtered("modelserving")
    async with contextlib.AsyncExitStack() as stack:
        replicas = {
            name: await stack.enter_async_context(sharded_manager(kubeconfig, name, namespace, log))
            for name in ("a", "b", "c")
        }

        def shares() -> list[int]:
            members = [r.manager.shard_member for r in replicas.values()]
            return sorted(len(m.owned) if m is not None else 0 for m in members)

        await eventually(lambda: shares() == [21, 21, 22], timeout=60, description="three equal shares")
        for team in teams:
            await kube.create(MODELSERVINGS, modelserving("llm"), team)

        async def every_entry_pod() -> bool:
            return all([await pods_of(kube, t) for t in teams])

        await eventually(every_entry_pod, timeout=60, description="an entry pod in every namespace")
        owners = await slot_owners(kube, namespace)
        for team in teams:
            assert writers(log, team) == [owners.of(team)], team
        if metrics.REGISTRY.get_sample_value("kthena_shard_server_filtering") == 1:
            # The API server filtered by shardSelector: each replica's cache holds its own namespaces only.
            held = {
                name: {m["metadata"]["namespace"] for m in replica.manager.cache.list(MODELSERVINGS)} & set(teams)
                for name, replica in replicas.items()
            }
            assert set().union(*held.values()) == set(teams)
            for name, namespaces in held.items():
                assert all(owners.of(team) == name for team in namespaces), (name, namespaces)
        else:
            assert filtered("modelserving") > filtered_before  # the other replicas' namespaces were dropped here
        shown = await shards_command(kubeconfig, namespace)
        for team in teams:
            assert shown["namespaces"][team].split("@")[0] == owners.of(team)
        assert sorted(m["slots"] for m in shown["members"].values()) == [21, 21, 22]

        # Work outside the controllers is sharded too: a pod becoming Ready gives one RoleRunning Event, written
        # by its namespace's owner, not one per replica (every replica's informer sees the pod).
        ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        for team in teams:
            for pod in await pods_of(kube, team):
                await kube.patch(PODS, pod, {"status": ready}, team, subresource="status")

        async def running_events() -> dict[str, list[dict[str, Any]]]:
            found = {t: (await kube.list_all(EVENTS, t)).items for t in teams}
            return {t: [e for e in items if e.get("reason") == "RoleRunning"] for t, items in found.items()}

        async def every_role_running() -> bool:
            return all((await running_events()).values())

        await eventually(every_role_running, timeout=30, description="a RoleRunning Event in every namespace")
        await asyncio.sleep(1.5)  # what another replica would have written by now
        for team, events in (await running_events()).items():
            assert [(e["reportingInstance"], e.get("count", 1)) for e in events] == [(owners.of(team), 1)], team

        # A graceful stop of the busiest replica: the others take its namespaces over and reconcile them.
        by_owner = {name: [t for t in teams if owners.of(t) == name] for name in replicas}
        leaving = max(by_owner, key=lambda name: len(by_owner[name]))
        stopped = replicas.pop(leaving)
        member = stopped.manager.shard_member
        assert member is not None
        await stopped.stop()
        await eventually(lambda: shares() in ([32, 32], [31, 33]), timeout=60, description="two shares")
        assert not member.owned
        with pytest.raises(NotFound):  # a graceful stop deletes the replica's own Lease
            await kube.get(LEASES, lease_name(GROUP, leaving), namespace)
        after_stop = time.monotonic()
        for team in by_owner[leaving]:
            for pod in await pods_of(kube, team):
                await kube.delete(PODS, pod, team)

        async def recreated() -> bool:
            return all([await pods_of(kube, t) for t in by_owner[leaving]])

        await eventually(recreated, timeout=60, description="the stopped replica's pods recreated by the others")
        new_owners = await slot_owners(kube, namespace)
        for team in by_owner[leaving]:
            successor = new_owners.of(team)
            assert successor != leaving
            assert writers(log, team, since=after_stop) == [successor], team
        for team in teams:
            assert handed_over_cleanly(log, team), team


async def test_scaling_three_to_four_to_two_under_churn_hands_over_without_overlap(
    kubeconfig: Path, kube: KubeClient, namespace: str, make_namespace: Callable[..., str]
) -> None:
    """A fourth replica joins and then two leave while pods are deleted all the time: every namespace's writes
    pass from one owner to the next without alternating, and every deleted pod comes back."""
    log: list[tuple[float, str, str]] = []
    teams = [make_namespace(f"shard-scale-{i}") for i in range(12)]
    async with contextlib.AsyncExitStack() as stack:
        replicas = {
            name: await stack.enter_async_context(sharded_manager(kubeconfig, name, namespace, log))
            for name in ("a", "b", "c")
        }

        def shares() -> list[int]:
            members = [r.manager.shard_member for r in replicas.values()]
            return sorted(len(m.owned) if m is not None else 0 for m in members)

        await eventually(lambda: shares() == [21, 21, 22], timeout=60, description="three equal shares")
        for team in teams:
            await kube.create(MODELSERVINGS, modelserving("llm"), team)

        async def every_entry_pod() -> bool:
            return all([await pods_of(kube, t) for t in teams])

        await eventually(every_entry_pod, timeout=60, description="an entry pod in every namespace")
        deleted = 0
        churning = asyncio.Event()
        churning.set()

        async def churn() -> None:
            nonlocal deleted
            turn = 0
            while churning.is_set():
                team = teams[turn % len(teams)]
                turn += 1
                for pod in await pods_of(kube, team):
                    with contextlib.suppress(NotFound):
                        await kube.delete(PODS, pod, team)
                        deleted += 1
                await asyncio.sleep(0.1)

        churner = asyncio.create_task(churn())
        try:
            replicas["d"] = await stack.enter_async_context(sharded_manager(kubeconfig, "d", namespace, log))
            await eventually(lambda: shares() == [16, 16, 16, 16], timeout=60, description="four equal shares")
            for name in ("a", "b"):
                await replicas.pop(name).stop()
            await eventually(lambda: shares() == [32, 32], timeout=60, description="two equal shares")
            await eventually(lambda: deleted >= len(teams), timeout=60, description="a pod of every namespace deleted")
        finally:
            churning.clear()
            await churner
        await eventually(every_entry_pod, timeout=60, description="every deleted pod recreated")
        for team in teams:
            assert handed_over_cleanly(log, team), (team, writers(log, team))
        # and the survivors own every namespace now: each one's pod, deleted once more, comes back from its owner
        owners = await slot_owners(kube, namespace)
        assert set(owners.values()) == {"c", "d"}
        settled = time.monotonic()
        for team in teams:
            for pod in await pods_of(kube, team):
                await kube.delete(PODS, pod, team)
        await eventually(every_entry_pod, timeout=60, description="every pod recreated by its final owner")
        for team in teams:
            assert writers(log, team, since=settled) == [owners.of(team)], team


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_killed_replicas_namespaces_are_taken_over_after_its_lease_expires_and_resynced(
    kubeconfig: Path, kube: KubeClient, namespace: str, make_namespace: Callable[..., str]
) -> None:
    """Replica "p" is a real ``kthena-py manager --sharding`` process, killed with SIGKILL (no release). The pods of
    its namespaces are deleted right after: the survivors see those changes while the namespaces are not theirs,
    so only the resync of slots taken over brings them back; and they take over only after p's lease expired."""
    log: list[tuple[float, str, str]] = []
    metrics_port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "manager",
        "--kubeconfig",
        str(kubeconfig),
        "--sharding",
        "--no-shard-informers",  # namespaces are created after the group settled: no recut may move them
        f"--lease-group={GROUP}",
        f"--leader-election-namespace={namespace}",
        *(f"--{k.replace('_', '-')}={v}" for k, v in TIMING.items()),
        "--health-probe-bind-address=0",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        "--webhook-port=0",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            for name in ("a", "b"):
                await stack.enter_async_context(
                    sharded_manager(kubeconfig, name, namespace, log, shard_informers=False)
                )

            async def three_owners() -> dict[int, str]:
                try:
                    owners = await slot_owners(kube, namespace)
                except (NotFound, AssertionError):
                    return {}
                counts = sorted(list(owners.values()).count(o) for o in set(owners.values()))
                return owners if len(owners) == 64 and counts == [21, 21, 22] else {}

            owners = await eventually(three_owners, timeout=90, description="three members with equal shares")
            process_id = next(o for o in set(owners.values()) if o not in ("a", "b"))
            theirs: list[str] = []
            ours: list[str] = []
            while len(theirs) < 3 or len(ours) < 2:
                ns = make_namespace("shard-kill")
                (theirs if owners.of(ns) == process_id else ours).append(ns)
            for ns in theirs + ours:
                await kube.create(MODELSERVINGS, modelserving("llm"), ns)

            async def every_entry_pod() -> bool:
                return all([await pods_of(kube, ns) for ns in theirs + ours])

            await eventually(every_entry_pod, timeout=60, description="an entry pod in every namespace")
            assert all(not writers(log, ns) for ns in theirs)  # p's namespaces were written by p alone
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{metrics_port}/metrics") as reply,
            ):
                exported = await reply.text()
            assert "kthena_shard_server_filtering 1.0" in exported  # the test tier's API server filters shards
            assert 'kthena_shard_owned_objects{kind="ModelServing"}' in exported

            proc.kill()
            await proc.wait()
            killed_at = time.monotonic()
            for ns in theirs:
                for pod in await pods_of(kube, ns):
                    await kube.delete(PODS, pod, ns)

            async def restored() -> bool:
                return all([len(await pods_of(kube, ns)) == 1 for ns in theirs])

            await eventually(restored, timeout=90, description="the killed replica's pods recreated by the others")
            new_owners = await slot_owners(kube, namespace)
            for ns in theirs:
                first_write = min(at for at, _, written in log if written == ns)
                # p renewed at most one retry period before it was killed; nobody may take over before its lease
                # (6 s, plus the 2 s skew margin) has run out
                assert first_write - killed_at >= TIMING["lease_duration"] - 2 * TIMING["retry_period"], ns
                assert writers(log, ns) == [new_owners.of(ns)], ns
            for ns in ours:
                assert handed_over_cleanly(log, ns), ns
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
