"""An eviction storm against one protected ModelServing, and the ready units counted as its user counts them.

Several clients send ``policy/v1`` Evictions for every live pod of the ModelServing, over and over, until a
deadline, while a LIST+WATCH of the namespace records every pod state the API server reports. After every watch
event the ready units of each budget are counted by the user's definition, independently of the code under
test:

* a ServingGroup is ready when every pod it should have (``replicas`` instances of each role, each an entry pod
  plus ``workerReplicas`` workers) exists, is ``Running`` and ``Ready``, and is not terminating;
* a role instance likewise, with its entry pod and workers.

Guarantees: the storm sends requests only to the API server it is given; it stops by itself at its deadline;
every answer is counted (granted, denied with 429, not found, unanswered: the API server could not get an answer
from the webhook, so nothing was evicted; other errors); :class:`StormReport` keeps the
fewest ready units seen in any observed state, how many states were below ``minAvailable`` and when the first
was seen. Nothing is asserted here: the caller (a test or ``bench/eviction.py``) decides what the figures mean.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kthena_py.kube import ApiError, KubeClient, NotFound, TooManyRequests
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS
from kthena_py.vocab import labels

__all__ = ["Budget", "StormReport", "UnitCounter", "budgets_of", "evict", "pod_ready", "run_storm"]

NAME_LABEL = labels.SERVING_NAME
GROUP_LABEL = labels.SERVING_GROUP_NAME
ROLE_ID_LABEL = labels.SERVING_ROLE_ID


def pod_ready(pod: KubeObject) -> bool:
    """``Running``, ``Ready`` and not terminating.

    Written here on purpose rather than taken from :mod:`kthena_py.vocab.pods`: the storm counts as the user
    counts, independently of the code under test.
    """
    status = pod.get("status") or {}
    return (
        not (pod.get("metadata") or {}).get("deletionTimestamp")
        and status.get("phase") == "Running"
        and any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    )


@dataclass(frozen=True)
class Budget:
    """One protected set of units and its threshold, as the user reads the ModelServing's spec."""

    label: str
    """``*`` at ServingGroup level, ``<group>/<role>`` at Role level."""
    min_available: int
    units: dict[str, int]
    """Unit name (group name or ``<group>/<role-id>``) -> the number of pods it should have."""


def _resolve(value: Any, total: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def budgets_of(ms: KubeObject) -> list[Budget]:
    """The budgets of a ModelServing's ``rolloutStrategy.evictionStrategy`` (none without one)."""
    spec = ms["spec"]
    name = ms["metadata"]["name"]
    strategy = (spec.get("rolloutStrategy") or {}).get("evictionStrategy")
    if strategy is None:
        return []
    roles = spec["template"]["roles"]
    replicas = int(spec.get("replicas", 1))
    groups = [f"{name}-{ordinal}" for ordinal in range(replicas)]
    if strategy.get("protectionLevel", "ServingGroup") == "ServingGroup":
        size = sum(int(r.get("replicas", 1)) * (1 + int(r.get("workerReplicas", 0))) for r in roles)
        minimum = _resolve(strategy.get("minAvailable"), replicas, 1)
        return [Budget("*", minimum, dict.fromkeys(groups, size))]
    out = []
    for group in groups:
        for r in roles:
            value = (strategy.get("roleMinAvailable") or {}).get(r["name"])
            if value is None:
                continue
            instances = int(r.get("replicas", 1))
            units = {f"{group}/{r['name']}-{i}": 1 + int(r.get("workerReplicas", 0)) for i in range(instances)}
            out.append(Budget(f"{group}/{r['name']}", _resolve(value, instances, 0), units))
    return out


@dataclass
class UnitCounter:
    """Counts the ready units of each budget in a set of pods."""

    ms: str
    budgets: Sequence[Budget]

    def ready(self, pods: Sequence[KubeObject]) -> dict[str, int]:
        """Budget label -> ready units among ``pods``."""
        good: dict[str, int] = {}
        broken: set[str] = set()
        for pod in pods:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if labels.get(NAME_LABEL) != self.ms:
                continue
            group = str(labels.get(GROUP_LABEL, ""))
            keys = (group, f"{group}/{labels.get(ROLE_ID_LABEL, '')}")
            for key in keys:
                if pod_ready(pod):
                    good[key] = good.get(key, 0) + 1
                else:
                    broken.add(key)
        return {
            budget.label: sum(
                1 for unit, size in budget.units.items() if good.get(unit, 0) >= size and unit not in broken
            )
            for budget in self.budgets
        }


@dataclass
class StormReport:
    """What one storm did and what the watch saw."""

    requests: int = 0
    granted: int = 0
    denied: int = 0
    not_found: int = 0
    unanswered: int = 0
    """The API server failed to call the webhook (e.g. a connection dropped mid-call): nothing was evicted."""
    errors: int = 0
    states: int = 0
    """Pod states observed (the initial list, then one per watch event)."""
    below: int = 0
    """Observed states in which some budget had fewer ready units than its minAvailable."""
    first_below: float | None = None
    """Seconds into the storm when the first such state was seen."""
    fewest: dict[str, int] = field(default_factory=dict)
    """Budget label -> the fewest ready units seen."""
    minimum: dict[str, int] = field(default_factory=dict)
    """Budget label -> its minAvailable."""
    seconds: float = 0.0
    error_samples: list[str] = field(default_factory=list)
    first_below_pods: list[str] = field(default_factory=list)
    """The ModelServing's pods in the first state below minAvailable: name, UID, phase, readiness, terminating."""

    @property
    def fewest_ready(self) -> int:
        """The fewest ready units seen in any budget."""
        return min(self.fewest.values(), default=0)

    @property
    def held(self) -> bool:
        """No observed state had a budget below its minAvailable."""
        return self.below == 0

    def summary(self) -> str:
        """One line for logs and benchmark output."""
        rate = self.granted / self.seconds if self.seconds else 0.0
        floors = ", ".join(f"{k}: {self.fewest[k]} (min {self.minimum[k]})" for k in sorted(self.fewest))
        first = f", first at {self.first_below:.1f} s" if self.first_below is not None else ""
        return (
            f"{self.requests} evictions in {self.seconds:.0f} s: {self.granted} granted ({rate:.1f}/s), "
            f"{self.denied} denied, {self.not_found} not found, {self.unanswered} webhook calls failed, "
            f"{self.errors} errors; {self.states} pod states, "
            f"{self.below} below minAvailable{first}; fewest ready: {floors}"
        )


Outcome = Literal["granted", "denied", "not-found", "unanswered"]


async def evict(kube: KubeClient, namespace: str, pod: str) -> Outcome:
    """Evict ``pod`` through ``policy/v1``.

    Raises:
        ApiError: Any answer but a grant, a 429, a 404 or the API server's failure to call a webhook.
    """
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
    try:
        await kube.request("POST", PODS.path(namespace, pod, "eviction"), body=body, timeout=30)
    except TooManyRequests:
        return "denied"
    except NotFound:
        return "not-found"
    except ApiError as exc:
        if exc.status == 500 and "failed calling webhook" in exc.message:
            return "unanswered"
        raise
    return "granted"


def _describe(pod: KubeObject) -> str:
    md = pod.get("metadata") or {}
    status = pod.get("status") or {}
    ready = "ready" if pod_ready(pod) else "not-ready"
    gone = " terminating" if md.get("deletionTimestamp") else ""
    uid = str(md.get("uid", ""))[:8]
    return f"{md.get('name')} {uid} {status.get('phase')} {ready}{gone} rv={md.get('resourceVersion')}"


class _Watch:
    def __init__(self, kube: KubeClient, namespace: str, counter: UnitCounter, report: StormReport) -> None:
        self.kube, self.namespace, self.counter, self.report = kube, namespace, counter, report
        self.pods: dict[str, KubeObject] = {}
        self.started_at = 0.0
        self.ready_event = asyncio.Event()

    def live(self) -> list[str]:
        return sorted(
            name
            for name, pod in self.pods.items()
            if ((pod.get("metadata") or {}).get("labels") or {}).get(NAME_LABEL) == self.counter.ms
        )

    def _observe(self) -> None:
        counts = self.counter.ready(list(self.pods.values()))
        report = self.report
        report.states += 1
        low = False
        for budget in self.counter.budgets:
            count = counts[budget.label]
            report.fewest[budget.label] = min(report.fewest.get(budget.label, count), count)
            low = low or count < budget.min_available
        if low:
            report.below += 1
            if report.first_below is None:
                report.first_below = time.monotonic() - self.started_at
                report.first_below_pods = [_describe(self.pods[name]) for name in self.live()]

    async def run(self) -> None:
        listed = await self.kube.list(PODS, self.namespace)
        self.pods = {p["metadata"]["name"]: p for p in listed.items}
        self._observe()
        self.ready_event.set()
        version = listed.resource_version
        while True:
            async for event in self.kube.watch(PODS, self.namespace, resource_version=version, timeout_seconds=60):
                version = event.object["metadata"]["resourceVersion"]
                if event.type == "BOOKMARK":
                    continue
                name = event.object["metadata"]["name"]
                if event.type == "DELETED":
                    self.pods.pop(name, None)
                else:
                    self.pods[name] = event.object
                self._observe()


async def run_storm(
    clients: Sequence[KubeClient],
    watcher: KubeClient,
    ms: KubeObject,
    *,
    seconds: float = 60.0,
    on_tick: Callable[[], None] | None = None,
    seed: int | None = None,
) -> StormReport:
    """Run one storm against the ModelServing ``ms`` (as stored: namespace and spec are read from it).

    Args:
        clients: One evicting client per entry, each looping over the live pods in its own random order.
        watcher: The client of the LIST+WATCH that records every pod state.
        ms: The ModelServing object.
        seconds: How long the clients evict.
        on_tick: Called every 0.5 s while the storm runs (e.g. to drop a proxy's connections).
        seed: Seeds the clients' orders (for reproducible runs).

    Returns:
        The report; the watch keeps counting until every client stopped.
    """
    namespace, name = ms["metadata"]["namespace"], ms["metadata"]["name"]
    budgets = budgets_of(ms)
    report = StormReport(minimum={b.label: b.min_available for b in budgets})
    watch = _Watch(watcher, namespace, UnitCounter(name, budgets), report)
    watch_task = asyncio.create_task(watch.run())
    await asyncio.wait_for(watch.ready_event.wait(), 30)
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    watch.started_at = time.monotonic()
    deadline = loop.time() + seconds

    async def client_loop(kube: KubeClient, order: random.Random) -> None:
        while loop.time() < deadline:
            pods = watch.live()
            if not pods:
                await asyncio.sleep(0.05)
                continue
            order.shuffle(pods)
            for pod in pods:
                if loop.time() >= deadline:
                    return
                report.requests += 1
                try:
                    outcome = await evict(kube, namespace, pod)
                except (ApiError, OSError, TimeoutError) as exc:
                    report.errors += 1
                    if len(report.error_samples) < 5:
                        report.error_samples.append(f"{pod}: {exc}")
                    continue
                if outcome == "granted":
                    report.granted += 1
                elif outcome == "denied":
                    report.denied += 1
                elif outcome == "unanswered":
                    report.unanswered += 1
                else:
                    report.not_found += 1

    async def ticker() -> None:
        while on_tick is not None:
            await asyncio.sleep(0.5)
            on_tick()

    tick_task = asyncio.create_task(ticker())
    try:
        await asyncio.gather(*(client_loop(kube, random.Random(rng.random())) for kube in clients))
    finally:
        report.seconds = time.monotonic() - watch.started_at
        for task in (tick_task, watch_task):
            task.cancel()
        for task in (tick_task, watch_task):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    return report
