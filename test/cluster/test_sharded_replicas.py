"""Three sharded manager processes in a cluster of their own (kwok nodes, Volcano, kube-controller-manager), with
the API server's audit log as the witness.

Thirty namespaces with a ModelServing each become Available; the audit log, which records every write with the
``User-Agent`` of the process that sent it (each replica names its identity there), must show every namespace's
workload written by exactly one replica, the one the slot map gives its namespace to. With ``--shard-informers``
the API server filters each replica's watches: an observer in the test counts every pod watch event, and each
replica must have received about its namespaces' share of them (their sum about the observer's count), where
without per-range informers every replica receives all of them.

Then, with the API server's ``ShardedListAndWatch`` gate on (the replicas' informers list and watch only their
ranges) and off (they cache everything and filter on their side): a fourth replica joins while pods are deleted
all the time, one replica is killed with SIGKILL and another stopped (3 -> 4 -> 2). The audit log must show every
namespace's writes passing from one replica to the next without overlapping in time (the API server received the
next owner's first write after it had answered the previous owner's last), no more owners per namespace than the
handovers give it, the killed replica's namespaces untouched until its lease had expired, and the final owner of
each namespace its last writer; the end state exact: every ModelServing Available with exactly one pod and one
PodGroup.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import sys
from collections import defaultdict
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
import yaml

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient, NotFound
from kthena_py.kube.resources import LEASES, NAMESPACES, PODS
from kthena_py.runtime.informer import Informer
from kthena_py.runtime.shards.member import read_cut_state
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.process import free_ports
from kthena_py.testing.slots import SlotOwners
from kthena_py.testing.wait import eventually

from .msutil import live_pods, modelserving, podgroups, role, wait_available

pytestmark = pytest.mark.cluster

GROUP = "sharded-replicas"
LEASE_NAMESPACE = "kthena-system"
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "verbs": ["create", "update", "patch", "delete"]}, {"level": "None"}],
}
CRDS = sorted((Path(__file__).resolve().parents[2] / "manifests" / "crd").glob("*_*.yaml"))
WORKLOAD = {"pods", "services", "podgroups", "modelservings", "controllerrevisions"}


@dataclass(frozen=True)
class Write:
    """One successful workload write, as the audit log records it."""

    received: datetime
    completed: datetime
    namespace: str
    writer: str
    """The identity the manager named in its ``User-Agent``."""


def audited_writes(audit_log: Path, namespaces: set[str]) -> list[Write]:
    """The managers' successful workload writes to ``namespaces``, in the order the API server received them."""
    found: list[Write] = []
    for line in audit_log.read_text().splitlines():
        entry = json.loads(line)
        ref = entry.get("objectRef") or {}
        agent = entry.get("userAgent") or ""
        if entry.get("stage") != "ResponseComplete" or ref.get("namespace") not in namespaces:
            continue
        if ref.get("resource") not in WORKLOAD or " manager (" not in agent:
            continue
        if (entry.get("responseStatus") or {}).get("code", 0) >= 400:
            continue
        found.append(
            Write(
                datetime.fromisoformat(entry["requestReceivedTimestamp"]),
                datetime.fromisoformat(entry["stageTimestamp"]),
                ref["namespace"],
                agent.rsplit("(", 1)[1].rstrip(")"),
            )
        )
    return sorted(found, key=lambda w: w.received)


def writers_by_namespace(audit_log: Path, namespaces: set[str]) -> dict[str, set[str]]:
    """For each namespace, the managers (identity in the ``User-Agent``) whose workload writes succeeded there."""
    found: dict[str, set[str]] = defaultdict(set)
    for write in audited_writes(audit_log, namespaces):
        found[write.namespace].add(write.writer)
    return found


def runs_of(writes: list[Write]) -> list[list[Write]]:
    """One namespace's writes cut into runs of one writer each (in the order received)."""
    return [list(run) for _, run in itertools.groupby(writes, key=lambda w: w.writer)]


async def start_replica(kubeconfig: Path, *flags: str) -> asyncio.subprocess.Process:
    """A ``kthena-py manager --sharding`` process of the test's lease group; its log goes next to the kubeconfig."""
    logs = kubeconfig.parent / "replica-logs"
    logs.mkdir(exist_ok=True)
    log = open(logs / f"replica-{len(list(logs.iterdir()))}.log", "wb")  # noqa: SIM115 - the process keeps it
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kthena_py",
        "manager",
        "--sharding",
        "--lease-group",
        GROUP,
        "--leader-election-namespace",
        LEASE_NAMESPACE,
        "--kubeconfig",
        str(kubeconfig),
        "--health-probe-bind-address",
        "0",
        "--webhook-port",
        "0",
        *flags,
        stdout=log,
        stderr=log,
    )


async def stop_all(processes: list[asyncio.subprocess.Process]) -> None:
    for p in processes:
        if p.returncode is None:
            p.terminate()
    for p in processes:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(p.wait(), 30)
        if p.returncode is None:
            p.kill()
            await p.wait()


async def balanced_owners(kube: KubeClient, members: int) -> SlotOwners:
    """The owners once all 64 slots are held by ``members`` live members in even shares, no recut pending; else
    empty."""
    with contextlib.suppress(Exception):
        lease = await kube.get(LEASES, f"{GROUP}-slots", LEASE_NAMESPACE)
        owners = SlotOwners(lease)
        shares = [list(owners.values()).count(m) for m in set(owners.values())]
        cuts = read_cut_state(lease)
        if cuts is not None and cuts.pending is not None:
            return SlotOwners({})
        if len(owners) == 64 and len(shares) == members and max(shares) - min(shares) <= 1:
            return owners
    return SlotOwners({})


class EventCounter:
    """An informer handler counting the pod watch events of some namespaces (what an unfiltered watch receives)."""

    def __init__(self, namespaces: set[str]) -> None:
        self.namespaces = namespaces
        self.count = 0

    def _seen(self, obj: dict[str, object]) -> None:
        if (obj.get("metadata") or {}).get("namespace") in self.namespaces:  # type: ignore[union-attr]
            self.count += 1

    def on_add(self, obj: dict[str, object]) -> None:
        self._seen(obj)

    def on_update(self, old: dict[str, object], new: dict[str, object]) -> None:
        self._seen(new)

    def on_delete(self, obj: dict[str, object]) -> None:
        self._seen(obj)


async def pod_watch_events(session: aiohttp.ClientSession, port: int) -> float:
    """The pod watch events (added, modified, deleted) a replica's ``/metrics`` counts."""
    async with session.get(f"http://127.0.0.1:{port}/metrics") as reply:
        text = await reply.text()
    total = 0.0
    for line in text.splitlines():
        if line.startswith('kthena_watch_events_total{resource="pods"') and "BOOKMARK" not in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def namespace_owners(kube: KubeClient, namespaces: list[str]) -> dict[str, str]:
    """Each namespace's owner identity, as the slot map's Lease gives it (mixed slots or raw cuts)."""
    owners = SlotOwners(await kube.get(LEASES, f"{GROUP}-slots", LEASE_NAMESPACE))
    return {ns: owners.of(ns) for ns in namespaces}


@pytest.mark.parametrize("shard_informers", [False, True], ids=["client-side", "shard-informers"])
async def test_three_replicas_each_write_exactly_the_namespaces_of_their_slots(
    tmp_path: Path, shard_informers: bool
) -> None:
    policy = tmp_path / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    audit_log = tmp_path / "audit.log"
    audit = [f"--audit-policy-file={policy}", f"--audit-log-path={audit_log}", "--audit-log-format=json"]
    with ClusterTier(tmp_path / "tier", nodes=4, crds=CRDS, apiserver_args=audit) as tier:
        kube = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        processes: list[asyncio.subprocess.Process] = []
        try:
            teams = [f"team-{i:02d}" for i in range(30)]
            for ns in [LEASE_NAMESPACE, *teams]:
                await kube.create(NAMESPACES, {"metadata": {"name": ns}})
            ports = free_ports(3)
            flags = ["--retry-period", "1", *([] if shard_informers else ["--no-shard-informers"])]
            for port in ports:
                metrics = ["--metrics-bind-address", f"127.0.0.1:{port}"]
                processes.append(await start_replica(tier.kubeconfig_path, *metrics, *flags))
            observer = Informer(kube, PODS)
            counter = EventCounter(set(teams))
            observer.add_handler(counter)
            watching = asyncio.create_task(observer.run())

            await eventually(lambda: balanced_owners(kube, 3), timeout=60, description="three balanced members")
            owners = await namespace_owners(kube, teams)
            for ns in teams:
                await kube.create(MODELSERVINGS, modelserving("llm", roles=[role("decode", gpu=0)]), ns)
            await asyncio.gather(*(wait_available(kube, ns, "llm", 1, timeout=240) for ns in teams))
            assert all(p.returncode is None for p in processes)
            assert await namespace_owners(kube, teams) == owners  # no recut or handover meanwhile

            writers = writers_by_namespace(audit_log, set(teams))
            assert sorted(writers) == sorted(teams)
            for ns in teams:
                assert writers[ns] == {owners[ns]}, ns
            assert len({w for ws in writers.values() for w in ws}) == 3  # every replica did its share

            await asyncio.sleep(2)  # the last status changes reach every watch
            async with aiohttp.ClientSession() as session:
                received = [await pod_watch_events(session, port) for port in ports]
            everything = counter.count
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
            print(f"pod watch events: observer {everything}, replicas {received}")
            assert everything >= 3 * len(teams)  # at least a pod's creation, binding and start per namespace
            if shard_informers:
                # the API server sent each replica about its share, and each event to one replica only
                assert 0.8 * everything <= sum(received) <= 1.2 * everything, (received, everything)
                assert all(r <= 0.6 * everything for r in received), (received, everything)
            else:
                assert all(r >= 0.9 * everything for r in received), (received, everything)
        finally:
            await stop_all(processes)
            await kube.close()


TIMING = ("--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")
LEASE_DURATION, RETRY_PERIOD = 6.0, 1.0


async def not_(wrong: Awaitable[list[tuple[str, int, int]]]) -> bool:
    """True once nothing is wrong (for :func:`eventually`, whose failure message then carries the last list)."""
    found = await wrong
    if found:
        raise AssertionError(f"namespaces without exactly one pod and one PodGroup: {found}")
    return True


def identity_of(process: asyncio.subprocess.Process, owners: dict[int, str]) -> str:
    """The identity (``<host>_<pid>``) a replica process holds slots under."""
    return next(o for o in set(owners.values()) if o.endswith(f"_{process.pid}"))


@pytest.mark.parametrize("server_filters", [True, False], ids=["gate-on", "gate-off"])
async def test_scale_three_to_four_to_two_with_a_killed_replica_under_churn(
    tmp_path: Path, server_filters: bool
) -> None:
    policy = tmp_path / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    audit_log = tmp_path / "audit.log"
    args = [f"--audit-policy-file={policy}", f"--audit-log-path={audit_log}", "--audit-log-format=json"]
    if not server_filters:
        args.append("--feature-gates=ShardedListAndWatch=false")  # the last --feature-gates wins
    with ClusterTier(tmp_path / "tier", nodes=4, crds=CRDS, apiserver_args=args) as tier:
        kube = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        processes: list[asyncio.subprocess.Process] = []
        churning = asyncio.Event()
        churner: asyncio.Task[None] | None = None
        try:
            teams = [f"scale-{i:02d}" for i in range(24)]
            for ns in [LEASE_NAMESPACE, *teams]:
                await kube.create(NAMESPACES, {"metadata": {"name": ns}})
            (port,) = free_ports(1)
            processes.append(
                await start_replica(tier.kubeconfig_path, "--metrics-bind-address", f"127.0.0.1:{port}", *TIMING)
            )
            for _ in range(2):
                processes.append(await start_replica(tier.kubeconfig_path, "--metrics-bind-address", "0", *TIMING))
            await eventually(lambda: balanced_owners(kube, 3), timeout=60, description="three balanced members")
            for ns in teams:
                await kube.create(MODELSERVINGS, modelserving("llm", roles=[role("decode", gpu=0)]), ns)
            await asyncio.gather(*(wait_available(kube, ns, "llm", 1, timeout=240) for ns in teams))
            async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as reply:
                exported = await reply.text()
            # whether the API server filters is detected, not assumed: gate on, the informers list only their ranges
            assert f"kthena_shard_server_filtering {1.0 if server_filters else 0.0}" in exported

            deleted = 0
            churning.set()

            async def churn() -> None:
                nonlocal deleted
                for ns in itertools.cycle(teams):
                    if not churning.is_set():
                        return
                    for pod in await live_pods(kube, ns, "llm"):
                        with contextlib.suppress(NotFound):
                            await kube.delete(PODS, pod, ns)
                            deleted += 1
                    await asyncio.sleep(0.2)

            churner = asyncio.create_task(churn())
            processes.append(await start_replica(tier.kubeconfig_path, "--metrics-bind-address", "0", *TIMING))
            four: SlotOwners = await eventually(
                lambda: balanced_owners(kube, 4), timeout=60, description="four balanced members"
            )
            killed, stopped = processes[0], processes[1]
            killed_identity = identity_of(killed, four)
            stopped_identity = identity_of(stopped, four)
            theirs = {ns for ns in teams if four.of(ns) == killed_identity}
            assert theirs, "the killed replica owned namespaces"
            killed.send_signal(signal.SIGKILL)
            killed_at = datetime.now(UTC)
            stopped.terminate()
            for ns in theirs:  # a change the killed replica's successors must act on once they hold its namespaces
                for pod in await live_pods(kube, ns, "llm"):
                    with contextlib.suppress(NotFound):
                        await kube.delete(PODS, pod, ns)
            await asyncio.wait_for(asyncio.gather(killed.wait(), stopped.wait()), 30)
            exited_at = datetime.now(UTC)
            two: SlotOwners = await eventually(
                lambda: balanced_owners(kube, 2), timeout=60, description="two balanced members"
            )
            await eventually(lambda: deleted >= len(teams), timeout=60, description="a pod of every namespace deleted")
            churning.clear()
            await churner
            await asyncio.gather(*(wait_available(kube, ns, "llm", 1, timeout=120) for ns in teams))

            # the end state is exact: one pod and one PodGroup per ModelServing, nothing left over (a status may
            # still say Available from before the last deletion while its new owner lists the namespace: converge)
            async def exact() -> list[tuple[str, int, int]]:
                counts = [(ns, len(await live_pods(kube, ns, "llm")), len(await podgroups(kube, ns))) for ns in teams]
                return [c for c in counts if c[1:] != (1, 1)]

            await eventually(lambda: not_(exact()), timeout=60, description="one pod and one PodGroup per namespace")
            await asyncio.gather(*(wait_available(kube, ns, "llm", 1, timeout=60) for ns in teams))
            survivors = {identity_of(p, two) for p in processes[2:]}
            assert set(two.values()) == survivors

            writes = audited_writes(audit_log, set(teams))
            # the killed replica wrote nothing it had not sent before the kill, the stopped one nothing after it exited
            assert all(w.received <= killed_at + timedelta(seconds=1) for w in writes if w.writer == killed_identity)
            assert all(w.received <= exited_at for w in writes if w.writer == stopped_identity)
            for ns in teams:
                runs = runs_of([w for w in writes if w.namespace == ns])
                # no overlap: the API server had answered the last write of one owner before it received the next's
                for before, after in itertools.pairwise(runs):
                    assert max(w.completed for w in before) <= after[0].received, (ns, before[-1], after[0])
                # at most the join and the scale-down moved a namespace: at most three owners in turn
                assert len(runs) <= 3, (ns, [r[0].writer for r in runs])
                assert runs[-1][0].writer == two.of(ns), ns
                if ns in theirs:
                    # nobody wrote the killed replica's namespaces before its lease (renewed at most a retry period
                    # before the kill) had expired
                    taken = next(
                        w
                        for w in writes
                        if w.namespace == ns and w.writer != killed_identity and w.received > killed_at
                    )
                    assert (taken.received - killed_at).total_seconds() >= LEASE_DURATION - 2 * RETRY_PERIOD, ns
        finally:
            churning.clear()
            if churner is not None:
                await asyncio.gather(churner, return_exceptions=True)
            await stop_all(processes)
            await kube.close()
