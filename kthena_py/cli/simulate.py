"""``kthena-py autoscaler simulate``: replay a load trace through a policy before applying it.

The flags are defined in :mod:`kthena_py.cli.autoscaler`; this module, imported only when the subcommand runs,
does the work.

``kthena-py autoscaler simulate -f POLICY.yaml --trace LOAD.csv`` reads the policy's scaling unit (the
homogeneous target; the total of a heterogeneous target, with the per-target split of every pass; one role of a
disaggregated target with ``--role``), replays the trace through the controller's own decision code
(:func:`~kthena_py.plan.autoscaling.simulate`: one pass per ``--sync-period`` of virtual time, no waiting) and
prints the replica timeline. ``--plot out.png`` also draws load and replicas over time (needs matplotlib: the
``plot`` extra).

Trace format (CSV): a header ``time,<metric>,<metric>...`` naming the policy's metric keys, then one row per
change of load: the time in seconds and each metric's value from then on (an empty cell: no data). Lines
starting with ``#`` are ignored. A value is per the metric's source: a Prometheus source's value is the query's
result (a total), a pod source's value is the total over ready replicas, spread evenly over them (replicas become
ready ``--ready-delay`` seconds after they are added).

Guarantees: deterministic (same inputs, same output); nothing touches a cluster; bad input ends with a one-line
error (exit status 1).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import io
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any, Literal

from kthena_py.api.autoscaling import AutoscalingPolicy, MetricSource
from kthena_py.controllers.autoscaling.convert import (
    PolicyError,
    cost_params,
    metric_targets,
    role_specs,
    scaling_spec,
)
from kthena_py.plan.autoscaling import (
    CostParam,
    ScalingSpec,
    TimelinePoint,
    TracePoint,
    optimize,
    role_metrics,
    simulate,
)

from .common import CommandError
from .optimize import load_policy

__all__ = ["plot", "read_trace", "run_simulate", "unit_of_policy"]


def read_trace(text: str, metrics: Sequence[str]) -> list[TracePoint]:
    """Parse a CSV trace.

    Raises:
        CommandError: No header, an unknown column, a bad number, or times out of order.
    """
    rows = [row for row in csv.reader(io.StringIO(text)) if row and not row[0].lstrip().startswith("#")]
    if not rows:
        raise CommandError("the trace is empty")
    header = [h.strip() for h in rows[0]]
    if not header or header[0] not in ("time", "t", "seconds"):
        raise CommandError("the trace's first column must be 'time' (seconds)")
    columns = header[1:]
    unknown = [c for c in columns if c not in metrics]
    if unknown:
        raise CommandError(f"trace column(s) {', '.join(unknown)} are not metrics of the policy ({', '.join(metrics)})")
    points: list[TracePoint] = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            time = float(row[0])
            values = {name: float(cell) for name, cell in zip(columns, row[1:], strict=False) if cell.strip() != ""}
        except ValueError as err:
            raise CommandError(f"trace line {number}: {err}") from err
        if not math.isfinite(time) or not all(math.isfinite(v) for v in values.values()):
            raise CommandError(f"trace line {number}: values must be finite")
        if points and time < points[-1].time:
            raise CommandError(f"trace line {number}: time {time:g} is before {points[-1].time:g}")
        points.append(TracePoint(time, values))
    if not points:
        raise CommandError("the trace has a header but no rows")
    return points


def _source_kind(sources: list[dict[str, MetricSource]], metrics: Sequence[str]) -> Literal["external", "pods"]:
    kinds = {
        "external" if (src := s.get(m)) is not None and src.prometheus is not None else "pods"
        for s in sources
        for m in metrics
    }
    return "external" if kinds == {"external"} else "pods"


def unit_of_policy(
    policy: AutoscalingPolicy, role: str | None
) -> tuple[ScalingSpec, Literal["external", "pods"], list[CostParam]]:
    """Return the scaling unit to simulate, the source kind its metrics use, and heterogeneous params (if any).

    Raises:
        CommandError: The policy has no target, or ``--role`` is missing or wrong.
    """
    spec = policy.spec
    try:
        metrics = metric_targets(spec.metrics)
        names = [m.name for m in metrics]
        if spec.homogeneous_target is not None:
            t = spec.homogeneous_target
            sources = [{} if t.target is None else dict(t.target.metric_sources or {})]
            unit = scaling_spec(policy, metrics, t.min_replicas, t.max_replicas)
            return unit, _source_kind(sources, names), []
        if spec.heterogeneous_target is not None:
            params = cost_params(policy)
            low = sum(p.min_replicas for p, _, _ in params)
            high = sum(p.max_replicas for p, _, _ in params)
            unit = scaling_spec(policy, metrics, low, high)
            return unit, _source_kind([dict(s) for _, _, s in params], names), [p for p, _, _ in params]
        if spec.disaggregated_target is not None:
            roles = role_specs(policy)
            if role is None or role not in roles:
                raise CommandError(f"a disaggregated policy needs --role (one of {', '.join(sorted(roles))})")
            chosen = roles[role]
            if chosen.fixed:
                raise CommandError(f"role {role} is fixed at {chosen.min_replicas} replicas: nothing to simulate")
            role_targets = role_metrics(chosen, metrics)
            unit = scaling_spec(policy, role_targets, chosen.min_replicas, chosen.max_replicas)
            api_role = spec.disaggregated_target.roles[role]
            sources = [dict(api_role.metric_sources or {})]
            return unit, _source_kind(sources, [m.name for m in role_targets]), []
    except PolicyError as err:
        raise CommandError(str(err)) from err
    raise CommandError("the policy has no homogeneousTarget, heterogeneousTarget or disaggregatedTarget")


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise CommandError(f"cannot read {path}: {err.strerror or err}") from err


def _rows(
    timeline: Sequence[TimelinePoint], metrics: Sequence[str], params: list[CostParam], rate: int
) -> list[dict[str, Any]]:
    rows = []
    for point in timeline:
        row: dict[str, Any] = {"time": point.time}
        row.update({m: point.values.get(m) for m in metrics})
        row.update(
            {
                "current": point.current,
                "ready": point.ready,
                "desired": point.desired,
                "mode": point.mode,
                "recommended": point.recommended,
            }
        )
        if params:
            row["allocation"] = optimize(params, point.desired, rate)
        rows.append(row)
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _table(rows: list[dict[str, Any]], metrics: Sequence[str], params: list[CostParam]) -> str:
    columns = ["time", *metrics, "current", "ready", "desired", "mode", "recommended"]
    columns += [p.name for p in params]
    lines = [[c for c in columns]]
    for row in rows:
        allocation = row.get("allocation") or {}
        lines.append([_cell(row.get(c, allocation.get(c))) for c in columns])
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in lines)


def _per_replica(point: TimelinePoint, metric: str, source: str) -> float:
    """The load of one replica: a pod source's total over the ready replicas, an external total over all."""
    value = point.values.get(metric)
    replicas = point.ready if source == "pods" else point.current
    if value is None or replicas <= 0:
        return math.nan
    return value / replicas


def plot(
    path: str,
    timeline: Sequence[TimelinePoint],
    unit: ScalingSpec,
    title: str,
    source: Literal["external", "pods"] = "pods",
) -> None:
    """Draw the load per replica against its target (top) and the replicas (bottom) into ``path``.

    Made to be read at a glance: the target and the panic threshold are labelled lines, panic passes are a
    labelled band, the legends sit outside the data, and both panels share the time axis.

    Raises:
        CommandError: matplotlib is not installed, or the image cannot be written.
    """
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt: Any = importlib.import_module("matplotlib.pyplot")
        patches: Any = importlib.import_module("matplotlib.patches")
    except ImportError as err:
        raise CommandError("--plot needs matplotlib: pip install 'kthena-py[plot]'") from err
    times = [p.time for p in timeline]
    step = times[1] - times[0] if len(times) > 1 else 1.0
    fig, (load_axis, replica_axis) = plt.subplots(
        2, 1, figsize=(11, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    panic = unit.behavior.scale_up.panic_policy
    threshold = None if panic is None or not panic.panic_mode_hold else panic.panic_threshold_percent
    for index, metric in enumerate(unit.metrics):
        color = colors[index % len(colors)]
        values = [_per_replica(p, metric.name, source) for p in timeline]
        load_axis.step(times, values, where="post", color=color, linewidth=2, label=f"{metric.name} per replica")
        target = float(metric.exact_target)
        load_axis.axhline(target, color=color, linestyle="--", linewidth=1, label=f"target {target:g}")
        if threshold is not None:
            load_axis.axhline(
                target * threshold / 100,
                color=color,
                linestyle=":",
                linewidth=1,
                label=f"panic threshold ({threshold}% of target)",
            )
    load_axis.set_ylabel("load per replica")
    load_axis.set_ylim(bottom=0)
    replica_axis.step(times, [p.desired for p in timeline], where="post", color="black", linewidth=2, label="desired")
    replica_axis.step(
        times, [p.ready for p in timeline], where="post", color="grey", linestyle=":", linewidth=2, label="ready"
    )
    replica_axis.axhline(unit.min_replicas, color="silver", linewidth=1, label=f"min {unit.min_replicas}")
    replica_axis.axhline(
        unit.max_replicas, color="silver", linewidth=1, linestyle="--", label=f"max {unit.max_replicas}"
    )
    replica_axis.set_ylabel("replicas")
    replica_axis.set_xlabel("time (s)")
    replica_axis.set_ylim(bottom=0, top=unit.max_replicas + 1)
    replica_axis.yaxis.get_major_locator().set_params(integer=True)
    panicking = [p.time for p in timeline if p.mode == "Panic"]
    for axis in (load_axis, replica_axis):
        for start in panicking:
            axis.axvspan(start, start + step, color="tab:red", alpha=0.12, linewidth=0)
        axis.grid(True, alpha=0.3)
    band = [patches.Patch(color="tab:red", alpha=0.12, label="panic mode (fast scale-up)")] if panicking else []
    for axis in (load_axis, replica_axis):
        handles, labels = axis.get_legend_handles_labels()
        axis.legend(
            handles + band, labels + [b.get_label() for b in band], loc="upper left", bbox_to_anchor=(1.01, 1.0)
        )
    load_axis.set_title(title)
    fig.tight_layout()
    try:
        fig.savefig(path, bbox_inches="tight", dpi=110)
    except OSError as err:
        raise CommandError(f"cannot write {path}: {err.strerror or err}") from err
    finally:
        plt.close(fig)


def run_simulate(args: argparse.Namespace) -> int:
    """Print the replica timeline (and optionally draw it); exit status 0."""
    policy = load_policy(args.filename)
    unit, kind, params = unit_of_policy(policy, args.role)
    source: Literal["external", "pods"] = kind if args.source == "auto" else args.source
    metrics = [m.name for m in unit.metrics]
    trace = read_trace(_read_text(args.trace), metrics)
    initial = args.initial if args.initial is not None else max(unit.min_replicas, 1)
    if initial < 0:
        raise CommandError("--initial must be >= 0")
    if args.sync_period <= 0:
        raise CommandError("--sync-period must be > 0")
    try:
        timeline = simulate(
            unit,
            trace,
            initial,
            sync_period=args.sync_period,
            start=args.start,
            end=args.end,
            source=source,
            ready_delay=args.ready_delay,
        )
    except ValueError as err:
        raise CommandError(str(err)) from err
    rate = policy.spec.heterogeneous_target.cost_expansion_rate_percent if policy.spec.heterogeneous_target else 200
    rows = _rows(timeline, metrics, params, rate)
    if args.format == "json":
        for row, point in zip(rows, timeline, strict=True):
            if args.verbose:
                row["reasons"] = list(point.reasons)
            print(json.dumps(row))
    else:
        print(f"# {policy.name or 'policy'}: {source} source, sync period {args.sync_period:g}s, initial {initial}")
        print(_table(rows, metrics, params))
        if args.verbose:
            for point in timeline:
                print(f"t={point.time:g}: " + " | ".join(point.reasons))
    if args.plot:
        role = f", role {args.role}" if args.role else ""
        title = f"{policy.name or 'policy'}{role}: {source} source, a pass every {args.sync_period:g}s"
        plot(args.plot, timeline, unit, title, source)
        print(f"plot written to {os.path.abspath(args.plot)}", file=sys.stderr)
    return 0
