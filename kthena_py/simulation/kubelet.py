"""The kubelet of the simulated cluster: which pods start, become Ready, restart in place, or stay stuck.

Guarantees:

* Pods only change through the ``status`` subresource of the store, as the kubelet reports them.
* :meth:`Kubelet.admit` gives a new pod ``phase: Pending`` (what it reports before its containers start).
* :meth:`Kubelet.tick` makes pending pods Running and Ready as :class:`Readiness` allows: at most ``per_step``
  units (ServingGroups, or role instances under ``RoleRollingUpdate``), lowest group, role and ordinal first. A
  pod that never becomes ready reports a container waiting reason the planners treat as stuck
  (``ImagePullBackOff`` by default), which is what kwok does in the cluster tier for a bad image.
* A Running pod whose spec images were patched in place restarts its containers on the new image
  (``restartCount`` + 1) and is Ready again, as the kubelet does, unless it never becomes ready.
* Terminating pods and pods of no unit are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from kthena_py.kube.memory import MemoryStore
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.vocab.conditions import POD_READY
from kthena_py.vocab.pods import PHASE_PENDING, PHASE_RUNNING

__all__ = ["Kubelet", "Readiness", "Unit", "ready_status", "unit_of"]

Unit = tuple[str, int, str, int]
"""A pod's unit: (its name, group ordinal, role, role ordinal)."""


@dataclass(frozen=True)
class Readiness:
    """Which pending pods become Running and Ready at the end of a step."""

    per_step: int | None = None
    """At most this many units (ServingGroups, or role instances under ``RoleRollingUpdate``) become ready per
    step, lowest group and role ordinal first; ``None``: every pending unit."""
    update_revision: bool = True
    """``False``: no pod of the update revision ever becomes ready (a bad image)."""
    never: frozenset[str] = frozenset()
    """Units whose pods never become ready: ServingGroup names (``<ms>-<g>``) or role instances
    (``<ms>-<g>/<role>-<r>``)."""
    bad_image: str | None = None
    """Pods with a container image containing this text never become ready."""
    stuck_reason: str = "ImagePullBackOff"
    """The container waiting reason a pod that never becomes ready reports."""


def unit_of(pod: KubeObject, ms_name: str, role_level: bool) -> Unit | None:
    """The unit ``pod`` belongs to (a ServingGroup, or a role instance when ``role_level``), or ``None``."""
    labels = pod.get("metadata", {}).get("labels") or {}
    group = naming.parse_group_name(ms_name, str(labels.get(naming.LABEL_GROUP_NAME, "")))
    role = str(labels.get(naming.LABEL_ROLE, ""))
    role_id = str(labels.get(naming.LABEL_ROLE_ID, ""))
    ordinal = naming.parse_role_id(role, role_id)
    if group is None or ordinal is None:
        return None
    name = naming.group_name(ms_name, group)
    return (f"{name}/{role_id}" if role_level else name), group, role, ordinal


def ready_status(now: float, pod: KubeObject | None = None, restarts: int = 0) -> KubeObject:
    """The status of a Running and Ready pod reporting its spec images."""
    containers = ((pod or {}).get("spec") or {}).get("containers") or [{"name": "main"}]
    return {
        "phase": PHASE_RUNNING,
        "conditions": [{"type": POD_READY, "status": "True", "lastTransitionTime": format_time(now)}],
        "containerStatuses": [
            {"name": c.get("name"), "image": c.get("image"), "ready": True, "restartCount": restarts}
            for c in containers
        ],
    }


def image_drift(pod: KubeObject) -> bool:
    """A Running pod whose spec images were patched in place and whose status still reports the old ones."""
    seen = {c.get("name"): c.get("image") for c in (pod.get("status") or {}).get("containerStatuses") or []}
    return any(seen.get(c.get("name"), c.get("image")) != c.get("image") for c in pod["spec"].get("containers") or [])


class Kubelet:
    """Reports the pods of one namespace of ``store`` (see the module docstring)."""

    def __init__(self, store: MemoryStore, namespace: str, readiness: Readiness | None = None) -> None:
        self.store = store
        self.namespace = namespace
        self.readiness = readiness or Readiness()

    def report(self, pod: KubeObject, status: KubeObject) -> None:
        """Write ``status`` as ``pod``'s status (the status subresource)."""
        self.store.replace(PODS, {**pod, "status": status}, self.namespace, subresource="status")

    def admit(self, created: list[KubeObject]) -> None:
        """New pods report ``Pending``."""
        for obj in created:
            if obj.get("kind") == "Pod" and not obj.get("status"):
                self.report(obj, {"phase": PHASE_PENDING})

    def _never_ready(self, pod: KubeObject, unit: str, update_revision: str) -> bool:
        rules = self.readiness
        labels = pod["metadata"].get("labels") or {}
        if unit in rules.never or unit.split("/")[0] in rules.never:
            return True
        if not rules.update_revision and labels.get(naming.LABEL_REVISION) == update_revision:
            return True
        images = [str(c.get("image", "")) for c in pod["spec"].get("containers") or []]
        return rules.bad_image is not None and any(rules.bad_image in image for image in images)

    def tick(self, now: float, ms_name: str, role_level: bool, update_revision: str) -> tuple[tuple[str, ...], bool]:
        """Let pods start, restart and become ready; returns the units made ready and whether any pod changed."""
        pending: dict[tuple[int, str, int], tuple[str, list[KubeObject]]] = {}
        stuck = restarted = False
        for pod in self.store.objects(PODS, self.namespace):
            status = pod.get("status") or {}
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if status.get("phase") == PHASE_RUNNING:
                if image_drift(pod) and not self._never_ready(pod, "", update_revision):
                    restarts = max(
                        (int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []), default=0
                    )
                    self.report(pod, ready_status(now, pod, restarts + 1))
                    restarted = True
                continue
            unit = unit_of(pod, ms_name, role_level)
            if unit is None:
                continue
            name, group, role, ordinal = unit
            if self._never_ready(pod, name, update_revision):
                if not status.get("containerStatuses"):
                    stuck = True
                    waiting = {"waiting": {"reason": self.readiness.stuck_reason}}
                    self.report(
                        pod,
                        {
                            "phase": PHASE_PENDING,
                            "containerStatuses": [{"name": "main", "restartCount": 0, "state": waiting}],
                        },
                    )
                continue
            key = (group, role, ordinal) if role_level else (group, "", 0)
            pending.setdefault(key, (name, []))[1].append(pod)
        chosen = sorted(pending)
        if self.readiness.per_step is not None:
            chosen = chosen[: max(0, self.readiness.per_step)]
        made: list[str] = []
        for key in chosen:
            name, pods = pending[key]
            for pod in pods:
                self.report(pod, ready_status(now, pod))
            made.append(name)
        return tuple(made), bool(made) or stuck or restarted
