"""Benchmark: the manager's CPU per unit of its hottest paths, each against its former self (printed, never asserted).

Issue 33 cut the manager's CPU where every ModelServing pays it many times over. Each path is measured here in this
process, in alternating rounds, against the way it used to be done, kept callable for the comparison:

* ``plan``: microseconds per :func:`~kthena_py.plan.modelserving.groups.servinggroups.plan_servinggroups` of a
  settled ModelServing (2 groups x 2 roles x 2 pods, the converge benchmark's shape), with the pod-state memo,
  against the same with the memo emptied before each call (every pod parsed again, as before);
* ``targets``: microseconds per ``plan_servinggroups`` of the same settled ModelServing, with each observed group's
  first-pass target reused as its wanted target (``targets.REUSE_OBSERVED_TARGETS``), against deciding every wanted
  group again (as before);
* ``cache lookup``: nanoseconds to find a type's informer, by type (how a cache read finds it now) against by a
  ``(type, field selector)`` key object (how it did before).

Usage: python bench/hot_paths.py [--plans N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

from kthena_py.kube.resources import PODS
from kthena_py.plan.modelserving.core import groups as pod_states
from kthena_py.plan.modelserving.core import targets
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.runtime.cache import _Key
from kthena_py.simulation import VOLCANO, Simulation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from converge import modelserving  # the converge benchmark's ModelServing: both price one shape


def settled_plan() -> Callable[[], object]:
    """``plan_servinggroups`` of one settled ModelServing of the converge benchmark's shape, ready to call."""
    sim = Simulation(modelserving(1))
    sim.settle()
    ms = sim.parse()
    ref, observed = sim.ref(ms), sim.observed()
    return lambda: plan_servinggroups(ms, ref, observed, VOLCANO, sim.now)


def alternate(
    name: str, n: int, rounds: int, now: Callable[[], object], before: Callable[[], object]
) -> tuple[list[float], list[float]]:
    """Microseconds per call of ``now`` and of ``before``, in alternating rounds."""
    first: list[float] = []
    second: list[float] = []
    for r in range(rounds):
        a = timeit.timeit(now, number=n) * 1e6 / n
        b = timeit.timeit(before, number=n) * 1e6 / n
        first.append(a)
        second.append(b)
        print(f"  {name} round {r + 1}: now {a:.0f} us, before {b:.0f} us ({a / b:.2f})")
    return first, second


def plans(n: int, rounds: int) -> tuple[list[float], list[float]]:
    plan = settled_plan()

    def parsed_again() -> object:
        pod_states._POD_STATES.clear()
        return plan()

    return alternate("plan (memoised / parsed again)", n, rounds, plan, parsed_again)


def target_reuse(n: int, rounds: int) -> tuple[list[float], list[float]]:
    plan = settled_plan()

    def reused() -> object:
        targets.REUSE_OBSERVED_TARGETS = True
        return plan()

    def decided_again() -> object:
        targets.REUSE_OBSERVED_TARGETS = False
        return plan()

    try:
        return alternate("targets (reused / decided again)", n, rounds, reused, decided_again)
    finally:
        targets.REUSE_OBSERVED_TARGETS = True


def lookups(rounds: int) -> tuple[list[float], list[float]]:
    by_type = {PODS: object()}
    by_key = {_Key(PODS, None): object()}
    n = 200_000
    direct: list[float] = []
    keyed: list[float] = []
    for _ in range(rounds):
        direct.append(timeit.timeit(lambda: by_type.get(PODS), number=n) * 1e9 / n)
        keyed.append(timeit.timeit(lambda: by_key.get(_Key(PODS, None)), number=n) * 1e9 / n)
    return direct, keyed


def line(name: str, unit: str, now: list[float], before: list[float]) -> str:
    med = statistics.median
    paired = " ".join(f"{a / b:.2f}" for a, b in zip(now, before, strict=True))
    return (
        f"  {name}: {med(now):.0f} {unit} now, {med(before):.0f} {unit} before; "
        f"ratio of medians {med(now) / med(before):.2f}, paired {paired}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=2000, help="plans per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    memo, parsed = plans(args.plans, args.rounds)
    reused, again = target_reuse(args.plans, args.rounds)
    by_type, by_key = lookups(args.rounds)
    print("summary (medians; ratio < 1: the path as it is now costs less):")
    print(line("plan_servinggroups (settled, 8 pods)", "us", memo, parsed))
    print(line("plan_servinggroups, targets reused (settled, 8 pods)", "us", reused, again))
    print(line("informer lookup", "ns", by_type, by_key))


if __name__ == "__main__":
    main()
