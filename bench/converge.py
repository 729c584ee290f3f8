"""Benchmark: time for the controller to converge a fleet of ModelServings (printed, never asserted).

In the cluster tier (kwok nodes, Volcano gang scheduling): N ModelServings x 2 groups x 2 roles x
(1 entry + 1 worker): 800 pods, 400 headless Services and 200 PodGroups for N = 100 (the default), 4,000
pods for N = 500 (the large documented size; about 5 minutes a side on 2 cores). Each side runs on a
fresh tier of the same shape, in the same run:

* ``baseline``: a plain script creating the very same objects (rendered by the same code, without owner
  references) with the same client concurrency, waiting for every pod to be Running and Ready;
* ``kthena-py``: the manager, until every ModelServing reports Available. It runs the controllers Kthena Go's side
  runs, ``--controllers=modelserving`` (the ModelServing reconcilers, their LoRA adapters and eviction budget), and
  no webhook server on either side; ``--compare-flags=--controllers=*`` adds a side with every controller;
* ``kthena-go`` (with ``--compare-kthena GO_BINARY``): Kthena's own Go controller-manager, built by
  ``hack/build-kthena.sh``, with its own CRDs (``crds/`` beside the binary, or ``--kthena-crds``) and
  raised client limits (64 workers, 1000 QPS, burst 2000); skipped with a message when the binary is absent;
* ``kthena-py/asyncio`` (with ``--compare-loops``): the same manager on asyncio's own event loop
  (``--event-loop=asyncio``), against ``kthena-py`` on its default (uvloop): what the loop buys (issue 33);
* ``kthena-py/gc=N0,N1,N2`` (with ``--compare-gc N0,N1,N2``, repeatable): the same manager with its cyclic garbage
  collector's thresholds set so (``--gc-threshold``);
* ``kthena-py[FLAGS]`` (with ``--compare-flags FLAGS``, repeatable): the same manager with extra flags, e.g.
  ``--api-connections=32``;
* ``kthena-py@REF`` (with ``--compare-ref REF``): the manager as committed at a git ref, run from a temporary
  worktree: what the commits since buy, measured in the same run (issue 33's before/after);
* ``kthena-py[compiled]`` (with ``--compare-compiled``): the working tree built as a compiled wheel
  (``KTHENA_PY_COMPILE=1``: the hot paths compiled by mypyc, docs/compiled.md) and run unpacked from a temporary
  directory, against ``kthena-py`` (the same code, interpreted);
* ``kthena-py[python VERSION of DATE]`` (with ``--compare-python PYTHON``, repeatable): the working tree's manager
  run by another interpreter (one with the manager's dependencies installed), e.g. one built with profile-guided and
  link-time optimisation as the image's base is, where the development interpreter may not be; with
  ``--compare-compiled`` the compiled build on it too.

With ``--repeat R`` the sides take turns going first (run 2 starts with the second side, and so on), so that no side
always starts on a machine still settling from the run before; the paired ratios compare the same run's sides.

Per side it prints where the time and the work went: a timeline (p50 and max over ModelServings of when the
first PodGroup, first and last pod appeared, the last pod was bound and Ready, and the ModelServing was
Available), how long each ModelServing took to report Available after its last pod became Ready (as the
benchmark's watches saw it, and as stored: dated by the first event of any watched kind at or past each
resourceVersion, apart from the API server's late delivery of the ModelServing stream), the API server's own
latency for status writes, pod creates and Events, CPU
seconds per control-plane process, the API server's requests by verb and resource, Events by source and
reason; for the managers their RSS (idle, and at steady state with the fleet cached: the growth per pod),
writes to converge and writes in the ``--after-restart`` seconds after a restart, and their CPU to converge split into
user and system time (the process's own code against the kernel's work for it); for kthena-py's managers also their
requests, reconciles by controller and watch events by resource until Available. With ``--stages``, kthena-py's
managers write their ``--timeline-file`` and it also prints the per-stage timeline from it: for each
ModelServing's last pod to become Ready, when the manager's informer received that change, when the ServingGroup
reconciler was asked to reconcile and started, and when it wrote the Available status. Recording costs the manager
CPU that Kthena Go's side does not pay, so it is off unless asked for.

The summary adds, per side, the manager's CPU to converge (and per ModelServing), over the 60 s after
converging, and idle: over 60 s once no writer has touched a workload object for 10 s (the Event writers have
caught up), with the ratio of kthena-py's to kthena-go's (target <= 1.2, issue 33) and to every other kthena-py
side's (another loop, ref, build, interpreter or flags), each with its paired ratios.
Targets are printed beside the figures (issues 15 and 33), not asserted.

Usage: python bench/converge.py [--modelservings N] [--repeat R] [--no-baseline]
                                [--compare-kthena GO_BINARY [--kthena-crds DIR]] [--compare-loops]
                                [--compare-ref GIT_REF] [--compare-gc N0,N1,N2 ...]
                                [--compare-flags FLAGS ...] [--compare-compiled] [--compare-python PYTHON ...]
                                [--after-restart SECONDS] [--profile DIR] [--native DIR] [--stages]

``--profile DIR`` attaches py-spy (when installed) to each kthena-py side from the fleet's creation to its
last Available, keeps the raw stacks in ``DIR`` and prints the CPU samples by stage and by activity
(``bench/cpu_profile.py``). Sampling costs the manager some CPU: compare profiled runs with each other, and take
the CPU figures from runs without it.

``--native DIR`` attaches ``perf record`` (when installed) to each kthena-py side over the same window, keeps its
data in ``DIR`` and prints the samples by library: the interpreter, the kernel, TLS, JSON, the event loop's C
modules, HTTP parsing (``bench/native_profile.py``): what py-spy's samples without a kthena_py frame hold.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cpu_profile import attach as attach_py_spy
from cpu_profile import report as profile_report
from native_profile import attach as attach_perf
from native_profile import report as native_report

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import AlreadyExists, ApiError, Gone, KubeClient, NotFound
from kthena_py.kube.resources import CONTROLLER_REVISIONS, EVENTS, NAMESPACES, PODGROUPS, PODS, SERVICES
from kthena_py.plan.modelserving.offline.render import render
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.process import free_ports
from kthena_py.testing.wait import eventually

REPO = Path(__file__).resolve().parent.parent
CONNECTIONS = 100  # KubeClient's default connection pool size
NODES = 10
PODS_PER_NODE = 100
STEADY_AFTER = 60.0
"""Seconds after convergence at which a manager's RSS and CPU are read (the same for every side); its CPU over
those seconds is the "after converging" figure (nothing changes in the cluster meanwhile)."""
QUIET_FOR = 10.0
"""Seconds without a workload write by anyone (:func:`workload_writes`) after which the cluster counts as settled:
the Event writers have caught up and the scheduler has stopped updating PodGroups."""
QUIET_WAIT_CAP = 300.0
"""Seconds after the steady-state read at most waited for the cluster to settle; past it the idle window starts
anyway and the report says it was not quiet."""
IDLE_WINDOW = 60.0
"""Seconds over which the manager's idle CPU is read once the cluster has settled (issue 33's idle target: nothing
changing, the fleet's pods cached)."""
IMAGE_ONLY = Path(__file__).resolve().parent / "image_only"
"""Put first on kthena-py's import path: packages the dev environment has for its tools (rich, colorama) and the
manager's image does not, made to fail on import as they would in the image. structlog loads them when it can (about
5 MiB of resident memory), so without this the benchmark would measure a manager heavier than the one shipped."""
KWOK_PARALLELISM = 16
"""kwok's pod workers: more than the tier's test default (4), so that making pods Ready is not limited by fake
kubelets taking turns (real kubelets work in parallel, one per node); the same on every side."""
CORES = len(os.sched_getaffinity(0))
"""The cores every process of a run shares (the control plane, the manager, kwok and this benchmark)."""
KINDS = {"Pod": PODS, "Service": SERVICES, "PodGroup": PODGROUPS, "ControllerRevision": CONTROLLER_REVISIONS}


def modelserving(i: int) -> dict[str, Any]:
    def role(name: str) -> dict[str, Any]:
        c = {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
        return {
            "name": name,
            "replicas": 1,
            "workerReplicas": 1,
            "entryTemplate": {"spec": {"containers": [c]}},
            "workerTemplate": {"spec": {"containers": [c]}},
        }

    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": f"ms-{i}", "namespace": "bench"},
        "spec": {"replicas": 2, "schedulerName": "volcano", "template": {"roles": [role("prefill"), role("decode")]}},
    }


def tier_of(run_dir: str, crd_files: list[Path], n: int) -> ClusterTier:
    """A fresh tier for ``n`` ModelServings: 10 fake nodes, or one per 100 pods when more (a node holds 110 pods).

    The API server keeps its ``ServiceAccount`` admission plugin, as real clusters do: every pod gets its
    service-account token volume, which the managers' caches then hold (or drop).
    """
    nodes = max(NODES, math.ceil(n * 8 / PODS_PER_NODE))
    return ClusterTier(
        run_dir, nodes=nodes, crds=crd_files, pod_parallelism=KWOK_PARALLELISM, service_account_admission=True
    )


async def bench_namespace(client: KubeClient, timeout: float = 60.0) -> None:
    """Create the fleet's namespace and wait for its ``default`` ServiceAccount (pods are refused until it exists)."""
    await client.create(NAMESPACES, {"metadata": {"name": "bench"}})

    async def default_account() -> bool:
        try:
            await client.request("GET", "/api/v1/namespaces/bench/serviceaccounts/default")
        except NotFound:
            return False
        return True

    await eventually(default_account, timeout=timeout, description="the default ServiceAccount of namespace bench")


def crds() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("KTHENA_PY_EXTRA_CRDS", "").split(os.pathsep) if p]
    return sorted((REPO / "manifests" / "crd").glob("workload.serving.volcano.sh_*.yaml")) + extra


async def baseline(n: int, concurrency: int) -> tuple[float, float]:
    """Create the fleet's objects directly; (seconds until every pod is Ready, CPU seconds of every process)."""
    with tempfile.TemporaryDirectory() as d, tier_of(d, crds(), n) as tier:
        client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        try:
            await bench_namespace(client)
            objects = [o for i in range(n) for o in render(modelserving(i))]
            for o in objects:
                o["metadata"].pop("ownerReferences", None)
            sem = asyncio.Semaphore(concurrency)

            async def create(o: dict[str, Any]) -> None:
                async with sem:
                    with contextlib.suppress(AlreadyExists):
                        await client.create(KINDS[o["kind"]], o, "bench")

            cpu_before = component_cpu(tier)
            api_before = apiserver_requests(tier)
            start = time.perf_counter()
            timeline = Timeline(client, start)
            timeline.begin()
            # The same order the controller obeys: PodGroups and revisions, then Services and pods.
            await asyncio.gather(*(create(o) for o in objects if o["kind"] in ("PodGroup", "ControllerRevision")))
            await asyncio.gather(*(create(o) for o in objects if o["kind"] in ("Service", "Pod")))
            expected = sum(1 for o in objects if o["kind"] == "Pod")
            elapsed = await timeline.until(lambda: len(timeline.ready_now) >= expected)
            used = cpu_used(cpu_before, component_cpu(tier))
            await timeline.stop()
            print(f"    baseline timeline: {timeline.report()}")
            print(f"    baseline CPU: {cpu_report(used, elapsed)}")
            print(f"    baseline API requests: {requests_report(api_before, apiserver_requests(tier))}")
            print(f"    baseline events: {await event_report(client)}")
            return elapsed, sum(used.values())
        finally:
            await client.close()


class Timeline:
    """When each object was first seen, each pod bound and Ready, each ModelServing Available.

    Fed by watches in the benchmark process, so every side is observed the same way; times are seconds
    after ``start`` (``start_wall`` is the same moment in epoch seconds, to line up with the manager's
    timeline file). Printed per run to show where the time goes: the p50 and max over ModelServings of
    the moment its first PodGroup, first pod and last pod appeared, its last pod was bound and Ready,
    and it was Available.

    It also keeps which pods are Ready and which ModelServings Available *now*, so the end of a converge is
    seen from the same watches (:meth:`until`) rather than by listing the fleet over and over: a list of
    4,000 pods every half second is a load of its own on the API server (a quorum read from etcd, encoded
    anew each time), which slowed every side alike and pulled their ratio towards 1.
    """

    MILESTONES = ("podgroup", "first pod", "last pod", "last bound", "last ready", "available")

    def __init__(self, client: KubeClient, start: float) -> None:
        self.client = client
        self.start = start
        self.start_wall = time.time() - (time.perf_counter() - start)
        self.seen: dict[tuple[str, str], float] = {}
        self.ready_rv: dict[str, str] = {}
        self.available_rv: dict[str, str] = {}
        self.arrivals: list[tuple[int, float]] = []
        """``(resourceVersion, seconds)`` of every event and bookmark any of the watches received."""
        self.ready_now: set[str] = set()
        self.available_now: set[str] = set()
        self.changed = asyncio.Event()
        self.lags: list[float] = []
        self.tasks: list[asyncio.Task[None]] = []

    def begin(self) -> None:
        self.tasks = [asyncio.create_task(self._follow(rt)) for rt in (PODS, PODGROUPS, MODELSERVINGS)]
        self.tasks.append(asyncio.create_task(self._probe_lag()))

    async def _probe_lag(self, interval: float = 0.1) -> None:
        """How late this process's own event loop runs (its watches' events wait as long before they are seen)."""
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(interval)
            self.lags.append(max(0.0, time.perf_counter() - asked - interval))

    def _mark(self, what: str, name: str) -> bool:
        if (what, name) in self.seen:
            return False
        self.seen[(what, name)] = time.perf_counter() - self.start
        return True

    async def _follow(self, rt: Any) -> None:
        rv = "0"
        while True:  # the API server may end a watch early (e.g. a slow consumer): resume where it ended
            rv = await self._follow_once(rt, rv)

    async def until(self, done: Callable[[], bool], check: Callable[[], None] = lambda: None) -> float:
        """Seconds after ``start`` at which ``done()`` first held, as the watches deliver; ``check`` runs
        every quarter second meanwhile (it may raise, e.g. when the manager died)."""
        while not done():
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.25)
            check()
        return time.perf_counter() - self.start

    @staticmethod
    def _set_member(members: set[str], name: str, present: bool) -> None:
        if present:
            members.add(name)
        else:
            members.discard(name)

    async def _follow_once(self, rt: Any, rv: str) -> str:
        if rv == "0":  # a fresh start lists everything again: forget what the current sets hold
            (self.ready_now if rt is PODS else self.available_now if rt is MODELSERVINGS else set()).clear()
        try:
            async for ev in self.client.watch(rt, "bench", resource_version=rv, allow_bookmarks=True):
                obj = ev.object
                rv = obj["metadata"].get("resourceVersion") or rv
                with contextlib.suppress(ValueError):
                    self.arrivals.append((int(rv), time.perf_counter() - self.start))
                if ev.type == "BOOKMARK":
                    continue
                name = obj["metadata"]["name"]
                status = obj.get("status") or {}
                conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
                gone = ev.type == "DELETED"
                if rt is PODS:
                    self._mark("pod", name)
                    if (obj.get("spec") or {}).get("nodeName"):
                        self._mark("bound", name)
                    ready = status.get("phase") == "Running" and conditions.get("Ready") == "True"
                    if ready and self._mark("ready", name):
                        self.ready_rv[name] = obj["metadata"].get("resourceVersion", "")
                    self._set_member(self.ready_now, name, ready and not gone)
                elif rt is PODGROUPS:
                    self._mark("podgroup", name)
                else:
                    available = conditions.get("Available") == "True"
                    if available and self._mark("available", name):
                        self.available_rv[name] = obj["metadata"].get("resourceVersion", "")
                    self._set_member(self.available_now, name, available and not gone)
                self.changed.set()
        except Gone:
            print(f"    timeline watch of {rt.plural} expired at {rv}: detail since then may be late")
            return "0"
        except ApiError as exc:  # a broken watch only loses timeline detail
            print(f"    timeline watch of {rt.plural} ended: {type(exc).__name__}: {exc}")
            await asyncio.sleep(0.5)
        return rv

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def per_modelserving(self) -> dict[str, dict[str, list[tuple[float, str]]]]:
        """``{ms: {what: [(seconds, object name)]}}`` (object names are ``ms-<i>-...``)."""
        per_ms: dict[str, dict[str, list[tuple[float, str]]]] = {}
        for (what, name), t in self.seen.items():
            ms = "-".join(name.split("-")[:2])
            per_ms.setdefault(ms, {}).setdefault(what, []).append((t, name))
        return per_ms

    def last_ready(self) -> dict[str, tuple[float, str]]:
        """Per ModelServing: when its last pod became Ready, and that pod's name."""
        return {ms: max(times["ready"]) for ms, times in self.per_modelserving().items() if times.get("ready")}

    def available_after_ready(self) -> list[float]:
        """Per ModelServing: seconds from its last pod becoming Ready to it being seen Available."""
        out = []
        for times in self.per_modelserving().values():
            if times.get("ready") and times.get("available"):
                out.append(min(times["available"])[0] - max(times["ready"])[0])
        return sorted(out)

    def dump(self) -> str:
        """What the watches saw, as JSON (``--keep`` keeps it as ``observed.json``): times are seconds after start,
        which is ``start_wall`` in epoch seconds."""
        return json.dumps(
            {
                "start_wall": self.start_wall,
                "seen": [[what, name, t] for (what, name), t in self.seen.items()],
                "ready_rv": self.ready_rv,
                "available_rv": self.available_rv,
                "arrivals": self.arrivals,
            }
        )

    def stored_at(self) -> Callable[[str], float | None]:
        """When a change with a given resourceVersion was stored, at the latest (seconds after ``start``).

        A change is stored no later than the first moment any of the watches (pods, PodGroups, ModelServings)
        received an event or bookmark at or past its resourceVersion (etcd's revision, one sequence for every kind).
        """
        order = sorted(self.arrivals)
        revisions = [rv for rv, _ in order]
        earliest: list[float] = []
        for _, t in reversed(order):
            earliest.append(min(t, earliest[-1]) if earliest else t)
        earliest.reverse()

        def stored(rv: str) -> float | None:
            try:
                i = bisect.bisect_left(revisions, int(rv))
            except ValueError:
                return None
            return earliest[i] if i < len(earliest) else None

        return stored

    def stored_after_ready(self) -> list[float]:
        """Per ModelServing: seconds from its last pod's Ready being stored to its Available being stored.

        This leaves out how late the API server delivered each stream to the benchmark (the sparse ModelServing
        stream comes seconds late on a saturated machine, and the pod stream at times too). What remains is all
        that stands between the two facts: the API server delivering the Ready to the controller, the reconcile,
        and the status write.
        """
        stored = self.stored_at()
        per_ms: dict[str, list[float]] = {}
        for pod, rv in self.ready_rv.items():
            t = stored(rv)
            if t is not None:
                per_ms.setdefault("-".join(pod.split("-")[:2]), []).append(t)
        out = []
        for ms, rv in self.available_rv.items():
            t = stored(rv)
            if t is not None and per_ms.get(ms):
                out.append(t - max(per_ms[ms]))
        return sorted(out)

    def report(self) -> str:
        milestones: dict[str, list[float]] = {m: [] for m in self.MILESTONES}
        for times in self.per_modelserving().values():
            for label, what, pick in (
                ("podgroup", "podgroup", min),
                ("first pod", "pod", min),
                ("last pod", "pod", max),
                ("last bound", "bound", max),
                ("last ready", "ready", max),
                ("available", "available", min),
            ):
                if times.get(what):
                    milestones[label].append(pick(times[what])[0])
        parts = [f"{label} {p50_max(xs)}" for label, xs in milestones.items() if xs]
        late = [x for x in self.lags if x >= 0.05]
        loop = f"{len(late)} wake-ups >= 50 ms late, max {max(self.lags, default=0):.2f} s"
        return "p50/max s: " + ", ".join(parts) + f"; the benchmark's own event loop: {loop}"


def p50_max(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{xs[len(xs) // 2]:.2f}/{xs[-1]:.2f}" if xs else "-"


def creation_report(path: Path, start_wall: float, namespace: str = "bench") -> str:
    """When (p50/max over ModelServings, seconds after the first create) each step of creating one happened.

    ``ms seen`` (the manager's informer got the ModelServing), the first ``groups``, ``gang`` and ``rollout``
    reconcile starts, ``podgroup seen`` (its first PodGroup in the manager's cache), ``groups after pg`` (the
    first ServingGroup reconcile that started after that) and ``pod seen`` (its first pod in the cache).
    """
    first: dict[str, dict[str, float]] = {}

    def mark(ms: str, what: str, t: float) -> None:
        first.setdefault(ms, {}).setdefault(what, t)

    starts: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        t = r["t"] - start_wall
        if r["stage"] == "watch" and r.get("type") == "ADDED":
            name = str(r.get("name") or "")
            ms = "-".join(name.split("-")[:2])
            what = {"ModelServing": "ms seen", "PodGroup": "podgroup seen", "Pod": "pod seen"}.get(r.get("kind", ""))
            if what:
                mark(ms, what, t)
        elif r["stage"] == "start":
            ms = str(r.get("key", "")).removeprefix(namespace + "/")
            label = {"modelserving": "groups", "modelserving-gang": "gang", "modelserving-rollout": "rollout"}.get(
                r.get("controller", "")
            )
            if label:
                mark(ms, label, t)
            if r.get("controller") == "modelserving":
                starts.setdefault(ms, []).append(t)
    for ms, marks in first.items():
        pg = marks.get("podgroup seen")
        after = next((t for t in starts.get(ms, []) if pg is not None and t >= pg), None)
        if after is not None:
            marks["groups after pg"] = after
    order = ("ms seen", "groups", "gang", "rollout", "podgroup seen", "groups after pg", "pod seen")
    cols = {k: [m[k] for m in first.values() if k in m] for k in order}
    return ", ".join(f"{k} {p50_max(v)}" for k, v in cols.items() if v)


def stage_report(timeline: Timeline, path: Path, namespace: str = "bench") -> str:
    """The per-stage timeline of kthena-py's last-pod-Ready -> Available path, from its timeline file.

    Stages per ModelServing, for its last pod to become Ready (as seen by the benchmark's watch), counted from when
    that Ready was stored (:meth:`Timeline.stored_at`): ``received`` (the manager's informer applied that pod
    change, matched by resourceVersion: the API server's delivery and the manager's event loop),
    ``enqueued`` (the ServingGroup reconciler was asked to reconcile), ``started`` (that reconcile began),
    ``written`` (the Available status write took effect) and ``seen`` (the benchmark saw Available).
    """
    received: dict[tuple[str, str], float] = {}
    enqueued: dict[tuple[str, str], list[float]] = {}
    started: dict[str, list[float]] = {}
    written: dict[str, float] = {}
    by_manager: dict[str, int] = {}
    lags: list[float] = []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        t = r["t"] - timeline.start_wall
        stage = r["stage"]
        if stage == "watch" and r.get("kind") == "Pod":
            received.setdefault((r["name"], r.get("rv") or ""), t)
        elif stage == "enqueue" and r.get("controller") == "modelserving" and r.get("kind") == "Pod":
            enqueued.setdefault((r["key"], r["name"]), []).append(t)
        elif stage == "start" and r.get("controller") == "modelserving":
            started.setdefault(r["key"], []).append(t)
        elif stage == "loop_lag":
            lags.append(float(r["lag"]))
        elif stage == "status":
            by_manager[r.get("manager", "")] = by_manager.get(r.get("manager", ""), 0) + 1
            if r.get("manager") == "kthena-py-servinggroups" and "Available" in r.get("true", []):
                written.setdefault(r["key"], t)
    per_ms = timeline.per_modelserving()
    print(f"    kthena-py creation path: {creation_report(path, timeline.start_wall, namespace)}")
    print(f"    kthena-py status writes by field manager: {by_manager}")
    print(
        f"    kthena-py event loop: {len(lags)} wake-ups >= 50 ms late, {sum(lags):.1f} s late in all, "
        f"max {max(lags, default=0.0):.2f} s (the 0.1 s probe; time a response or watch event waited for the thread)"
    )
    deltas: dict[str, list[float]] = {k: [] for k in ("received", "enqueued", "started", "written", "seen")}
    stored = timeline.stored_at()
    for ms, (t_seen_ready, pod) in timeline.last_ready().items():
        key = f"{namespace}/{ms}"
        t_stored = stored(timeline.ready_rv.get(pod, ""))
        t_ready = t_seen_ready if t_stored is None else t_stored
        t_recv = received.get((pod, timeline.ready_rv.get(pod, "")))
        t_enq = next((t for t in enqueued.get((key, pod), []) if t_recv is not None and t >= t_recv), None)
        t_start = next((t for t in started.get(key, []) if t_enq is not None and t >= t_enq), None)
        t_written = written.get(key)
        t_seen = min(per_ms[ms]["available"])[0] if per_ms[ms].get("available") else None
        chain = [("received", t_recv), ("enqueued", t_enq), ("started", t_start), ("written", t_written)]
        prev: float | None = t_ready
        for label, t in chain:
            if t is not None and prev is not None:
                deltas[label].append(t - prev)
            prev = t
        if t_seen is not None and t_written is not None:
            deltas["seen"].append(t_seen - t_written)
    parts = [f"{k} +{p50_max(v)} ({len(v)})" for k, v in deltas.items()]
    return (
        "last pod Ready (stored) -> "
        + ", ".join(parts)
        + " (p50/max s after the previous stage; matched ModelServings)"
    )


def proc_stats(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of a process."""
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    return rss_kb / 1024, sum(cpu_by_mode(pid))


def cpu_by_mode(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process: its own code against the kernel's work for it (system calls, the
    loopback network stack, page faults)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def mode_report(before: tuple[float, float], after: tuple[float, float]) -> str:
    """The user/system split of the CPU a process used between two :func:`cpu_by_mode` readings."""
    user, system = after[0] - before[0], after[1] - before[1]
    total = user + system
    share = f" ({system / total:.0%} in the kernel)" if total > 0 else ""
    return f"user {user:.1f} s, system {system:.1f} s{share}"


def component_cpu(tier: ClusterTier, manager_pid: int | None = None) -> dict[str, float]:
    """CPU seconds used so far by each control-plane process, the manager and this benchmark."""
    pids = {p.name: p.pid for p in tier.processes if p.pid}
    if manager_pid:
        pids["manager"] = manager_pid
    cpu = {name: proc_stats(pid)[1] for name, pid in pids.items()}
    cpu["bench"] = proc_stats(os.getpid())[1]
    return cpu


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds each process used between two :func:`component_cpu` readings."""
    return {name: after[name] - before.get(name, 0.0) for name in after}


def cpu_report(used: dict[str, float], elapsed: float) -> str:
    """Total and per-process CPU, and how busy that kept the machine's cores over ``elapsed``."""
    parts = [f"{name} {s:.1f}" for name, s in sorted(used.items(), key=lambda kv: -kv[1])]
    total = sum(used.values())
    busy = total / (CORES * elapsed) if elapsed > 0 else 0.0
    return f"total {total:.1f} s ({busy:.0%} of {CORES} cores over {elapsed:.1f} s): " + ", ".join(parts)


def apiserver_requests(tier: ClusterTier) -> dict[str, float]:
    """The API server's request counts so far, by ``verb resource[/subresource]``."""
    _, text = tier.client.raw("GET", "/metrics")
    counts: dict[str, float] = {}
    for line in str(text).splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(
            part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].replace('"', "").split(",")
        )
        key = f"{labels.get('verb')} {labels.get('resource')}" + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


LATENCY_OF = (
    "APPLY modelservings/status",
    "PATCH modelservings/status",
    "PUT modelservings/status",
    "POST pods",
    "POST events",
)
"""The requests whose server-side latency is printed (the status writes and the bulk of the creates)."""


def apiserver_latency(tier: ClusterTier) -> dict[str, dict[str, float]]:
    """The API server's own request-duration histogram so far (``apiserver_request_duration_seconds``) for the
    requests in :data:`LATENCY_OF`: ``{"verb resource[/sub]": {"count": n, "sum": s, "<le>": cumulative n}}``."""
    _, text = tier.client.raw("GET", "/metrics")
    out: dict[str, dict[str, float]] = {}
    prefix = "apiserver_request_duration_seconds_"
    for line in str(text).splitlines():
        if not line.startswith(prefix):
            continue
        kind = line[len(prefix) : line.index("{")]
        labels = dict(
            part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].replace('"', "").split(",")
        )
        key = f"{labels.get('verb')} {labels.get('resource')}" + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        if key not in LATENCY_OF:
            continue
        slot = {"bucket": labels.get("le", ""), "count": "count", "sum": "sum"}.get(kind)
        if slot:
            h = out.setdefault(key, {})
            h[slot] = h.get(slot, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def latency_report(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> str:
    """Mean and p99 (a bucket's upper bound) of each request's server-side latency between two readings."""
    parts = []
    for key in LATENCY_OF:
        a, b = after.get(key, {}), before.get(key, {})
        n = a.get("count", 0.0) - b.get("count", 0.0)
        if n <= 0:
            continue
        mean = (a.get("sum", 0.0) - b.get("sum", 0.0)) / n
        bounds = sorted((float(le), a[le] - b.get(le, 0.0)) for le in a if le not in ("count", "sum", "+Inf"))
        p99 = next((f"{le:g}" for le, c in bounds if c >= 0.99 * n), "+Inf")
        parts.append(f"{key} n={n:.0f} mean {mean * 1000:.0f} ms p99 <= {p99} s")
    return "; ".join(parts) or "none"


def requests_report(before: dict[str, float], after: dict[str, float]) -> str:
    diff = {k: v - before.get(k, 0.0) for k, v in after.items()}
    top = sorted(((v, k) for k, v in diff.items() if v >= 20), reverse=True)
    return ", ".join(f"{k} {v:.0f}" for v, k in top)


async def event_counts(client: KubeClient) -> dict[str, int]:
    """Events stored in the benchmark namespace, by ``source component/reason``."""
    counts: dict[str, int] = {}
    for e in (await client.list_all(EVENTS, "bench")).items:
        key = f"{(e.get('source') or {}).get('component') or e.get('reportingComponent')}/{e.get('reason')}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def counts_report(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))


async def event_report(client: KubeClient) -> str:
    """Events in the benchmark namespace, by source component and reason."""
    return counts_report(await event_counts(client))


MANAGER_EVENT_REASONS = frozenset(
    {"RoleCreating", "RoleRunning", "RoleDeleting", "ServingGroupCreating", "ServingGroupRunning"}
)
"""The reasons of the managers' own Events in a converge (Kthena's three role reasons and kthena-py's two
ServingGroup ones); the scheduler's and kwok's Events are the same on every side."""


def manager_events(counts: dict[str, int]) -> int:
    return sum(n for key, n in counts.items() if key.rsplit("/", 1)[-1] in MANAGER_EVENT_REASONS)


def manager_counter(metrics_port: int, metric: str, label: str) -> dict[str, float]:
    """A counter of the manager's ``/metrics`` summed by one label (e.g. requests by ``method``)."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    totals: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith(metric + "{"):
            value = line.split(f'{label}="', 1)[1].split('"', 1)[0]
            totals[value] = totals.get(value, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def _longest(longest: dict[str, float], generation: str) -> str:
    """``, longest 0.12 s`` for a generation whose longest pause the manager exports, else nothing."""
    return f", longest {longest[generation]:.2f} s" if generation in longest else ""


def requests_made(metrics_port: int) -> dict[str, float]:
    """The manager's API requests so far, by HTTP method."""
    return manager_counter(metrics_port, "rest_client_requests_total", "method")


def reconciles_made(metrics_port: int) -> dict[str, float]:
    """The manager's reconciles so far, by controller."""
    return manager_counter(metrics_port, "controller_runtime_reconcile_total", "controller")


def event_writes_made(metrics_port: int) -> float:
    """The manager's Event writes so far (a repeat raising an Event's count is a refused create and a patch)."""
    by_outcome = manager_counter(metrics_port, "kthena_events_written_total", "outcome")
    return by_outcome.get("created", 0.0) + by_outcome.get("failed", 0.0) + 2 * by_outcome.get("counted", 0.0)


def writes_made(metrics_port: int) -> float:
    return sum(n for m, n in requests_made(metrics_port).items() if m in ("POST", "PUT", "PATCH", "DELETE"))


WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE", "CREATE", "UPDATE")
WORKLOAD = ("pods", "services", "podgroups", "modelservings", "modelservings/status", "controllerrevisions", "events")


def workload_writes(before: dict[str, float], after: dict[str, float]) -> tuple[float, str]:
    """Writes the API server received to the resources a ModelServing controller writes (by anyone).

    Pods' status and binding subresources (kwok, the scheduler), nodes and leases are left out; the
    scheduler's PodGroup status updates and Events stay in, the same on every side.
    """
    diff = {k: v - before.get(k, 0.0) for k, v in after.items()}
    picked = {k: v for k, v in diff.items() if v and k.split(" ")[0] in WRITE_VERBS and k.split(" ", 1)[1] in WORKLOAD}
    shown = ", ".join(f"{k} {v:.0f}" for k, v in sorted(picked.items(), key=lambda kv: -kv[1]))
    return sum(picked.values()), shown or "none"


@dataclass
class Side:
    """How to run one controller-manager against a tier."""

    name: str
    crds: list[Path]
    command: list[str]
    metrics_port: int | None = None
    """kthena-py's metrics endpoint (its own request counters); None for the Go manager."""
    timeline: bool = False
    cwd: Path | None = None
    """Where the manager runs from (``--compare-ref``: a worktree of the earlier commit, whose package it imports)."""


@dataclass
class SideRun:
    elapsed: float
    rss_idle: float
    rss: float
    cpu: float
    pods: int
    converge_writes: float
    manager_writes: float | None
    manager_event_writes: float | None
    """Of ``manager_writes``, the Event writes (most of them Kthena's one Event per role instance and transition)."""
    restart_writes: float
    restart_breakdown: str
    manager_restart_writes: float | None
    work: float
    """CPU seconds every process used to converge (the control plane, kwok, the manager, this benchmark)."""
    manager_cpu: float
    """CPU seconds the manager used to converge (from the fleet's creation to the last Available)."""
    manager_idle: float
    """The manager's CPU over the :data:`STEADY_AFTER` seconds after converging, as a share of one core."""
    manager_events: tuple[int, int]
    """The manager's own Events stored when converged and once settled (after the idle window)."""
    manager_quiet_idle: float = 0.0
    """The manager's CPU over :data:`IDLE_WINDOW` seconds once nothing has written for :data:`QUIET_FOR` seconds,
    as a share of one core."""
    quiet_after: float | None = None
    """Seconds after converging at which the cluster had settled (None: not within :data:`QUIET_WAIT_CAP`)."""
    available_after_ready: list[float] = field(default_factory=list)
    stored_after_ready: list[float] = field(default_factory=list)
    events_handed: int | None = None
    """Kthena Go's side: the Events its manager handed to client-go's recorder (its log's lines), stored or not."""


async def until_quiet(tier: ClusterTier, cap: float, poll: float = 2.0) -> float | None:
    """Wait until no workload write (by any writer) has reached the API server for :data:`QUIET_FOR` seconds;
    the seconds waited, or None when ``cap`` passed first."""
    started = time.monotonic()
    last = apiserver_requests(tier)
    quiet_since = started
    while time.monotonic() - started < cap:
        await asyncio.sleep(poll)
        now = apiserver_requests(tier)
        if workload_writes(last, now)[0]:
            quiet_since = time.monotonic()
        last = now
        if time.monotonic() - quiet_since >= QUIET_FOR:
            return time.monotonic() - started
    return None


def kthena_py_side(workers: int, event_loop: str | None = None, *, stages: bool = False) -> Side:
    """kthena-py's manager on its default event loop, or (``event_loop``) on the one named, as its own side.

    ``stages``: the manager writes its ``--timeline-file`` (the per-stage report). Off by default: recording costs
    the manager CPU (about 6 % of its samples at 100) that Kthena Go's side does not pay.
    """
    port = free_ports(1)[0]
    cmd = [sys.executable, "-m", "kthena_py", "manager", "--workers", str(workers)]
    cmd += ["--metrics-bind-address", f"127.0.0.1:{port}", "--health-probe-bind-address", "0", "--webhook-port", "0"]
    cmd += ["--log-level", "warning", "--controllers", "modelserving"]  # as Kthena Go's side
    if event_loop is None:
        return Side("kthena-py", crds(), cmd, metrics_port=port, timeline=stages)
    return Side(
        f"kthena-py/{event_loop}", crds(), [*cmd, f"--event-loop={event_loop}"], metrics_port=port, timeline=stages
    )


@contextlib.contextmanager
def compiled_tree() -> Iterator[Path]:
    """The working tree built as a compiled wheel (``KTHENA_PY_COMPILE=1``), unpacked in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="converge-compiled-") as parent:
        wheels, tree = Path(parent) / "wheels", Path(parent) / "tree"
        print("  --compare-compiled: building a compiled wheel of the working tree (a minute or two)", flush=True)
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
            env={**os.environ, "KTHENA_PY_COMPILE": "1"},
            check=True,
        )
        with zipfile.ZipFile(next(wheels.glob("kthena_py-*.whl"))) as wheel:
            wheel.extractall(tree)
        probe = "from kthena_py.runtime import native; import kthena_py.plan.modelserving.groups.servinggroups; "
        probe += "print(len(native.compiled_modules()))"
        loaded = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            check=True,
            text=True,
            capture_output=True,
        ).stdout.strip()
        if loaded in ("", "0"):
            raise RuntimeError(f"--compare-compiled: the build in {tree} loads no compiled module")
        print(f"  --compare-compiled: built in {time.monotonic() - started:.0f} s", flush=True)
        yield tree


def kthena_py_side_from(
    name: str, tree: Path, workers: int, *, stages: bool = False, python: str | None = None
) -> Side:
    """kthena-py's manager importing the package in ``tree`` (a worktree of an earlier commit, a compiled build of the
    working tree, or the working tree itself) instead of the installed one, as a side of its own named ``name``;
    run by the interpreter ``python`` when given (by this benchmark's otherwise)."""
    side = replace(kthena_py_side(workers, stages=stages), name=name, cwd=tree)
    if python is None:
        return side
    return replace(side, command=[python, *side.command[1:]])


def python_label(python: str) -> str:
    """How a side run by the interpreter ``python`` is named: its version and build date, as it reports them (which
    interpreter it is, the run's command says)."""
    probe = "import platform; print(platform.python_version(), *platform.python_build()[1].split()[:3])"
    out = subprocess.run([python, "-c", probe], check=True, text=True, capture_output=True).stdout.split()
    return f"{out[0]} of {' '.join(out[1:])}" if len(out) == 4 else python


@contextlib.contextmanager
def worktree_of(ref: str) -> Iterator[Path]:
    """A detached git worktree of ``ref`` in a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="converge-ref-") as parent:
        path = Path(parent) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(path), ref], check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=False)


def kthena_go_side(binary: Path, crd_dir: Path) -> Side:
    cmd = [str(binary), "--enable-webhook=false", "--controllers=modelserving", "--leader-elect=false"]
    cmd += ["--workers=64", "--kube-api-qps=1000", "--kube-api-burst=2000"]
    return Side("kthena-go", kthena_crds(crd_dir), cmd)


def kthena_crds(crd_dir: Path) -> list[Path]:
    return sorted(crd_dir.glob("*.yaml"))


def start_side(side: Side, kubeconfig: Path, log: Path, timeline_file: Path | None) -> subprocess.Popen[bytes]:
    cmd = [*side.command, f"--kubeconfig={kubeconfig}"]
    if timeline_file is not None:
        cmd += ["--timeline-file", str(timeline_file)]
    if side.metrics_port is None:  # Kthena's Go manager
        return subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    # kthena-py imports what its image installs (IMAGE_ONLY), and with cwd the worktree's (or compiled) package
    path = [str(IMAGE_ONLY)] + ([str(side.cwd)] if side.cwd is not None else [])
    path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=side.cwd, env=env)


def wait_started(side: Side, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Until kthena-py's metrics endpoint answers (its informers start with it); a fixed pause for Go."""
    deadline = time.monotonic() + timeout
    if side.metrics_port is None:
        time.sleep(5)
        return
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{side.name} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{side.metrics_port}/metrics", timeout=2).read()
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise RuntimeError(f"{side.name} did not start in {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def all_available(client: KubeClient, n: int) -> bool:
    items = (await client.list_all(MODELSERVINGS, "bench")).items
    done = [
        m
        for m in items
        if any(
            c["type"] == "Available" and c["status"] == "True" for c in (m.get("status") or {}).get("conditions") or []
        )
    ]
    return len(done) == n


def warnings_report(log: Path) -> str:
    """kthena-py's warnings and errors during the converge, counted by message (from its JSON log lines)."""
    counts: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("level") in ("warning", "error", "critical"):
            counts[f"{record['level']}: {record.get('event')}"] += 1
    return ", ".join(f"{msg} x{c}" for msg, c in counts.most_common()) or "none"


def keep_files(keep: Path | None, label: str, *files: Path | None) -> None:
    """Copy a run's manager log, timeline and the benchmark's own observations into ``keep/label`` (``--keep``)."""
    if keep is None:
        return
    target = keep / label
    target.mkdir(parents=True, exist_ok=True)
    for f in files:
        if f is not None and f.exists():
            shutil.copy(f, target / f.name)


async def run_side(
    side: Side,
    n: int,
    after_restart: float,
    keep: Path | None = None,
    label: str = "",
    profile: Path | None = None,
    native: Path | None = None,
) -> SideRun:
    with tempfile.TemporaryDirectory() as d, tier_of(d, side.crds, n) as tier:
        client = await KubeClient.from_kubeconfig(str(tier.kubeconfig_path))
        log = Path(d) / "manager.log"
        timeline_file = Path(d) / "timeline.jsonl" if side.timeline else None
        proc = start_side(side, tier.kubeconfig_path, log, timeline_file)
        try:
            await bench_namespace(client)
            wait_started(side, proc)
            await asyncio.sleep(2)  # informers synced: start-up is not part of the measure
            rss_idle, _ = proc_stats(proc.pid)
            cpu_before = component_cpu(tier, proc.pid)
            modes_before = cpu_by_mode(proc.pid)
            api_before = apiserver_requests(tier)
            latency_before = apiserver_latency(tier)
            profiler = None
            if profile is not None and side.metrics_port is not None:
                profiler = attach_py_spy(proc.pid, profile / f"{label or side.name}.txt")
                if profiler is None:
                    print("    --profile: py-spy is not installed; no profile")
            native_profiler = None
            if native is not None and side.metrics_port is not None:
                native_profiler = attach_perf(proc.pid, native / f"{label or side.name}.perf.data")
                if native_profiler is None:
                    print("    --native: perf is not installed; no native profile")
            start = time.perf_counter()
            timeline = Timeline(client, start)
            timeline.begin()
            sem = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                async with sem:
                    await client.create(MODELSERVINGS, modelserving(i), "bench")

            await asyncio.gather(*(create(i) for i in range(n)))

            def alive() -> None:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{side.name} exited with {proc.returncode}; see its log: {log.read_text()[-2000:]}"
                    )

            elapsed = await timeline.until(lambda: len(timeline.available_now) >= n, alive)
            if not await all_available(client, n):  # one list confirms what the watch showed
                raise RuntimeError(f"{side.name}: the watch saw {n} Available, a list did not")
            await timeline.stop()
            if profiler is not None:
                raw = profiler.stop()
                print(f"    {side.name} profile to converge: {profile_report(raw) if raw else 'py-spy wrote nothing'}")
            if native_profiler is not None:
                data = native_profiler.stop()
                split = native_report(data) if data else "perf wrote nothing"
                print(f"    {side.name} native profile to converge: {split}")
            api_after = apiserver_requests(tier)
            converge_writes, converge_breakdown = workload_writes(api_before, api_after)
            print(f"    {side.name} timeline: {timeline.report()}")
            seen, stored = p50_max(timeline.available_after_ready()), p50_max(timeline.stored_after_ready())
            print(
                f"    {side.name} Available after last pod Ready: p50/max {seen} s as the benchmark's watches saw "
                f"them, {stored} s as stored"
            )
            used = cpu_used(cpu_before, component_cpu(tier, proc.pid))
            modes_converged = cpu_by_mode(proc.pid)
            cpu_converged = sum(modes_converged)
            converged_at = time.monotonic()
            print(f"    {side.name} CPU: {cpu_report(used, elapsed)}")
            print(f"    {side.name} manager CPU by mode: {mode_report(modes_before, modes_converged)}")
            print(f"    {side.name} API requests: {requests_report(api_before, api_after)}")
            print(f"    {side.name} API server latency: {latency_report(latency_before, apiserver_latency(tier))}")
            print(
                f"    {side.name} workload writes to converge (all writers): {converge_writes:.0f}: "
                f"{converge_breakdown}"
            )
            events_converged = await event_counts(client)
            print(f"    {side.name} events: {counts_report(events_converged)}")
            manager_writes = manager_event_writes = None
            if side.metrics_port is not None:
                made = requests_made(side.metrics_port)
                manager_writes = sum(v for m, v in made.items() if m in ("POST", "PUT", "PATCH", "DELETE"))
                manager_event_writes = event_writes_made(side.metrics_port)
                print(
                    f"    {side.name} own requests until Available: "
                    + ", ".join(f"{m} {v:.0f}" for m, v in sorted(made.items()))
                )
                done = ", ".join(f"{c} {v:.0f}" for c, v in sorted(reconciles_made(side.metrics_port).items()) if v)
                print(f"    {side.name} reconciles until Available: {done}")
                heard = manager_counter(side.metrics_port, "kthena_watch_events_total", "resource")
                print(
                    f"    {side.name} watch events until Available: {sum(heard.values()):.0f}: "
                    + ", ".join(f"{r} {v:.0f}" for r, v in sorted(heard.items(), key=lambda kv: -kv[1]) if v)
                )
                collected = manager_counter(side.metrics_port, "python_gc_collections_total", "generation")
                paused = manager_counter(side.metrics_port, "kthena_gc_pause_seconds_total", "generation")
                longest = manager_counter(side.metrics_port, "kthena_gc_pause_longest_seconds", "generation")
                shown = ", ".join(
                    f"generation {g} {v:.0f} ({paused[g]:.2f} s{_longest(longest, g)})"
                    if g in paused
                    else f"generation {g} {v:.0f}"
                    for g, v in sorted(collected.items())
                )
                print(f"    {side.name} cyclic garbage collections since the start: {shown or 'not exported'}")
                print(f"    {side.name} log warnings until Available: {warnings_report(log)}")
            await asyncio.sleep(max(0.0, STEADY_AFTER - (time.monotonic() - converged_at)))  # steady state
            events_settled = await event_counts(client)
            print(
                f"    {side.name} events {STEADY_AFTER:.0f} s after converging (a writer that fell behind has caught "
                f"up): {counts_report(events_settled)}"
            )
            emitted = None
            if side.metrics_port is None:  # Kthena's recorder logs every Event it is handed ("Event occurred")
                emitted = log.read_text(errors="replace").count("Event occurred")
                print(f"    {side.name} Events handed to its recorder (its log's 'Event occurred' lines): {emitted}")
            rss, cpu = proc_stats(proc.pid)
            manager_idle = (cpu - cpu_converged) / max(1e-9, time.monotonic() - converged_at)
            quiet = await until_quiet(tier, QUIET_WAIT_CAP)
            quiet_after = None if quiet is None else time.monotonic() - converged_at
            _, cpu_quiet = proc_stats(proc.pid)
            quiet_started = time.monotonic()
            await asyncio.sleep(IDLE_WINDOW)
            _, cpu_idle_end = proc_stats(proc.pid)
            manager_quiet_idle = (cpu_idle_end - cpu_quiet) / max(1e-9, time.monotonic() - quiet_started)
            pods = len((await client.list_all(PODS, "bench")).items)
            events_quiet = await event_counts(client)
            print(
                f"    {side.name} idle once settled: {100 * manager_quiet_idle:.2f} % of a core over "
                f"{IDLE_WINDOW:.0f} s with {pods} pods cached; "
                + (
                    f"no workload write for {QUIET_FOR:.0f} s from {quiet_after:.0f} s after converging"
                    if quiet_after is not None
                    else f"still writing {QUIET_WAIT_CAP:.0f} s after the steady-state read (window taken anyway)"
                )
            )
            stop(proc)
            if timeline_file is not None and timeline_file.exists():
                print(f"    {side.name} stages: {stage_report(timeline, timeline_file)}")
            observed = Path(d) / "observed.json"
            observed.write_text(timeline.dump())
            keep_files(keep, label or side.name, log, timeline_file, observed)
            api_restart = apiserver_requests(tier)
            proc = start_side(side, tier.kubeconfig_path, log, None)
            wait_started(side, proc)
            restarted = time.monotonic()
            await asyncio.sleep(max(0.0, after_restart - (time.monotonic() - restarted)))
            manager_restart = writes_made(side.metrics_port) if side.metrics_port is not None else None
            restart_writes, restart_breakdown = workload_writes(api_restart, apiserver_requests(tier))
            return SideRun(
                elapsed,
                rss_idle,
                rss,
                cpu,
                pods,
                converge_writes,
                manager_writes,
                manager_event_writes,
                restart_writes,
                restart_breakdown,
                manager_restart,
                sum(used.values()),
                used["manager"],
                manager_idle,
                (manager_events(events_converged), manager_events(events_quiet)),
                manager_quiet_idle,
                quiet_after,
                timeline.available_after_ready(),
                timeline.stored_after_ready(),
                emitted,
            )
        finally:
            stop(proc)
            await client.close()


def mmm(xs: list[float]) -> str:
    return f"min {min(xs):6.1f}  median {statistics.median(xs):6.1f}  max {max(xs):6.1f} s"


def work_target(n: int) -> float:
    """Issue 33's bound on kthena-py's work to converge, as a share of Kthena Go's."""
    return 0.75 if n <= 100 else 0.8


def work_report(n: int, runs: dict[str, list[SideRun]], base_work: list[float]) -> list[str]:
    """Lines on the CPU work of each side: on a machine kept busy, converge time is that work over the cores.

    With Kthena Go's side and the baseline (the same objects created by a script, no controller) both measured, it
    also prints what issue 33's work target leaves a controller: the CPU seconds, of every process, that it may cause
    above the baseline, against what kthena-py's side caused (its manager's own CPU part of it) and what Kthena Go's
    side caused, with the ratio of the two: the share of the work a controller decides.
    """
    med = statistics.median
    work = {"baseline": base_work} if base_work else {}
    work.update({name: [r.work for r in rs] for name, rs in runs.items()})
    lines = [
        "  work to converge (CPU seconds of every process, medians): "
        + ", ".join(f"{name} {med(ws):.1f}" for name, ws in work.items())
        + f"; on {CORES} cores converge time follows it wherever the cores are kept busy"
    ]
    if "kthena-go" in work:
        go = med(work["kthena-go"])
        lines.append(
            "  work ratio to kthena-go: "
            + ", ".join(f"{name} {med(ws) / go:.2f}" for name, ws in work.items() if name != "kthena-go")
            + " (the baseline's is the least work any controller can leave to a busy machine)"
            + (f"; target for kthena-py <= {work_target(n)} (issue 33)" if "kthena-py" in work else "")
        )
        if "baseline" in work and "kthena-py" in work:
            room = work_target(n) * go - med(work["baseline"])
            above = med(work["kthena-py"]) - med(work["baseline"])
            go_above = go - med(work["baseline"])
            manager = med([r.manager_cpu for r in runs["kthena-py"]])
            lines.append(
                f"  work the target leaves a controller above the baseline: {room:.1f} s; kthena-py caused "
                f"{above:.1f} s, its manager's own CPU {manager:.1f} s of it; kthena-go caused {go_above:.1f} s "
                f"(kthena-py / kthena-go above the baseline: {above / max(1e-9, go_above):.2f})"
            )
    return lines


def manager_cpu_report(n: int, runs: dict[str, list[SideRun]]) -> list[str]:
    """Each side's manager CPU to converge (median, per ModelServing) and after converging, with the ratios of
    kthena-py's to Kthena Go's and to kthena-py on asyncio's loop when those sides ran."""
    med = statistics.median
    cpu = {name: med([r.manager_cpu for r in rs]) for name, rs in runs.items()}
    lines = [
        f"  {name} manager CPU to converge: {c:.1f} s, {1000 * c / n:.1f} ms per ModelServing; after converging "
        f"{100 * med([r.manager_idle for r in runs[name]]):.2f} % of a core in the {STEADY_AFTER:.0f} s after; "
        f"idle once settled {100 * med([r.manager_quiet_idle for r in runs[name]]):.2f} % of a core "
        f"(target < 0.5 % with 4,000 pods, i.e. at 500)"
        for name, c in cpu.items()
    ]
    for name, rs in runs.items():
        at_converge = med([r.manager_events[0] for r in rs])
        settled = med([r.manager_events[1] for r in rs])
        lines.append(
            f"  {name} own Events stored (medians): {at_converge:.0f} when converged, {settled:.0f} once settled "
            f"(no workload write for {QUIET_FOR:.0f} s, then {IDLE_WINDOW:.0f} s)"
        )
    if "kthena-go" in runs:
        go_settled = med([r.manager_events[1] for r in runs["kthena-go"]])
        ours_settled = med([r.manager_events[1] for r in runs["kthena-py"]])
        ratio = f"{ours_settled / go_settled:.2f}" if go_settled else "n/a"
        lines.append(f"  own Events stored once settled, kthena-py / kthena-go: {ratio} (target <= 1.5)")
        handed = [r.events_handed for r in runs["kthena-go"] if r.events_handed]
        if handed:
            lines.append(
                "  own Events, kthena-py's stored / kthena-go's handed to its recorder: "
                f"{ours_settled / med(handed):.2f} "
                "(client-go's broadcaster drops Events while its queue is full: what Go would store if it dropped none)"
            )
    ours = cpu["kthena-py"]
    peers = [("kthena-go", " (target <= 1.2)"), ("kthena-py/asyncio", "")]
    peers += [(name, " (before/after: what the commits since buy)") for name in cpu if name.startswith("kthena-py@")]
    peers += [(name, " (the default thresholds against these)") for name in cpu if name.startswith("kthena-py/gc=")]
    listed = {peer for peer, _ in peers}
    peers += [(name, "") for name in cpu if name.startswith("kthena-py") and name != "kthena-py" and name not in listed]
    for peer, target in peers:
        if peer in cpu and cpu[peer] > 0:
            paired = " ".join(
                f"{o.manager_cpu / p.manager_cpu:.2f}"
                for o, p in zip(runs["kthena-py"], runs[peer], strict=True)
                if p.manager_cpu > 0
            )
            lines.append(
                f"  manager CPU kthena-py / {peer}, ratio of medians: {ours / cpu[peer]:.2f}{target}; paired: {paired}"
            )
    return lines


def summarize(
    n: int, runs: dict[str, list[SideRun]], base_runs: list[tuple[float, float]], after_restart: float
) -> None:
    bases = [elapsed for elapsed, _ in base_runs]
    print(f"summary: {n} ModelServings ({n * 8} pods), {len(runs['kthena-py'])} run(s) a side")
    if bases:
        print(f"  baseline (direct creates, same concurrency): {mmm(bases)}")
    for name, rs in runs.items():
        print(f"  {name:<42}: {mmm([r.elapsed for r in rs])}")
    ours = runs["kthena-py"]
    med = statistics.median
    if bases:
        print(
            f"  kthena-py / baseline, ratio of medians: {med([r.elapsed for r in ours]) / med(bases):.2f} "
            "(target <= 1.25)"
        )
    for name, rs in runs.items():
        for how, lag in (
            ("as stored", sorted(x for r in rs for x in r.stored_after_ready)),
            ("as seen by the benchmark's watches", sorted(x for r in rs for x in r.available_after_ready)),
        ):
            print(
                f"  {name}: Available after its last pod Ready {how}, p50 {lag[len(lag) // 2]:.2f} s (target <= 1), "
                f"max {lag[-1]:.2f} s (target <= 2)"
                if lag
                else f"  {name}: no Available-after-Ready figure {how}"
            )
    for line in work_report(n, runs, [work for _, work in base_runs]):
        print(line)
    for line in manager_cpu_report(n, runs):
        print(line)
    r0 = ours[0]
    growth = (r0.rss - r0.rss_idle) * 2**20 / max(1, r0.pods)
    print(
        f"  kthena-py RSS: idle {r0.rss_idle:.0f} MiB, steady {r0.rss:.0f} MiB with {r0.pods} pods cached "
        f"(growth {growth / 1024:.1f} KiB per pod, with its share of Services, PodGroups and revisions); "
        f"CPU {r0.cpu:.1f} s"
    )
    by_side = ", ".join(f"{name} {med([r.rss for r in rs]):.0f} MiB" for name, rs in runs.items())
    print(f"  RSS at steady state by side (medians): {by_side}")
    own, events = r0.manager_writes or 0.0, r0.manager_event_writes or 0.0
    print(
        f"  kthena-py writes: {own:.0f} of its own to converge (today 2,200 at 100), {events:.0f} of them Events, "
        f"{own - events:.0f} without; {r0.manager_restart_writes:.0f} in the {after_restart:.0f} s after a restart "
        "(target 0)"
    )
    if "kthena-go" in runs:
        go = runs["kthena-go"]
        ratio = med([r.elapsed for r in ours]) / med([r.elapsed for r in go])
        target = 0.6 if n <= 100 else 0.8
        print(f"  converge kthena-py / kthena-go, ratio of medians: {ratio:.2f} (target <= {target})")
        paired = " ".join(f"{o.elapsed / g.elapsed:.2f}" for o, g in zip(ours, go, strict=True))
        print(f"  paired ratios (run by run): {paired}")
        g0 = go[0]
        rss_ours, rss_go = med([r.rss for r in ours]), med([r.rss for r in go])
        rss_paired = " ".join(f"{o.rss / g.rss:.2f}" for o, g in zip(ours, go, strict=True))
        print(
            f"  RSS at steady state, kthena-py / kthena-go: {rss_ours:.0f} / {rss_go:.0f} MiB (kthena-go idle "
            f"{g0.rss_idle:.0f}), ratio of medians {rss_ours / rss_go:.2f} (target <= 1.0, issue 33); "
            f"paired: {rss_paired}"
        )
        for name, r in (("kthena-py", r0), ("kthena-go", g0)):
            print(
                f"  {name} workload writes by all writers: {r.converge_writes:.0f} to converge, "
                f"{r.restart_writes:.0f} in the {after_restart:.0f} s after a restart ({r.restart_breakdown})"
            )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelservings", type=int, default=100, help="fleet size (100 = 800 pods; 500 = 4,000 pods)")
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--after-restart", type=float, default=60.0, help="seconds watched after the first run's restart")
    ap.add_argument("--repeat", type=int, default=3, help="paired runs; medians are compared")
    ap.add_argument("--no-baseline", dest="baseline", action="store_false", help="skip the direct-create baseline")
    ap.add_argument("--compare-kthena", metavar="GO_BINARY", type=Path, help="Kthena's kthena-controller-manager")
    ap.add_argument("--kthena-crds", metavar="DIR", type=Path, help="Kthena's CRDs (default: crds/ beside the binary)")
    ap.add_argument("--keep", metavar="DIR", type=Path, help="copy each run's manager log and timeline here")
    ap.add_argument("--profile", metavar="DIR", type=Path, help="py-spy on kthena-py's sides; raw stacks kept here")
    ap.add_argument(
        "--native", metavar="DIR", type=Path, help="perf on kthena-py's sides, split by library; data kept here"
    )
    ap.add_argument(
        "--stages",
        action="store_true",
        help="kthena-py's managers write their --timeline-file and the per-stage report is printed (costs the "
        "manager CPU that Kthena Go's side does not pay: leave it off when comparing CPU)",
    )
    ap.add_argument(
        "--compare-loops",
        action="store_true",
        help="also run kthena-py's manager on asyncio's own event loop, as a side of its own (kthena-py/asyncio)",
    )
    ap.add_argument(
        "--compare-gc",
        metavar="N0,N1,N2",
        action="append",
        default=[],
        help="also run kthena-py's manager with --gc-threshold N0,N1,N2, as a side of its own (repeatable)",
    )
    ap.add_argument(
        "--compare-flags",
        metavar="FLAGS",
        action="append",
        default=[],
        help="also run kthena-py's manager with these extra flags (one string, split on spaces), as a side of its "
        "own named kthena-py[FLAGS] (repeatable; e.g. '--api-connections=32')",
    )
    ap.add_argument(
        "--compare-ref",
        metavar="GIT_REF",
        help="also run kthena-py's manager as committed at GIT_REF (a worktree), as a side of its own "
        "(kthena-py@GIT_REF): a before/after measured in the same run",
    )
    ap.add_argument(
        "--compare-compiled",
        action="store_true",
        help="also run kthena-py's manager built with its hot paths compiled (KTHENA_PY_COMPILE=1, mypyc), as a side "
        "of its own (kthena-py[compiled])",
    )
    ap.add_argument(
        "--compare-python",
        metavar="PYTHON",
        action="append",
        default=[],
        help="also run kthena-py's manager (the working tree) on the interpreter PYTHON, as a side of its own; with "
        "--compare-compiled its compiled build too (repeatable). PYTHON must have the manager's dependencies "
        "(docs/testing.md: the interpreter the image ships)",
    )
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        ref_tree = stack.enter_context(worktree_of(args.compare_ref)) if args.compare_ref else None
        native_tree = stack.enter_context(compiled_tree()) if args.compare_compiled else None
        await run_sides(args, ref_tree, native_tree)


async def run_sides(args: argparse.Namespace, ref_tree: Path | None, native_tree: Path | None = None) -> None:
    """Every side asked for, ``--repeat`` times, then the summary."""
    if not crds():
        sys.exit("manifests/crd is empty: generate the CRDs first (kthena-py crds)")
    n = args.modelservings
    print(f"{n} ModelServings = {n * 8} pods, {n * 4} Services, {n * 2} PodGroups; {args.workers} workers")
    sides = [kthena_py_side(args.workers, stages=args.stages)]
    if args.compare_loops:
        sides.append(kthena_py_side(args.workers, "asyncio", stages=args.stages))
    for thresholds in args.compare_gc:
        side = kthena_py_side(args.workers, stages=args.stages)
        sides.append(
            replace(side, name=f"kthena-py/gc={thresholds}", command=[*side.command, f"--gc-threshold={thresholds}"])
        )
    for flags in args.compare_flags:
        side = kthena_py_side(args.workers, stages=args.stages)
        sides.append(replace(side, name=f"kthena-py[{flags}]", command=[*side.command, *flags.split()]))
    if ref_tree is not None:
        sides.append(kthena_py_side_from(f"kthena-py@{args.compare_ref}", ref_tree, args.workers, stages=args.stages))
    if native_tree is not None:
        sides.append(kthena_py_side_from("kthena-py[compiled]", native_tree, args.workers, stages=args.stages))
    for python in args.compare_python:
        label = python_label(python)
        sides.append(
            kthena_py_side_from(f"kthena-py[python {label}]", REPO, args.workers, stages=args.stages, python=python)
        )
        if native_tree is not None:
            name = f"kthena-py[compiled, python {label}]"
            sides.append(kthena_py_side_from(name, native_tree, args.workers, stages=args.stages, python=python))
    if args.compare_kthena is not None:
        binary: Path = args.compare_kthena
        crd_dir: Path = args.kthena_crds or binary.parent / "crds"
        if not os.access(binary, os.X_OK):
            print(
                f"  --compare-kthena: {binary} is not an executable; skipping the Kthena comparison "
                "(build it with KTHENA_SRC=... hack/build-kthena.sh)"
            )
        elif not kthena_crds(crd_dir):
            print(f"  --compare-kthena: no Kthena CRDs in {crd_dir}; skipping the Kthena comparison (--kthena-crds)")
        else:
            sides.append(kthena_go_side(binary, crd_dir))
    for directory in (args.profile, args.native):
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
    bases: list[tuple[float, float]] = []
    runs: dict[str, list[SideRun]] = {s.name: [] for s in sides}
    for i in range(args.repeat):
        if args.baseline:
            # The same client concurrency: every side goes through one KubeClient whose pool holds
            # CONNECTIONS connections; the controller's workers and per-reconcile fan-out share that pool.
            bases.append(await baseline(n, concurrency=CONNECTIONS))
        line = f"  run {i + 1}:" + (f" baseline {bases[-1][0]:6.1f} s," if bases else "")
        # Each run starts with the next side, so that none always goes first (on a machine settling after the
        # run before) and the paired ratios are not biased by the order.
        for side in sides[i % len(sides) :] + sides[: i % len(sides)]:
            r = await run_side(
                side,
                n,
                args.after_restart if i == 0 else 5.0,
                args.keep,
                f"{side.name}-run{i + 1}",
                args.profile,
                args.native,
            )
            runs[side.name].append(r)
            line += f" {side.name} {r.elapsed:6.1f} s,"
        print(line.rstrip(","))
    summarize(n, runs, bases, args.after_restart)


if __name__ == "__main__":
    # A SIGTERM (e.g. from timeout) unwinds like Ctrl-C, so the tiers' processes are stopped too.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(main())
