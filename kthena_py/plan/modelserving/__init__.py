"""Pure planners of the ModelServing controller (no I/O, no clock), in rooms that stack like floors.

The heart is :mod:`.core`: the observed cluster parsed into groups (``core.groups``), the desired fleet and its
budgets computed once (``core.targets`` over ``core.rolling``), packed with the revisions into the one
:class:`~.core.state.PlanningState` every planner reads (``core.state``). The rooms above only read that state:

* :mod:`.render` -- documents: pods and headless Services (``render.pods``), Volcano PodGroups (``render.podgroups``).
* :mod:`.eviction` -- the eviction budget: what an eviction would cost, the tracker of granted evictions.
* :mod:`.groups` -- the ServingGroup planner: create, recreate and delete pods, recovery, the status it reports.
* :mod:`.rollout` -- the rollout planner: which units to take down or update in place, coordination, history.
* :mod:`.offline` -- the planners run without a cluster: ``kthena-py render`` (the rollout simulation behind
  ``kthena-py rollout plan`` drives an in-memory cluster, so it lives above, in :mod:`kthena_py.simulation`).

A room imports only rooms below it (``core`` < ``render`` | ``eviction`` < ``groups`` < ``rollout`` < ``offline``;
import-linter checks it). The contract with the controller is :mod:`.core.types`: a planner takes
:class:`~.core.types.Observed` and returns a :class:`~.core.types.Plan`.

Entry points: :func:`plan_servinggroups`, :func:`plan_podgroups`, :func:`render`.
"""

from kthena_py.plan.modelserving.core.plugins import KNOWN_PLUGINS, PluginError, validate_plugin, validate_plugins
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.offline.render import render
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups

__all__ = [
    "KNOWN_PLUGINS",
    "PluginError",
    "plan_podgroups",
    "plan_servinggroups",
    "render",
    "validate_plugin",
    "validate_plugins",
]
