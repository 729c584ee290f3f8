"""Render a ModelCache into a gated pod: the read-only volume and mount, the env, and node affinity.

Guarantees for :func:`mount_model_cache` (a pod whose revision names a resolved cache):

* One volume :data:`~kthena_py.api.modelcache.MODEL_CACHE_VOLUME`: the claim (``readOnly: true``) for claim
  storage, a ``hostPath`` of the node-local path (``type: Directory``: the cache made it; a pod never creates an
  empty one) for node-local storage.
* Every container and init container gets a read-only mount of it at
  :data:`~kthena_py.api.modelcache.MODEL_CACHE_MOUNT_PATH` with ``subPath`` = the model's directory, and the env
  :data:`~kthena_py.api.modelcache.MODEL_PATH_ENV` (the mount path) and
  :data:`~kthena_py.api.modelcache.MODEL_CACHE_NAME_ENV` (the cache's name), appended after the container's own
  variables; a variable the user already set (by name) is left as the user wrote it, never duplicated.
* ``nodes`` (node-local caches): a required node affinity ``kubernetes.io/hostname In nodes`` is added to every
  existing required ``nodeSelectorTerm`` (terms are ORed, so each must hold it: AND), or as the one term when
  there is none. Other affinity (preferred terms, pod affinity) is untouched. An empty ``nodes`` gives a term no
  node matches (the gate never opens then, but a pod rendered anyway must not land where the weights are not).
* Conflicting user volumes or mounts are never overwritten here: the gate refuses such a ModelServing first
  (:func:`~kthena_py.plan.modelserving.core.modelcache.template_conflict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kthena_py.api.modelcache import MODEL_CACHE_MOUNT_PATH, MODEL_CACHE_NAME_ENV, MODEL_CACHE_VOLUME, MODEL_PATH_ENV
from kthena_py.plan.modelserving.core.modelcache import CacheMount
from kthena_py.plan.modelserving.core.types import KubeObject

__all__ = ["HOSTNAME_LABEL", "hostname_affinity", "mount_model_cache"]

HOSTNAME_LABEL = "kubernetes.io/hostname"


def _volume(mount: CacheMount) -> dict[str, Any]:
    if mount.host_path is not None:
        return {"name": MODEL_CACHE_VOLUME, "hostPath": {"path": mount.host_path, "type": "Directory"}}
    return {"name": MODEL_CACHE_VOLUME, "persistentVolumeClaim": {"claimName": mount.claim_name, "readOnly": True}}


def hostname_affinity(spec: dict[str, Any], nodes: Sequence[str]) -> None:
    """AND ``kubernetes.io/hostname In nodes`` into every required node selector term of ``spec`` (in place)."""
    expression = {"key": HOSTNAME_LABEL, "operator": "In", "values": list(nodes)}
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [t for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)]
    if not terms:
        terms = [{"matchExpressions": [expression]}]
    else:
        terms = [{**t, "matchExpressions": [*(t.get("matchExpressions") or []), expression]} for t in terms]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity


def mount_model_cache(pod: KubeObject, mount: CacheMount, nodes: Sequence[str] | None) -> None:
    """Give ``pod`` (rendered, owned by the caller) the cache's volume, mounts, env and affinity, in place.

    Args:
        pod: The pod to change.
        mount: The resolved mount of its revision.
        nodes: The nodes a node-local cache is Ready on (``None``: no affinity).
    """
    spec = pod.setdefault("spec", {})
    spec["volumes"] = [*(spec.get("volumes") or []), _volume(mount)]
    env = {MODEL_PATH_ENV: MODEL_CACHE_MOUNT_PATH, MODEL_CACHE_NAME_ENV: mount.cache}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            container["volumeMounts"] = [
                *(container.get("volumeMounts") or []),
                {
                    "name": MODEL_CACHE_VOLUME,
                    "mountPath": MODEL_CACHE_MOUNT_PATH,
                    "subPath": mount.sub_path,
                    "readOnly": True,
                },
            ]
            own = {e.get("name") for e in container.get("env") or [] if isinstance(e, dict)}
            extra = [{"name": k, "value": v} for k, v in env.items() if k not in own]
            if extra:
                container["env"] = [*(container.get("env") or []), *extra]
    if nodes is not None:
        hostname_affinity(spec, nodes)
