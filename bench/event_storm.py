"""Benchmark: what an Event storm costs with client-go's correlator and without it (printed, never asserted).

A storm as a crash-looping fleet makes it: ``--objects`` ModelServings of ``--instances`` role instances each, whose
pods fail again and again. Every failure records, per role instance, Kthena's three sentences: a ``RoleRecreating``
Warning, then ``RoleCreating`` and ``RoleRunning`` (Normal), each its own Event (``join=False``, as the
ModelServing controller records them). Each of ``--failures`` failures is one coalescing window: the recorder is
flushed after it, so a repeat raises the Event's count as it would seconds later.

Two sides, in alternating rounds, each on fresh objects (fresh UIDs: every bucket starts full):

* ``correlated``: the manager's recorder as it runs, with client-go's correlator and its defaults (similar messages
  combined from the tenth, a burst of 25 per object and type, then one every five minutes);
* ``plain``: the same recorder with both stages off (every write sent, as before the correlator).

Printed per side (medians over rounds): the requests the storm sent (``rest_client_requests_total``: a new Event
is one, a raised count one patch when the recorder remembers the Event, else three), writes filtered, Events
stored, the CPU of kube-apiserver plus etcd and of this process (the manager's ``KubeClient`` on its event loop),
and the ratios ``correlated / plain``.

Usage: python bench/event_storm.py [--objects N] [--instances N] [--failures N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kthena_py.kube import KubeClient
from kthena_py.kube.metrics import REST_CLIENT_REQUESTS
from kthena_py.kube.resources import EVENTS, NAMESPACES
from kthena_py.runtime import logconfig
from kthena_py.runtime.eventcorrelator import EventCorrelator
from kthena_py.runtime.events import EventRecorder
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.controlplane import EnvTest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apiserver_cost import LOOP_FACTORY, LOOP_NAME, cpu_seconds

COMPONENT = "modelserving-controller"
SIDES = ("correlated", "plain")


def involved(side: str, round_: int, i: int) -> dict[str, Any]:
    """A ModelServing reference of its own for each side, round and object (the Event needs only the reference)."""
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": f"{side}-{round_}-ms-{i}", "namespace": side, "uid": str(uuid.uuid4())},
    }


def requests_sent() -> float:
    """HTTP requests the manager's client has sent so far (every verb and answer)."""
    return sum(s.value for m in REST_CLIENT_REQUESTS.collect() for s in m.samples if s.name.endswith("_total"))


def written(component: str, outcome: str) -> float:
    """Event writes (or filtered ones) of ``component`` so far, both types."""
    return sum(
        REGISTRY.get_sample_value(
            "kthena_events_written_total", {"component": component, "type": type_, "outcome": outcome}
        )
        or 0.0
        for type_ in ("Normal", "Warning")
    )


async def storm(recorder: EventRecorder, objects: list[dict[str, Any]], instances: int, failures: int) -> None:
    """Every object's role instances fail ``failures`` times; one coalescing window per failure."""
    for _ in range(failures):
        for obj in objects:
            group = obj["metadata"]["name"]
            for r in range(instances):
                role = f"Role decode/decode-{r} in ServingGroup {group}-0"
                cause = f"pod {group}-0-decode-{r}-0 failed (exit code 137)"
                recorder.event(obj, "Warning", "RoleRecreating", f"{role} is now Recreating: {cause}", join=False)
                recorder.event(obj, "Normal", "RoleCreating", f"{role} is now Creating", join=False)
                recorder.event(obj, "Normal", "RoleRunning", f"{role} is now Running", join=False)
        await recorder.flush()


async def one_side(
    client: KubeClient, pids: list[int], side: str, round_: int, args: argparse.Namespace
) -> dict[str, float]:
    component = f"{COMPONENT}-{side}"
    correlator = EventCorrelator() if side == "correlated" else EventCorrelator(max_similar=0, burst=0)
    recorder = EventRecorder(client, component, coalesce_seconds=0.0, correlator=correlator)
    objects = [involved(side, round_, i) for i in range(args.objects)]
    sent_before = requests_sent()
    filtered_before = written(component, "filtered")
    server_before, client_before, wall = cpu_seconds(pids), time.process_time(), time.monotonic()
    await storm(recorder, objects, args.instances, args.failures)
    client_cpu, wall = time.process_time() - client_before, time.monotonic() - wall
    requests = requests_sent() - sent_before
    await asyncio.sleep(0.5)  # the writes' watch fan-out and etcd's share settle
    server_cpu = cpu_seconds(pids) - server_before
    names = {o["metadata"]["name"] for o in objects}
    stored = [e for e in (await client.list(EVENTS, side)).items if e["involvedObject"]["name"] in names]
    return {
        "requests": requests,
        "filtered": written(component, "filtered") - filtered_before,
        "stored": float(len(stored)),
        "server": server_cpu,
        "client": client_cpu,
        "wall": wall,
    }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=20, help="crash-looping ModelServings")
    ap.add_argument("--instances", type=int, default=16, help="role instances per ModelServing")
    ap.add_argument("--failures", type=int, default=10, help="failures of every role instance")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    logconfig.configure("warning", json=False)  # one line per filtered write is the manager's debug, not ours
    with tempfile.TemporaryDirectory() as d, EnvTest(d, crds=[]) as env:
        pids = [p.pid for p in env.processes if p.pid]
        client = await KubeClient.from_kubeconfig(str(env.kubeconfig_path))
        try:
            for side in SIDES:
                await client.create(NAMESPACES, {"metadata": {"name": side}})
            runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
            for r in range(args.rounds):
                order = SIDES if r % 2 == 0 else SIDES[::-1]
                for side in order:
                    runs[side].append(await one_side(client, pids, side, r, args))
                print(
                    f"round {r + 1}: "
                    + "; ".join(
                        f"{side} {runs[side][-1]['requests']:.0f} requests, {runs[side][-1]['stored']:.0f} Events, "
                        f"API server + etcd {runs[side][-1]['server']:.2f} s, client {runs[side][-1]['client']:.2f} s"
                        for side in SIDES
                    )
                )
            recorded = args.objects * args.instances * 3 * args.failures
            print(
                f"storm: {args.objects} ModelServings x {args.instances} role instances x 3 Events x "
                f"{args.failures} failures = {recorded} recorded; "
                f"medians of {args.rounds} rounds (client on {LOOP_NAME}):"
            )
            for figure, label in (
                ("requests", "Event requests sent"),
                ("filtered", "writes filtered"),
                ("stored", "Events stored"),
                ("server", "API server + etcd CPU (s)"),
                ("client", "client CPU (s)"),
                ("wall", "storm wall time (s)"),
            ):
                med = {side: statistics.median(run[figure] for run in runs[side]) for side in SIDES}
                ratios = [
                    c[figure] / p[figure] for c, p in zip(runs["correlated"], runs["plain"], strict=True) if p[figure]
                ]
                ratio = f"{statistics.median(ratios):.3f}" if ratios else "-"
                print(f"  {label:<28} correlated {med['correlated']:9.2f}  plain {med['plain']:9.2f}  ratio {ratio}")
        finally:
            await client.close()


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=LOOP_FACTORY) as runner:
        runner.run(main())
