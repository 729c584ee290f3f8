"""Benchmark (issue 31): what one replica of a sharded manager costs at 1, 2 and 4 replicas, and a capacity model.

For each replica count R (``--replicas``, default 1,2,4), on a fresh cluster tier (kwok nodes, Volcano), R
``kthena-py manager --sharding`` processes join one lease group; once the group's slot map gives every one of the
64 slots to a live member with balanced shares, the benchmark creates N ModelServings (``--modelservings``,
default 60), each in a namespace of its own (2 groups x 2 roles x (entry + worker): 8 pods each), and waits until
every one reports Available. Per replica it reads, from the fleet's creation to its convergence: CPU seconds,
bytes read from its sockets (``/proc/<pid>/io`` ``rchar``: list and watch answers and the replies to its writes;
what the API server sends it), of which its watch streams (``kthena_watch_received_bytes_total``) and the pod
events among them (``kthena_watch_events_total{resource="pods"}``), reconciles and API writes (its ``/metrics``),
and its RSS after ``--steady`` seconds with the fleet cached; and how many of the namespaces it owned.

Every figure is printed with its ratio to R = 1 measured in the same run. By default the replicas run as the
manager does, with per-range informers: the API server (its ``ShardedListAndWatch`` gate is on in the cluster tier)
sends each only its namespaces' objects, so the watch divides too. With ``--client-side`` they run with
``--no-shard-informers``: every replica receives and caches every object, and only the reconcile work divides.
The fit below separates the two.

The capacity model: per-replica CPU to converge = F + D / R, fitted by least squares over the runs (F: what every
replica pays whatever R is: with client-side filtering, receiving, decoding and caching the whole fleet; with
per-range informers, what is left undivided (the whole PodGroup and cluster-scoped watches, the process's own
upkeep); D: what is divided among them); the same for RSS. Scaled linearly to ``--target-modelservings`` (default
10,000) and ``--target-pods`` (default 100,000) (F and memory by pods, D by ModelServings), it prints how many
replicas converge that fleet from scratch (a restart of every replica, or a change touching every ModelServing)
within ``--target-seconds`` (default 300) with one core each, and each replica's memory (the pods it caches: all of
them with client-side filtering, its share with per-range informers); with ``--client-side`` also the projection
for per-range informers (F and the per-pod memory divided by R too). A linear model; it says nothing about the API
server's own limits.

Usage: python bench/shards.py [--modelservings N] [--replicas 1,2,4] [--steady SECONDS] [--client-side]
                              [--target-modelservings M] [--target-pods P] [--target-seconds T]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from converge import Side, crds, manager_counter, modelserving, proc_stats, start_side, stop, tier_of, wait_started

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient, NotFound
from kthena_py.kube.resources import LEASES, NAMESPACES
from kthena_py.runtime.shards.hashing import SLOT_COUNT
from kthena_py.runtime.shards.member import namespace_owner, read_cut_state, read_slot_map
from kthena_py.testing.controlplane.process import free_ports

GROUP = "bench-shards"
LEASE_NAMESPACE = "bench-shards"
PODS_PER_MODELSERVING = 8


@dataclass
class Replica:
    """One manager process and what it cost while the fleet converged."""

    proc: subprocess.Popen[bytes]
    metrics_port: int
    cpu: float = 0.0
    bytes_read: float = 0.0
    watch_bytes: float = 0.0
    pod_events: float = 0.0
    rss: float = 0.0
    rss_idle: float = 0.0
    reconciles: float = 0.0
    writes: float = 0.0
    namespaces: int = 0

    @property
    def identity_prefix(self) -> str:
        return f"_{self.proc.pid}"


@dataclass
class Run:
    replicas: int
    seconds: float
    members: list[Replica]

    def mean(self, attr: str) -> float:
        return sum(getattr(m, attr) for m in self.members) / len(self.members)


def bytes_read(pid: int) -> float:
    """Bytes the process has read from files and sockets so far (``rchar``)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return float(line.split()[1])
    return 0.0


def manager_side(port: int, shard_informers: bool = True) -> Side:
    cmd = [sys.executable, "-m", "kthena_py", "manager", "--sharding", "--lease-group", GROUP]
    cmd += [] if shard_informers else ["--no-shard-informers"]
    cmd += ["--leader-election-namespace", LEASE_NAMESPACE, "--retry-period", "1", "--renew-deadline", "4"]
    cmd += ["--lease-duration", "6", "--metrics-bind-address", f"127.0.0.1:{port}"]
    cmd += ["--health-probe-bind-address", "0", "--webhook-port", "0", "--log-level", "warning"]
    return Side("kthena-py", crds(), cmd, metrics_port=port)


async def balanced(client: KubeClient, replicas: int) -> dict[str, Any] | None:
    """The slot map's Lease once every slot has an owner and the shares are as even as 64 slots allow; else None."""
    try:
        lease = await client.get(LEASES, f"{GROUP}-slots", LEASE_NAMESPACE)
    except NotFound:
        return None
    owners = read_slot_map(lease)
    shares = [sum(1 for o in owners.values() if o == m) for m in set(owners.values())]
    if len(owners) < SLOT_COUNT or len(shares) != replicas or max(shares) - min(shares) > 1:
        return None
    if (cuts := read_cut_state(lease)) is not None and cuts.pending is not None:
        return None  # a recut is under way
    return lease


def owner_of(slots_lease: dict[str, Any], namespace: str) -> str:
    """The identity (``<host>_<pid>``) that owns ``namespace``."""
    return (namespace_owner(slots_lease, namespace) or "").split("@")[0]


async def available(client: KubeClient, namespaces: list[str]) -> int:
    done = 0
    for ns in namespaces:
        for m in (await client.list_all(MODELSERVINGS, ns)).items:
            conds = (m.get("status") or {}).get("conditions") or []
            done += any(c["type"] == "Available" and c["status"] == "True" for c in conds)
    return done


async def run(replicas: int, n: int, steady: float, shard_informers: bool = True) -> Run:
    with tempfile.TemporaryDirectory() as d, tier_of(d, crds(), n) as tier:
        client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        namespaces = [f"bench-{i}" for i in range(n)]
        members: list[Replica] = []
        try:
            for ns in [LEASE_NAMESPACE, *namespaces]:
                await client.create(NAMESPACES, {"metadata": {"name": ns}})
            ports = free_ports(replicas)
            for port in ports:
                side = manager_side(port, shard_informers)
                log = Path(d) / f"manager-{port}.log"
                proc = start_side(side, tier.kubeconfig_path, log, None)
                members.append(Replica(proc, port))
            for m in members:
                wait_started(manager_side(m.metrics_port, shard_informers), m.proc)
            deadline = time.monotonic() + 60
            slot_map = None
            while slot_map is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{replicas} replicas did not settle on a balanced slot map in 60 s")
                await asyncio.sleep(0.5)
                slot_map = await balanced(client, replicas)
            for m in members:
                m.namespaces = sum(1 for ns in namespaces if owner_of(slot_map, ns).endswith(m.identity_prefix))
            for m in members:
                m.rss_idle = proc_stats(m.proc.pid)[0]
            before = {m.proc.pid: (proc_stats(m.proc.pid)[1], bytes_read(m.proc.pid)) for m in members}
            reconciles_before = {m.proc.pid: reconciles(m.metrics_port) for m in members}
            watched_before = {m.proc.pid: watched(m.metrics_port) for m in members}
            writes_before = {m.proc.pid: writes(m.metrics_port) for m in members}
            start = time.perf_counter()
            sem = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                body: dict[str, Any] = modelserving(i)
                body["metadata"]["namespace"] = namespaces[i]
                async with sem:
                    await client.create(MODELSERVINGS, body, namespaces[i])

            await asyncio.gather(*(create(i) for i in range(n)))
            while (done := await available(client, namespaces)) < n:
                for m in members:
                    if m.proc.poll() is not None:
                        raise RuntimeError(f"a replica exited with {m.proc.returncode}; logs in {d}")
                if time.perf_counter() - start > 900:
                    raise RuntimeError(f"only {done}/{n} Available after 900 s")
                await asyncio.sleep(1.0)
            seconds = time.perf_counter() - start
            for m in members:
                cpu0, read0 = before[m.proc.pid]
                m.cpu = proc_stats(m.proc.pid)[1] - cpu0
                m.bytes_read = bytes_read(m.proc.pid) - read0
                m.reconciles = reconciles(m.metrics_port) - reconciles_before[m.proc.pid]
                m.writes = writes(m.metrics_port) - writes_before[m.proc.pid]
                watch_bytes, pod_events = watched(m.metrics_port)
                m.watch_bytes = watch_bytes - watched_before[m.proc.pid][0]
                m.pod_events = pod_events - watched_before[m.proc.pid][1]
            await asyncio.sleep(steady)
            for m in members:
                m.rss = proc_stats(m.proc.pid)[0]
            return Run(replicas, seconds, members)
        finally:
            for m in members:
                stop(m.proc)
            await client.close()


def reconciles(port: int) -> float:
    return sum(manager_counter(port, "controller_runtime_reconcile_total", "controller").values())


def writes(port: int) -> float:
    made = manager_counter(port, "rest_client_requests_total", "method")
    return sum(v for k, v in made.items() if k in ("POST", "PUT", "PATCH", "DELETE"))


def watched(port: int) -> tuple[float, float]:
    """Bytes received on every watch stream so far, and the pod watch events among them."""
    received = sum(manager_counter(port, "kthena_watch_received_bytes_total", "resource").values())
    pods = sum(v for k, v in manager_counter(port, "kthena_watch_events_total", "resource").items() if k == "pods")
    return received, pods


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares of y = F + D / R over (R, y); (F, D), clamped at 0."""
    xs = [1.0 / r for r, _ in points]
    ys = [y for _, y in points]
    if len(set(xs)) < 2:
        return ys[0], 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    d = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    f = my - d * mx
    return max(f, 0.0), max(d, 0.0)


def ratio(x: float, base: float) -> str:
    return f"{x / base:.2f}x" if base else "-"


def report(runs: list[Run], n: int, args: argparse.Namespace) -> None:
    base = runs[0]
    print(
        f"\nper replica (mean over the replicas of a run; ratio to R={base.replicas} in this run), {n} ModelServings, "
        f"{n * PODS_PER_MODELSERVING} pods:"
    )
    print(
        f"  {'R':>2} {'converge s':>10} {'CPU s':>14} {'MiB read':>15} {'watch MiB':>15} {'pod events':>16} "
        f"{'RSS MiB':>14} {'reconciles':>16} {'writes':>14} {'namespaces':>10}"
    )
    for r in runs:
        cells = []
        for attr, fmt in (
            ("cpu", ".1f"),
            ("bytes_read", ".1f"),
            ("watch_bytes", ".1f"),
            ("pod_events", ".0f"),
            ("rss", ".0f"),
            ("reconciles", ".0f"),
            ("writes", ".0f"),
        ):
            v, b = r.mean(attr), base.mean(attr)
            if attr in ("bytes_read", "watch_bytes"):
                v, b = v / 2**20, b / 2**20
            cells.append(f"{v:{fmt}} ({ratio(v, b)})")
        spread = "/".join(str(m.namespaces) for m in r.members)
        print(
            f"  {r.replicas:>2} {r.seconds:>10.1f} {cells[0]:>14} {cells[1]:>15} {cells[2]:>15} {cells[3]:>16} "
            f"{cells[4]:>14} {cells[5]:>16} {cells[6]:>14} {spread:>10}"
        )
        print(f"     1/R would be {1 / (r.replicas / base.replicas):.2f}x")

    cpu_f, cpu_d = fit([(r.replicas, r.mean("cpu")) for r in runs])
    mem_f, mem_d = fit([(r.replicas, r.mean("rss")) for r in runs])
    print(
        f"\nfit, per replica: CPU to converge = {cpu_f:.1f} s + {cpu_d:.1f} s / R; "
        f"RSS = {mem_f:.0f} MiB + {mem_d:.0f} MiB / R"
    )
    pods = n * PODS_PER_MODELSERVING
    every = [m for r in runs for m in r.members]
    idle_rss = sum(m.rss_idle for m in every) / len(every)

    # memory per cached pod from the run with the fewest replicas: there each caches the most (with one replica,
    # the whole fleet in either mode), so the fleet's share of its RSS stands out of the process's own the most
    fewest = min(runs, key=lambda r: r.replicas)
    cached = pods if args.client_side else pods / fewest.replicas
    per_pod_mib = max(sum(m.rss - m.rss_idle for m in fewest.members) / len(fewest.members), 0.0) / cached
    s_pods, s_ms = args.target_pods / pods, args.target_modelservings / n
    f_t, d_t = cpu_f * s_pods, cpu_d * s_ms
    t = args.target_seconds
    print(
        f"\nmodel for {args.target_modelservings} ModelServings / {args.target_pods} pods, a converge from scratch "
        f"within {t:.0f} s, one core per replica (F scaled by pods x{s_pods:.0f}, D by ModelServings x{s_ms:.0f}; "
        f"~{per_pod_mib * 1024:.0f} KiB per cached pod over {idle_rss:.0f} MiB before the fleet, both measured):"
    )
    print(f"  work: F = {f_t:.0f} s paid by every replica, D = {d_t:.0f} s divided among them")
    measured = "client-side filtering (measured)" if args.client_side else "per-range informers (measured)"
    if f_t < t:
        need = max(1, math.ceil(d_t / (t - f_t)))
        held = args.target_pods if args.client_side else args.target_pods / need
        print(
            f"  {measured}: {need} replicas, "
            f"{f_t + d_t / need:.0f} s each, RSS ~{idle_rss + per_pod_mib * held:.0f} MiB each"
        )
    else:
        print(f"  {measured}: no number of replicas; the undivided part alone ({f_t:.0f} s) exceeds {t:.0f} s")
    if args.client_side:
        need_s = max(1, math.ceil((f_t + d_t) / t))
        print(
            f"  per-range informers (projected, F divided too): {need_s} replicas, {(f_t + d_t) / need_s:.0f} s "
            f"each, RSS ~{idle_rss + per_pod_mib * args.target_pods / need_s:.0f} MiB each"
        )


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--modelservings", type=int, default=60)
    p.add_argument("--replicas", default="1,2,4")
    p.add_argument("--steady", type=float, default=10.0)
    p.add_argument("--target-modelservings", type=int, default=10_000)
    p.add_argument("--target-pods", type=int, default=100_000)
    p.add_argument("--target-seconds", type=float, default=300.0)
    p.add_argument("--client-side", action="store_true", help="--no-shard-informers: every replica caches everything")
    args = p.parse_args()
    runs = []
    for r in (int(x) for x in args.replicas.split(",")):
        print(f"== {r} replica(s), {args.modelservings} ModelServings in as many namespaces", flush=True)
        run_ = await run(r, args.modelservings, args.steady, not args.client_side)
        print(
            f"   converged in {run_.seconds:.1f} s; per replica CPU "
            + ", ".join(f"{m.cpu:.1f}" for m in run_.members)
            + " s",
            flush=True,
        )
        runs.append(run_)
    report(runs, args.modelservings, args)


if __name__ == "__main__":
    asyncio.run(main())
