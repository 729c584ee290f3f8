"""Which Pod changes wake the ServingGroup reconciler.

Guarantees: :func:`pod_change_matters` passes every Pod change that can alter a plan or the status —
additions, deletions, failures, restarts, label/annotation changes, readiness lost — and drops what
cannot: changes :func:`~kthena_py.runtime.controller.pod_state_changed` already ignores, and a pod
becoming Ready while another pod of its ServingGroup is still not Ready (readiness only matters to the
planner for whole groups: ``availableReplicas``, the ``Available`` condition, scale-down order, all of
which the last pod of the group to become Ready brings about). It reads only the informer cache,
whose pod store already holds the new object when the predicate runs.
"""

from __future__ import annotations

from kthena_py.kube.objects import KubeObject, controller_ref, is_deleting, label_of, namespace_of
from kthena_py.kube.resources import PODS
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.controller import Predicate, became_ready_only, pod_state_changed
from kthena_py.vocab.owners import controller_uid

from .notify import GROUP, pod_ready

__all__ = ["existing_pod_changed", "pod_change_matters"]


def existing_pod_changed(old: KubeObject | None, _new: KubeObject) -> bool:
    """An update of a pod (not its creation or deletion): a ServingGroup completed, lost readiness, failed or restarted.

    The ServingGroup reconciler takes these before new work, so the status and recovery of running groups never wait
    behind a burst of creations.
    """
    return old is not None


def pod_change_matters(cache: SharedCache) -> Predicate:
    """Build the Pod predicate of the ServingGroup reconciler over ``cache`` (see the module docstring)."""
    cache.index_label(PODS, GROUP)

    def predicate(old: KubeObject | None, new: KubeObject) -> bool:
        if not pod_state_changed(old, new):
            return False
        if old is None or not became_ready_only(old, new):
            return True
        return _group_ready(cache, new)

    return predicate


def _group_ready(cache: SharedCache, pod: KubeObject) -> bool:
    """Whether every live pod of ``pod``'s ServingGroup (same controller) is Ready."""
    group = label_of(pod, GROUP)
    owner = controller_ref(pod)
    if not group or owner is None:
        return True
    siblings = cache.by_label(PODS, GROUP, group, namespace_of(pod))
    return all(pod_ready(p) for p in siblings if not is_deleting(p) and controller_uid(p) == owner.get("uid"))
