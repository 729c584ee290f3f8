"""Benchmark: how long a request for a ModelPool member that is not resident waits, step by step (printed, never
asserted).

The cluster tier (etcd, kube-apiserver, kube-controller-manager, kwok, Volcano's vc-scheduler) with two kwok nodes
of one GPU each: ``slot-pool`` for the pool, ``slot-cold`` for the baseline. ``kthena-py manager`` (controllers
``modelserving,modelpool``) and ``kthena-py activator`` (on 127.0.0.1) run as subprocesses, as in a cluster.
The engines are fake: this script serves an aiohttp app on the IP kwok gives each pod (127.100.0.0/16), answering
``POST /v1/chat/completions`` (naming the pod that answered) and ``GET /metrics`` with
``vllm:num_requests_running`` and ``vllm:num_requests_waiting`` at 0, so every idle check finds the resident idle.

* **Swap**: members ``model-a`` (the pool's ``default``, resident) and ``model-b``, one pod each needing the one GPU.
  ``--swaps`` times, alternating (A -> B, then B -> A...), a chat completion for the member that is not resident
  is sent to the activator at ``t0`` and the script waits for the answer. Milestones, as seconds after ``t0``:
  the demand annotation appearing on the pool (this script's watch), the pool controller's ``started``,
  ``drained`` and ``released`` (its ``status.lastSwap``, read once the swap completed), the target's pod Ready
  (this script's pod watch) and the answer's arrival. The steps printed are the differences of consecutive
  milestones: the activator recording demand, the controller starting the swap, draining (the idle check),
  releasing (the incumbent at 0 -> its pods gone), loading (the target at 1 -> its pod Ready: the ModelServing
  controller, Volcano's scheduling period, kwok) and forwarding (pod Ready -> the answer at the client).
* **Cold start** (the baseline, measured in the same run, interleaved with the swaps): a lone ModelServing
  ``cold`` at 0 replicas with ``activator.kthena-py.io/scale-from-zero: "true"`` and no pool, one pod needing the
  other node's GPU: a request sent at ``t0`` is held while the activator writes 0 -> 1, then answered. Between
  runs the script scales it back to 0 and waits until its pods are gone (not measured).

All times are this machine's wall clock (the manager's status times are RFC 3339 with milliseconds), so the
milestones of the script and of the controller line up to about a millisecond. It prints p50/min/max of each step
over the measured swaps and cold starts, and the ratio swap/cold of the medians of held -> answered: what a
swap adds beyond what any scale from zero costs (on kwok, loading is the ModelServing controller, Volcano and kwok,
well under the cold start's ~1 s; on real hardware both are dominated by the engine loading weights, and a swap adds
the incumbent's graceful shutdown).
``--warmup`` unmeasured rounds (one swap and one cold start each) come first.

Usage: python bench/modelpool_swap.py [--swaps 5] [--warmup 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from kthena_py.api.crdgen import build_crds
from kthena_py.controllers.resources import MODELPOOLS, MODELSERVINGS
from kthena_py.kube import KubeClient, ResourceType
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import NAMESPACES, PODS
from kthena_py.plan.modelpool.demand import demand_of, parse_demand_time
from kthena_py.testing.controlplane import ClusterTier, FakeNode
from kthena_py.vocab.labels import ACTIVATOR_SCALE_FROM_ZERO, SERVING_NAME

NAMESPACE = "bench"
POOL = "pool"
A, B, COLD = "model-a", "model-b", "cold"
SLOT_LABEL = "bench.kthena-py.io/slot"
ENGINE_PORT = 18000
TIMEOUT = 150.0
"""Seconds any one wait may take before the run is abandoned (the pool's swap budget is 120 s)."""


# -- the cluster objects -------------------------------------------------------------------------------------


def modelserving(name: str, slot: str, annotations: dict[str, str] | None = None) -> KubeObject:
    """A one-pod ModelServing at 0 replicas asking for one GPU on the node labelled ``slot``."""
    container = {
        "name": "engine",
        "image": "registry.invalid/engine:1",
        "ports": [{"containerPort": ENGINE_PORT}],
        "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        },
    }
    role = {
        "name": "main",
        "replicas": 1,
        "workerReplicas": 0,
        "entryTemplate": {"spec": {"nodeSelector": {SLOT_LABEL: slot}, "containers": [container]}},
    }
    return {
        "apiVersion": MODELSERVINGS.api_version,
        "kind": MODELSERVINGS.kind,
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"replicas": 0, "schedulerName": "volcano", "template": {"roles": [role]}},
    }


def modelpool() -> KubeObject:
    return {
        "apiVersion": MODELPOOLS.api_version,
        "kind": MODELPOOLS.kind,
        "metadata": {"name": POOL},
        "spec": {
            "members": [{"modelServingRef": {"name": m}} for m in (A, B)],
            "default": A,
            "gpu": 1,
            "nodeSelector": {SLOT_LABEL: "pool"},
            "swapBudget": "120s",
        },
    }


def is_ready(pod: KubeObject) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


# -- watches and the fake engines ----------------------------------------------------------------------------

Handler = Callable[[str, KubeObject, float], Awaitable[None]]


async def follow(kube: KubeClient, rt: ResourceType, handle: Handler, relisted: Callable[[], None]) -> None:
    """List then watch ``rt`` in the namespace, calling ``handle(type, object, wall time received)`` for every
    object; starts over with a list when a watch ends or fails (``relisted()``, then every listed object replayed
    as ``ADDED``)."""
    while True:
        try:
            listed = await kube.list(rt, NAMESPACE)
            now = time.time()
            relisted()
            for obj in listed.items:
                await handle("ADDED", obj, now)
            async for event in kube.watch(rt, NAMESPACE, resource_version=listed.resource_version):
                if event.type in ("ADDED", "MODIFIED", "DELETED"):
                    await handle(event.type, event.object, time.time())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a benchmark's watch resumes after anything
            print(f"    (watch {rt.plural} restarted: {type(exc).__name__}: {exc})", flush=True)
            await asyncio.sleep(0.2)


class Engines:
    """One aiohttp app served on ``ENGINE_PORT`` of every live pod's IP (see the module docstring)."""

    def __init__(self) -> None:
        self.pod_of_ip: dict[str, str] = {}
        self._sites: dict[str, web.TCPSite] = {}
        self._runner: web.AppRunner | None = None

    def _pod(self, request: web.Request) -> str:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        return self.pod_of_ip.get(sock[0] if sock else "", "")

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(
            {
                "object": "chat.completion",
                "model": body.get("model"),
                "served_by": self._pod(request),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            }
        )

    async def _metrics(self, _: web.Request) -> web.Response:
        text = (
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
            "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
        )
        return web.Response(text=text, content_type="text/plain")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()

    async def serve(self, pod_of_ip: dict[str, str]) -> None:
        """Serve exactly these IPs (stopping the others first: a new pod may reuse a deleted one's IP)."""
        assert self._runner is not None
        for ip in [ip for ip in self._sites if ip not in pod_of_ip]:
            await self._sites.pop(ip).stop()
        self.pod_of_ip = dict(pod_of_ip)
        for ip in set(pod_of_ip) - set(self._sites):
            site = web.TCPSite(self._runner, ip, ENGINE_PORT)
            await site.start()
            self._sites[ip] = site

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class Observed:
    """What the script's watches saw: pods (and when each was first Ready), the pool, its demand records."""

    def __init__(self, kube: KubeClient, engines: Engines) -> None:
        self.kube, self.engines = kube, engines
        self.pods: dict[str, KubeObject] = {}
        self.ready_at: dict[str, float] = {}
        self.pool: KubeObject = {}
        self.demand: dict[str, float] = {}
        self.demand_seen: list[tuple[float, str, float]] = []
        """``(wall time seen, member, demand time written)`` for every new demand record on the pool."""
        self.changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def _pod(self, kind: str, pod: KubeObject, now: float) -> None:
        name = pod["metadata"]["name"]
        if kind == "DELETED":
            self.pods.pop(name, None)
            self.ready_at.pop(name, None)  # a member's next pod may take the same name
        else:
            self.pods[name] = pod
            if is_ready(pod) and not pod["metadata"].get("deletionTimestamp"):
                self.ready_at.setdefault(name, now)
        live = {
            p["status"]["podIP"]: n
            for n, p in self.pods.items()
            if (p.get("status") or {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
        }
        try:
            await self.engines.serve(live)
        except OSError as exc:
            print(f"    (engine not served: {exc})", flush=True)
        self.changed.set()

    async def _pool(self, kind: str, pool: KubeObject, now: float) -> None:
        if pool["metadata"]["name"] != POOL or kind == "DELETED":
            return
        self.pool = pool
        for member, when in demand_of(pool).items():
            if self.demand.get(member) != when:
                self.demand[member] = when
                self.demand_seen.append((now, member, when))
        self.changed.set()

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(follow(self.kube, PODS, self._pod, self.pods.clear)),
            asyncio.create_task(follow(self.kube, MODELPOOLS, self._pool, lambda: None)),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def until(self, what: str, done: Callable[[], bool], check: Callable[[], None]) -> None:
        """Wait until ``done()`` holds as the watches deliver; ``check`` runs meanwhile (it raises when a process
        died)."""
        deadline = time.monotonic() + TIMEOUT
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            check()
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.5)

    def member_pods(self, member: str) -> list[str]:
        return [n for n, p in self.pods.items() if (p["metadata"].get("labels") or {}).get(SERVING_NAME) == member]

    def pool_status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.pool.get("status") or {}
        return status

    def serving(self, member: str) -> bool:
        """``member`` has a Ready pod and the engine listens on its IP."""
        return any(
            is_ready(self.pods[n]) and self.pods[n]["status"].get("podIP") in self.engines.pod_of_ip
            for n in self.member_pods(member)
        )


# -- processes -----------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "kthena_py", *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def spawn_manager(kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    return spawn(
        [
            "manager",
            f"--kubeconfig={kubeconfig}",
            f"--namespace={NAMESPACE}",
            "--controllers=modelserving,modelpool",
            "--health-probe-bind-address=0",
            "--metrics-bind-address=0",
            "--webhook-port=0",
            "--log-level=warning",
            "--log-format=json",
        ],
        log,
    )


def spawn_activator(kubeconfig: Path, port: int, health: int, log: Path) -> subprocess.Popen[bytes]:
    return spawn(
        [
            "activator",
            f"--kubeconfig={kubeconfig}",
            f"--namespace={NAMESPACE}",
            f"--listen=127.0.0.1:{port}",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{health}",
            "--log-level=warning",
            "--log-format=json",
        ],
        log,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def alive_check(procs: dict[str, tuple[subprocess.Popen[bytes], Path]]) -> Callable[[], None]:
    def check() -> None:
        for name, (proc, log) in procs.items():
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited with {proc.returncode}; its log ends with:\n{tail}")

    return check


# -- the measures --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One held request: its label and its milestones in seconds after it was sent (``t0``)."""

    label: str
    milestones: dict[str, float] = field(default_factory=dict)

    def steps(self, names: list[tuple[str, str, str]]) -> dict[str, float]:
        """``{step: later milestone - earlier milestone}`` for ``(step, earlier, later)``; ``t0`` is 0."""
        at = {"t0": 0.0, **self.milestones}
        return {step: at[later] - at[earlier] for step, earlier, later in names}


SWAP_STEPS = [
    ("request -> demand on the pool", "t0", "demand"),
    ("demand -> swap started", "demand", "started"),
    ("draining (idle check)", "started", "drained"),
    ("releasing (pods gone)", "drained", "released"),
    ("loading (target pod Ready)", "released", "pod ready"),
    ("pod Ready -> answered", "pod ready", "answered"),
    ("held -> answered", "t0", "answered"),
    ("swap started -> Ready (lastSwap)", "started", "ready"),
]
COLD_STEPS = [
    ("request -> pod Ready", "t0", "pod ready"),
    ("pod Ready -> answered", "pod ready", "answered"),
    ("held -> answered", "t0", "answered"),
]


async def ask(http: aiohttp.ClientSession, url: str, model: str) -> float:
    """Send one chat completion for ``model``: the wall time its answer arrived (checked: 200, from ``model``'s pod)."""
    body = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
    async with http.post(url, json=body, timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as resp:
        payload = await resp.json(content_type=None)
        answered = time.time()
        if resp.status != 200:
            raise RuntimeError(f"{model}: HTTP {resp.status}: {payload}")
    served_by = str(payload.get("served_by", ""))
    if not served_by.startswith(f"{model}-"):
        raise RuntimeError(f"{model}: answered by {served_by!r}")
    return answered


async def first_ready_since(obs: Observed, member: str, t0: float, check: Callable[[], None]) -> float:
    """When this script's pod watch first saw a pod of ``member`` Ready at or after ``t0`` (waiting for it: the
    activator's own watch may have delivered the same change a moment earlier)."""

    def ready_times() -> list[float]:
        return [obs.ready_at[n] for n in obs.member_pods(member) if obs.ready_at.get(n, 0.0) >= t0]

    await obs.until(f"a Ready pod of {member}", lambda: bool(ready_times()), check)
    return min(ready_times())


async def swap(
    obs: Observed, http: aiohttp.ClientSession, url: str, source: str, target: str, check: Callable[[], None]
) -> Run:
    """One swap ``source -> target`` driven by a held request (see the module docstring)."""

    def settled() -> bool:
        status = obs.pool_status()
        return status.get("phase") == "Ready" and status.get("residentMember") == source and obs.serving(source)

    await obs.until(f"{source} resident", settled, check)
    t0 = time.time()
    answered = await ask(http, url, target)

    def completed() -> bool:
        status = obs.pool_status()
        last = status.get("lastSwap") or {}
        started = parse_demand_time(last.get("started"))
        return (
            status.get("phase") == "Ready"
            and last.get("to") == target
            and started is not None
            and started >= math.floor(t0 * 1000) / 1000
        )

    await obs.until(f"the swap {source} -> {target} to complete", completed, check)
    last = obs.pool_status()["lastSwap"]
    stamped = math.floor(t0 * 1000) / 1000

    def demand_times() -> list[float]:
        return [seen for seen, member, when in obs.demand_seen if member == target and when >= stamped]

    await obs.until(f"{target}'s demand on the pool", lambda: bool(demand_times()), check)
    demand = min(demand_times())
    run = Run(f"{source} -> {target}")
    run.milestones["demand"] = demand - t0
    for key in ("started", "drained", "released", "ready"):
        when = parse_demand_time(last.get(key))
        if when is None:
            raise RuntimeError(f"lastSwap has no {key}: {last}")
        run.milestones[key] = when - t0
    run.milestones["pod ready"] = await first_ready_since(obs, target, t0, check) - t0
    run.milestones["answered"] = answered - t0
    return run


async def cold_start(
    kube: KubeClient, obs: Observed, http: aiohttp.ClientSession, url: str, check: Callable[[], None]
) -> Run:
    """One scale from zero of ``cold`` through the activator, then back to 0 with its pods gone (not measured)."""
    await obs.until(f"{COLD} without pods", lambda: not obs.member_pods(COLD), check)
    t0 = time.time()
    answered = await ask(http, url, COLD)
    run = Run("cold")
    run.milestones["pod ready"] = await first_ready_since(obs, COLD, t0, check) - t0
    run.milestones["answered"] = answered - t0
    await kube.patch(MODELSERVINGS, COLD, {"spec": {"replicas": 0}}, NAMESPACE)
    await obs.until(f"{COLD}'s pods gone", lambda: not obs.member_pods(COLD), check)
    await asyncio.sleep(1.0)  # the activator's informer sees replicas 0 too: the next request wakes it afresh
    return run


async def wait_http(
    http: aiohttp.ClientSession, url: str, ok: Callable[[str], bool], check: Callable[[], None]
) -> None:
    """Until ``GET url`` answers 200 with a body ``ok`` accepts."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        check()
        with contextlib.suppress(aiohttp.ClientError):
            async with http.get(url) as resp:
                if resp.status == 200 and ok(await resp.text()):
                    return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {TIMEOUT:.0f} s")


def routes_all(models: str) -> bool:
    """The activator's ``/v1/models`` lists the cold ModelServing and both members as members of the pool."""
    cards = {card.get("id"): card for card in json.loads(models).get("data") or []}
    return COLD in cards and all(cards.get(m, {}).get("modelpool") == f"{NAMESPACE}/{POOL}" for m in (A, B))


def table(title: str, runs: list[Run], steps: list[tuple[str, str, str]]) -> list[str]:
    lines = [f"{title} ({len(runs)} runs)", f"  {'step':<32} {'p50':>7} {'min':>7} {'max':>7}"]
    per_run = [r.steps(steps) for r in runs]
    for step, _, _ in steps:
        xs = [s[step] for s in per_run]
        lines.append(f"  {step:<32} {statistics.median(xs):7.2f} {min(xs):7.2f} {max(xs):7.2f} s")
    return lines


async def bench(args: argparse.Namespace) -> None:
    nodes = [
        FakeNode("slot-pool", gpus=1, labels={SLOT_LABEL: "pool"}),
        FakeNode("slot-cold", gpus=1, labels={SLOT_LABEL: "cold"}),
    ]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="modelpool-bench-") as tmp:
        run_dir = Path(tmp)
        started = time.monotonic()
        with ClusterTier(run_dir / "tier", nodes=nodes, crds=list(build_crds().values())) as tier:
            print(f"cluster tier up in {time.monotonic() - started:.1f} s", flush=True)
            kube = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
            engines = Engines()
            obs = Observed(kube, engines)
            procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
            try:
                await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
                await engines.start()
                obs.start()
                for name in (A, B):
                    await kube.create(MODELSERVINGS, modelserving(name, "pool"), NAMESPACE)
                await kube.create(
                    MODELSERVINGS, modelserving(COLD, "cold", {ACTIVATOR_SCALE_FROM_ZERO: "true"}), NAMESPACE
                )
                await kube.create(MODELPOOLS, modelpool(), NAMESPACE)
                port, health = free_port(), free_port()
                logs = {name: run_dir / f"{name}.log" for name in ("manager", "activator")}
                procs["manager"] = (spawn_manager(tier.kubeconfig_path, logs["manager"]), logs["manager"])
                activator = spawn_activator(tier.kubeconfig_path, port, health, logs["activator"])
                procs["activator"] = (activator, logs["activator"])
                check = alive_check(procs)
                async with aiohttp.ClientSession(trust_env=False) as http:
                    await wait_http(http, f"http://127.0.0.1:{health}/readyz", lambda _: True, check)
                    await wait_http(http, f"http://127.0.0.1:{port}/v1/models", routes_all, check)
                    url = f"http://127.0.0.1:{port}/v1/chat/completions"
                    swaps: list[Run] = []
                    colds: list[Run] = []
                    resident = A
                    for i in range(args.warmup + args.swaps):
                        target = B if resident == A else A
                        s = await swap(obs, http, url, resident, target, check)
                        c = await cold_start(kube, obs, http, url, check)
                        resident = target
                        measured = i >= args.warmup
                        if measured:
                            swaps.append(s)
                            colds.append(c)
                        print(
                            f"  {'run' if measured else 'warm-up'} {i + 1}: swap {s.label} held -> answered "
                            f"{s.milestones['answered']:.2f} s; cold start {c.milestones['answered']:.2f} s",
                            flush=True,
                        )
            finally:
                for proc, _ in procs.values():
                    stop(proc)
                await obs.stop()
                await engines.stop()
                await kube.close()
    load_after = os.getloadavg()
    print(
        f"modelpool swap on kwok: {args.swaps} swaps (alternating), {args.swaps} cold starts interleaved, "
        f"{args.warmup} warm-up round(s); {len(os.sched_getaffinity(0))} cores, load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    for line in [*table("swap", swaps, SWAP_STEPS), *table("cold start (baseline)", colds, COLD_STEPS)]:
        print(line)
    swap_p50 = statistics.median(r.milestones["answered"] for r in swaps)
    cold_p50 = statistics.median(r.milestones["answered"] for r in colds)
    print(f"held -> answered, swap / cold start (ratio of medians): {swap_p50 / cold_p50:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--swaps", type=int, default=5, help="measured swaps (and as many cold starts)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (one swap, one cold start)")
    args = parser.parse_args()
    if args.swaps < 1:
        parser.error("--swaps must be at least 1")
    # A SIGTERM (e.g. from timeout) unwinds like Ctrl-C, so the tier's processes are stopped too.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
