"""The rollout simulation behind ``kthena-py rollout plan``: what a rollout from one spec to another would do.

Guarantees: :func:`simulate_rollout` starts from OLD converged (every pod ready), switches to NEW's spec, then runs
steps (:meth:`~.driver.Simulation.step`). It stops after the first step in which no unit is taken down, created,
removed or becomes ready, or in which ``UpdateInProgress`` turned False and nothing was created or became ready:
the outcome is ``complete`` or ``partition`` when ``UpdateInProgress`` is False (or absent: nothing to roll out),
else ``stalled``; after ``max_steps`` steps it is ``unfinished``. Same inputs, same report.
"""

from __future__ import annotations

import copy
from typing import Any

from kthena_py.api.common import API_VERSION
from kthena_py.plan.modelserving.core.types import KubeObject, PodGroupSupport
from kthena_py.plan.modelserving.rollout.rollout import REASON_PARTITION

from .driver import VOLCANO, Simulation, available, budgets, role_ready
from .kubelet import Readiness
from .report import Outcome, RolloutReport, StepReport

__all__ = ["simulate_rollout"]


def _document(doc: KubeObject) -> dict[str, Any]:
    """A copy of a ModelServing document as if just created: no status, generation 1."""
    metadata = {k: v for k, v in (doc.get("metadata") or {}).items() if k in ("name", "namespace", "uid", "labels")}
    metadata["annotations"] = (doc.get("metadata") or {}).get("annotations") or {}
    if not metadata["annotations"]:
        del metadata["annotations"]
    metadata["generation"] = 1
    return {
        "apiVersion": doc.get("apiVersion", API_VERSION),
        "kind": "ModelServing",
        "metadata": copy.deepcopy(metadata),
        "spec": copy.deepcopy(doc.get("spec") or {}),
    }


def simulate_rollout(
    old: KubeObject,
    new: KubeObject,
    readiness: Readiness | None = None,
    *,
    support: PodGroupSupport = VOLCANO,
    max_steps: int = 200,
) -> RolloutReport:
    """Simulate the rollout from ``old`` to ``new`` (see the module docstring).

    Args:
        old: The ModelServing as it runs now (its status, if any, is ignored: it starts converged and ready).
        new: The edited ModelServing (only its ``spec`` is used).
        readiness: Which pods become ready per step during the rollout (default: every pending pod).
        support: PodGroup support of the simulated cluster.
        max_steps: Steps before giving up (outcome ``unfinished``).

    Returns:
        The report.

    Raises:
        pydantic.ValidationError: A document is not a valid ModelServing.
        PluginError: A plugin is unknown or misconfigured.
        SimulationError: OLD does not converge, or a step does not settle.
    """
    sim = Simulation(_document(old), support=support)
    sim.settle()
    start = sim.state()
    old_revision = start.revision
    sim.readiness = readiness or Readiness()
    sim.set_spec(new.get("spec") or {})
    state = sim.state()
    budget, role_budgets = budgets(state)
    lowest = available(state)
    role_lowest = {role: ready for role, ready, _ in role_ready(state)}
    steps: list[StepReport] = []
    outcome: Outcome = "unfinished"
    for number in range(1, max_steps + 1):
        report = sim.step(number)
        steps.append(report)
        lowest = min(lowest, report.min_available)
        for role, ready, _ in report.min_role_ready:
            role_lowest[role] = min(role_lowest.get(role, ready), ready)
        if not report.acted or (_finished(report) and not report.became_ready and not report.created):
            outcome = _outcome(report)
            break
    return RolloutReport(
        name=state.ref.name,
        namespace=state.ref.namespace,
        replicas=state.ms.spec.replicas,
        role_granularity=state.targets.role_granularity,
        budget=budget,
        role_budgets=role_budgets,
        old_revision=old_revision,
        new_revision=state.revision,
        steps=tuple(steps),
        outcome=outcome,
        min_available=lowest,
        min_role_ready=tuple((role, role_lowest.get(role, 0), wanted) for role, _, wanted in role_ready(state)),
    )


def _finished(report: StepReport) -> bool:
    return report.condition is not None and report.condition[0] == "False"


def _outcome(report: StepReport) -> Outcome:
    condition = report.condition
    if condition is None or condition[0] == "False":
        return "partition" if condition is not None and condition[1] == REASON_PARTITION else "complete"
    return "stalled"
