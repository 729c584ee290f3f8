"""Pure planners of the ModelServing controller (no I/O, no clock).

Entry points: :func:`plan_servinggroups` (pods, Services, ControllerRevisions, status),
:func:`plan_podgroups` (Volcano PodGroups) and :func:`render` (offline rendering). The contract with the
controller is in :mod:`kthena_py.plan.modelserving.types`.
"""

from kthena_py.plan.modelserving.plugins import KNOWN_PLUGINS, PluginError, validate_plugin, validate_plugins
from kthena_py.plan.modelserving.podgroups import plan_podgroups
from kthena_py.plan.modelserving.render import render
from kthena_py.plan.modelserving.servinggroups import plan_servinggroups

__all__ = [
    "KNOWN_PLUGINS",
    "PluginError",
    "plan_podgroups",
    "plan_servinggroups",
    "render",
    "validate_plugin",
    "validate_plugins",
]
