"""``RoleRunning`` / ``ServingGroupRunning`` events when the last pod of a unit becomes Ready.

Guarantees: an event is recorded only on an observed transition (a pod update from not Ready to
Ready that completes its role instance or ServingGroup), only by the replica responsible for the pod's
namespace (the leader, or with ``--sharding`` the owner of the namespace's slot: one Event, not one per
replica), and never
from a cache replay, so a restarted manager records nothing for units that were already running.
A role instance that needs a headless Service (its role has a ``workerTemplate``) is not Running
while that Service is missing (e.g. refused by the API server).
Recording never blocks the informer (the recorder writes in the background).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_py.kube.objects import KubeObject, is_deleting, label_of, labels_of, namespace_of
from kthena_py.kube.resources import PODS, SERVICES
from kthena_py.plan.modelserving.groups.events import joinable, role_message
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import pod_running_and_ready
from kthena_py.runtime.events import EventSink
from kthena_py.vocab.labels import SERVING_GROUP_NAME, SERVING_NAME, SERVING_ROLE, SERVING_ROLE_ID

from ..resources import MODELSERVINGS

NAME = SERVING_NAME
GROUP = SERVING_GROUP_NAME
ROLE = SERVING_ROLE
ROLE_ID = SERVING_ROLE_ID


def pod_ready(pod: KubeObject) -> bool:
    """Running with condition Ready=True and not terminating."""
    return pod_running_and_ready(pod) and not is_deleting(pod)


class RunningNotifier:
    """An informer handler on Pods that records Running transitions on the owning ModelServing."""

    def __init__(self, cache: SharedCache, recorder: EventSink, responsible: Callable[[str], bool]) -> None:
        self.cache = cache
        self.recorder = recorder
        self.responsible = responsible
        cache.index_label(PODS, GROUP)

    def on_add(self, obj: KubeObject) -> None:
        """Adds (including cache replays) are not transitions."""

    def on_delete(self, obj: KubeObject) -> None:
        """Deletions are reported by the reconcilers."""

    def _service_present(self, labels: dict[str, str], namespace: str) -> bool:
        service = self.cache.get(SERVICES, f"{labels[GROUP]}-{labels[ROLE_ID]}-0", namespace)
        return service is not None and not is_deleting(service)

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        """Record RoleRunning (and ServingGroupRunning) when ``new`` completes its unit."""
        if pod_ready(old) or not pod_ready(new):
            return
        ns = namespace_of(new)
        if not self.responsible(ns):
            return
        labels = labels_of(new)
        ms = self.cache.get(MODELSERVINGS, labels.get(NAME, ""), ns)
        if ms is None or not labels.get(GROUP) or not labels.get(ROLE_ID):
            return
        roles: list[dict[str, Any]] = ((ms.get("spec") or {}).get("template") or {}).get("roles") or []
        group_pods = [p for p in self.cache.by_label(PODS, GROUP, labels[GROUP], ns) if not is_deleting(p)]
        spec = next((r for r in roles if r.get("name") == labels.get(ROLE)), None)
        if spec is None:
            return
        instance = [p for p in group_pods if label_of(p, ROLE_ID) == labels[ROLE_ID]]
        if spec.get("workerTemplate") is not None and not self._service_present(labels, ns):
            return
        if len(instance) == int(spec.get("workerReplicas") or 0) + 1 and all(pod_ready(p) for p in instance):
            message = role_message(str(labels.get(ROLE)), labels[ROLE_ID], labels[GROUP], "Running")
            self.recorder.event(ms, "Normal", "RoleRunning", message, join=joinable("RoleRunning"))
            expected = sum((int(r.get("replicas", 1)) * (int(r.get("workerReplicas") or 0) + 1)) for r in roles)
            if len(group_pods) == expected and all(pod_ready(p) for p in group_pods):
                self.recorder.event(ms, "Normal", "ServingGroupRunning", f"ServingGroup {labels[GROUP]} is now Running")
