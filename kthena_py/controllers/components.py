"""The ``source.component`` of the Events each controller family records.

Kthena's tools and dashboards select Kthena's Events by their source component
(``kubectl get events --field-selector source=modelserving-controller``), so each controller family records
under the name Kthena uses for it: the ModelServing controllers (ServingGroups, gang scheduling, the Running
notifier) as ``modelserving-controller``. Kthena's autoscaler records no Events; its controller is named
``autoscaler`` (``--controllers``), so both autoscaling controllers record as ``autoscaler-controller``, by the
same pattern. The ModelBooster controller records as ``modelbooster-controller``, the name Kthena's
ModelBooster work uses; the ModelCache controller (ours) as
``modelcache-controller``, the ModelPool controller (ours) as ``modelpool-controller``.
Get a recorder with ``manager.recorder_for(<component>)``.
"""

from __future__ import annotations

__all__ = ["AUTOSCALER", "COMPONENTS", "MODELBOOSTER", "MODELCACHE", "MODELPOOL", "MODELSERVING"]

MODELSERVING = "modelserving-controller"
"""ModelServing Events (Kthena's own name)."""
AUTOSCALER = "autoscaler-controller"
"""AutoscalingPolicy Events (Kthena's autoscaler records none; named after its ``autoscaler`` controller)."""
MODELBOOSTER = "modelbooster-controller"
"""ModelBooster Events."""
MODELCACHE = "modelcache-controller"
"""ModelCache Events (kthena_py's own kind)."""
MODELPOOL = "modelpool-controller"
"""ModelPool Events (kthena_py's own kind)."""

COMPONENTS: dict[str, str] = {
    "ModelServing": MODELSERVING,
    "AutoscalingPolicy": AUTOSCALER,
    "ModelBooster": MODELBOOSTER,
    "ModelCache": MODELCACHE,
    "ModelPool": MODELPOOL,
}
"""The component that records Events about each kind."""
