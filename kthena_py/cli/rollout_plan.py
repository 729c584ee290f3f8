"""``kthena-py rollout plan -f OLD.yaml --to NEW.yaml``: what a rollout would do, step by step, offline.

Runs the controller's planners over an in-memory cluster
(:func:`~kthena_py.simulation.simulate_rollout`):
OLD starts converged with every pod ready, then
the spec becomes NEW's. Each step reconciles until nothing changes and prints the units the rollout takes down, the
units (re)created and surged, the units removed, the units the partition keeps, the ready ServingGroups, and the
``UpdateInProgress`` condition; then pods become ready:

* ``--replicas-ready all`` (default): every pod created in the step becomes ready at its end;
* ``--replicas-ready N``: at most N units (ServingGroups, or role instances under ``RoleRollingUpdate``) become
  ready per step, lowest ordinal first, as when capacity or start-up is slow;
* ``--replicas-ready none``: no pod of the new revision ever becomes ready (a bad image): shows the stall and how
  many units it takes down;
* ``--never-ready UNIT[,UNIT]`` (repeatable): these units never become ready (``<ms>-<g>`` or
  ``<ms>-<g>/<role>-<r>``).

NEW is validated as an update of OLD first (the admission rules, e.g. both budgets resolving to 0), and
``OLD`` and ``NEW`` must name the same ModelServing. ``-o json`` prints the report as JSON instead.

Exit status: 0 when the rollout completes or reaches its partition, 3 when it stalls or does not finish within
``--max-steps``, 1 for unreadable or invalid input. Same input, same output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

import pydantic
import yaml

from kthena_py.api.modelserving import ModelServing
from kthena_py.api.validation import validate_document
from kthena_py.plan.modelserving.core.plugins import PluginError
from kthena_py.plan.modelserving.core.revision import RevisionData, revision_data
from kthena_py.plan.modelserving.core.rolling import Budget
from kthena_py.plan.modelserving.rollout.history import describe_changes
from kthena_py.simulation import (
    Readiness,
    RolloutReport,
    SimulationError,
    StepReport,
    UnitAction,
    simulate_rollout,
)

from .common import CommandError

__all__ = ["format_report", "readiness_of", "run"]

STALLED_EXIT = 3


def _load(path: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
        docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except (OSError, yaml.YAMLError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc
    found = [d for d in docs if d.get("kind") == "ModelServing"]
    if not found:
        raise CommandError(f"{path} holds no ModelServing")
    return found[0]


def readiness_of(replicas_ready: str, never_ready: list[str]) -> Readiness:
    """The :class:`Readiness` of the ``--replicas-ready`` and ``--never-ready`` flags."""
    never = frozenset(unit.strip() for value in never_ready for unit in value.split(",") if unit.strip())
    if replicas_ready == "all":
        return Readiness(never=never)
    if replicas_ready == "none":
        return Readiness(update_revision=False, never=never)
    return Readiness(per_step=int(replicas_ready), never=never)


def _budget(budget: Budget, of: str) -> str:
    return f"maxUnavailable {budget.max_unavailable}, maxSurge {budget.max_surge}, partition {budget.partition} {of}"


def _units(actions: tuple[UnitAction, ...], report: RolloutReport) -> str:
    def label(revision: str) -> str:
        if revision == report.new_revision:
            return "new"
        return "old" if revision == report.old_revision else revision

    by_revision: dict[str, list[str]] = {}
    for action in actions:
        by_revision.setdefault(label(action.revision), []).append(action.unit)
    return "; ".join(f"{', '.join(units)} ({revision})" for revision, units in by_revision.items())


def _step_lines(step: StepReport, report: RolloutReport, previous_protected: tuple[str, ...]) -> list[str]:
    lines = [f"step {step.number}:"]
    fields = [
        ("take down", ", ".join(step.take_down)),
        ("patch", ", ".join(f"{unit} (in place)" for unit in step.patched)),
        ("hold", "; ".join(step.held)),
        ("create", _units(step.created, report)),
        ("surge", _units(step.surge, report)),
        ("remove", ", ".join(step.removed)),
        ("keep", ", ".join(step.protected) + " (partition)" if step.protected != previous_protected else ""),
    ]
    lines += [f"  {name:<10} {value}" for name, value in fields if value]
    available = f"{step.available}/{report.replicas} ServingGroups ready"
    if step.min_available < step.available:
        available += f" (lowest during the step: {step.min_available})"
    lines.append(f"  {'state':<10} {available}, {step.updated} updated, {step.live} live")
    if step.role_ready:
        lows = {role: ready for role, ready, _ in step.min_role_ready}
        roles = ", ".join(
            f"{role} {ready}/{wanted}" + (f" (lowest {lows[role]})" if lows.get(role, ready) < ready else "")
            for role, ready, wanted in step.role_ready
        )
        lines.append(f"  {'roles':<10} ready instances: {roles}")
    if step.condition is not None:
        status, reason, message = step.condition
        lines.append(f"  {'condition':<10} UpdateInProgress={status} {reason}: {message}")
    if step.became_ready:
        lines.append(f"  {'then ready':<10} {', '.join(step.became_ready)}")
    return lines


def format_report(report: RolloutReport, changes: tuple[str, ...]) -> str:
    """The text ``rollout plan`` prints."""
    kind = "RoleRollingUpdate" if report.role_granularity else "ServingGroupRollingUpdate"
    lines = [f"ModelServing {report.namespace}/{report.name}: {report.replicas} ServingGroups, {kind}"]
    if report.role_granularity:
        lines += [f"  role {role}: {_budget(budget, 'per group')}" for role, budget in report.role_budgets]
    else:
        lines.append(f"  {_budget(report.budget, f'of {report.replicas}')}")
    lines.append(f"revision {report.old_revision} -> {report.new_revision}")
    lines += [f"  {change}" for change in changes] or ["  (no change to the pods)"]
    protected: tuple[str, ...] = ()
    for step in report.steps:
        lines.append("")
        lines += _step_lines(step, report, protected)
        protected = step.protected
    last = report.steps[-1] if report.steps else None
    taking = sum(1 for step in report.steps if step.take_down or step.patched or step.surge)
    low = f"ready ServingGroups never below {report.min_available}/{report.replicas}"
    if report.min_role_ready:
        low += "; ready instances never below " + ", ".join(
            f"{role} {ready}/{wanted}" for role, ready, wanted in report.min_role_ready
        )
    lines.append("")
    if report.outcome == "complete":
        lines.append(f"result: complete after {len(report.steps)} steps ({taking} taking units down or surging); {low}")
    elif report.outcome == "partition":
        kept = ", ".join(last.protected) if last is not None else ""
        lines.append(f"result: partition reached after {len(report.steps)} steps: {kept} stay on their revision; {low}")
    elif report.outcome == "stalled":
        message = last.condition[2] if last is not None and last.condition is not None else ""
        lines.append(f"result: stalled at step {len(report.steps)}: {message}; {low}")
    else:
        lines.append(f"result: not finished after {len(report.steps)} steps; {low}")
    return "\n".join(lines) + "\n"


def _revision_data(doc: dict[str, Any]) -> RevisionData:
    return revision_data(ModelServing.model_validate({**doc, "status": None}).spec)


def run(args: argparse.Namespace) -> int:
    """Simulate the rollout and print it."""
    old = _load(args.filename)
    new = _load(args.to)
    old_name = (old.get("metadata") or {}).get("name")
    new_name = (new.get("metadata") or {}).get("name")
    if old_name != new_name:
        raise CommandError(f"{args.filename} and {args.to} name different ModelServings ({old_name}, {new_name})")
    problems = [f"{args.filename}: {e}" for e in validate_document(old)]
    problems += [f"{args.to}: {e}" for e in validate_document(new, old=old)] if not problems else []
    if problems:
        raise CommandError("; ".join(problems))
    try:
        report = simulate_rollout(
            old, new, readiness_of(args.replicas_ready, args.never_ready), max_steps=args.max_steps
        )
    except (pydantic.ValidationError, PluginError, SimulationError) as err:
        raise CommandError(str(err)) from err
    changes = describe_changes(_revision_data(old), _revision_data(new))
    if args.output == "json":
        sys.stdout.write(json.dumps({**dataclasses.asdict(report), "changes": list(changes)}, indent=2) + "\n")
    else:
        sys.stdout.write(format_report(report, changes))
    return 0 if report.outcome in ("complete", "partition") else STALLED_EXIT
