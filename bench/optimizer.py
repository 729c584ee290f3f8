"""Benchmark: heterogeneous optimizer speed and cost quality (printed, never asserted).

1. Solve time of ``optimize`` (exact exchange method) and ``optimize_milp`` (scipy ``milp`` with the L1
   linearisation) for 2, 8 and 32 params with random ``int32`` costs and max replicas up to 1e6, at P = 200:
   median and worst over ``--runs`` instances (the milp figure also counts answers that failed the exact
   verification, e.g. budgets beyond 2**53).
2. Cost quality over ``--instances`` random instances at P = 200 (2..8 params, costs 1..1000, bounds up to
   1000): cost / C* of Kthena's block greedy versus ``optimize``, and how often Kthena breaks the API's promise
   (cost <= 2 * C*).

Usage: python bench/optimizer.py [--instances N] [--runs R] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from kthena_py.plan.autoscaling import CostParam, allocation_cost, kthena_greedy, min_cost, optimize, optimize_milp


def random_params(rng: random.Random, count: int, max_cost: int, max_replicas: int) -> list[CostParam]:
    params = []
    for i in range(count):
        high = rng.randint(1, max_replicas)
        low = rng.randint(0, high // 10)
        params.append(CostParam(f"p{i}", rng.randint(1, max_cost), low, high))
    return params


def timed(solve: Callable[[list[CostParam], int], object], params: list[CostParam], total: int) -> tuple[float, object]:
    started = time.perf_counter()
    result = solve(params, total)
    return time.perf_counter() - started, result


def bench_speed(rng: random.Random, runs: int) -> None:
    print(f"solve time at P=200, int32 costs, max replicas up to 1e6 ({runs} instances per size)")
    header = f"{'exact median':>12} {'exact worst':>12} | {'milp median':>12} {'milp worst':>12} {'milp ok':>8}"
    print(f"{'params':>6} | {header}")
    for count in (2, 8, 32):
        exact_times, milp_times, verified = [], [], 0
        for _ in range(runs):
            params = random_params(rng, count, 2**31 - 1, 1_000_000)
            low = sum(p.min_replicas for p in params)
            total = rng.randint(low, sum(p.max_replicas for p in params))
            seconds, _ = timed(optimize, params, total)
            exact_times.append(seconds)
            seconds, solved = timed(optimize_milp, params, total)
            milp_times.append(seconds)
            verified += solved is not None
        print(
            f"{count:>6} | {statistics.median(exact_times) * 1e3:>10.2f}ms {max(exact_times) * 1e3:>10.2f}ms"
            f" | {statistics.median(milp_times) * 1e3:>10.2f}ms {max(milp_times) * 1e3:>10.2f}ms"
            f" {verified:>4}/{runs}"
        )


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (
        f"mean {statistics.fmean(ordered):.3f}  median {statistics.median(ordered):.3f}"
        f"  p99 {p99:.3f}  max {ordered[-1]:.3f}"
    )


def bench_quality(rng: random.Random, instances: int) -> None:
    greedy_ratios, our_ratios, broken, changed = [], [], 0, 0
    for _ in range(instances):
        params = random_params(rng, rng.randint(2, 8), 1000, 1000)
        low = sum(p.min_replicas for p in params)
        total = rng.randint(low, sum(p.max_replicas for p in params))
        best = min_cost(params, total)
        if best == 0:
            continue
        greedy = kthena_greedy(params, total)
        ours = optimize(params, total)
        greedy_ratios.append(float(allocation_cost(params, greedy) / best))
        our_ratios.append(float(allocation_cost(params, ours) / best))
        broken += allocation_cost(params, greedy) > 2 * best
        changed += ours != greedy
    count = len(greedy_ratios)
    print(f"\ncost / C* at P=200 over {count} instances")
    print(f"  Kthena greedy: {quantiles(greedy_ratios)}")
    print(f"  optimize:      {quantiles(our_ratios)}")
    print(f"  Kthena above 2x C*: {broken} ({100 * broken / count:.2f}%); optimize differs from Kthena: {changed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=10_000, help="instances for the cost comparison")
    parser.add_argument("--runs", type=int, default=50, help="instances per size for the timings")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    bench_speed(rng, args.runs)
    bench_quality(rng, args.instances)


if __name__ == "__main__":
    main()
