"""The ModelServing reconcilers simulated over an in-memory cluster: ``kthena-py rollout plan`` and planner tests.

The cluster is a :class:`~kthena_py.kube.memory.MemoryStore` (the one in-memory cluster of the project, with the
API server's write semantics); the pieces around it, one concern each:

* :mod:`.applier` -- a planner's Plan written to the store as the controller's applier writes it, the status
  share by server-side apply, and the snapshot the planners read.
* :mod:`.kubelet` -- which pods start, become Ready, restart in place or stay stuck (:class:`Readiness`).
* :mod:`.driver` -- :class:`Simulation`: the gang, ServingGroup and rollout planners run until they settle, step
  by step.
* :mod:`.report` and :mod:`.rollout` -- what a rollout did (:class:`RolloutReport`), :func:`simulate_rollout`.

Guarantees: no I/O and no clock (simulated time only); the controller's own planners decide everything. This
package sits beside the controllers (it never imports them, the runtime or the test support).
"""

from .driver import EPOCH, PLACEHOLDER_UID, VOLCANO, Simulation, SimulationError
from .kubelet import Readiness
from .report import Outcome, RolloutReport, StepReport, UnitAction
from .rollout import simulate_rollout

__all__ = [
    "EPOCH",
    "PLACEHOLDER_UID",
    "VOLCANO",
    "Outcome",
    "Readiness",
    "RolloutReport",
    "Simulation",
    "SimulationError",
    "StepReport",
    "UnitAction",
    "simulate_rollout",
]
