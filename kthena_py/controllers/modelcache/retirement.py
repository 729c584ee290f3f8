"""What the retirement of superseded copies reads (:mod:`kthena_py.plan.modelcache.retire`): pods' mounts, rollouts.

Guarantees:

* Nothing is read unless the cache may have a copy to retire (:func:`may_retire`: its download Jobs of one
  fingerprint name more than one copy, or a cleanup Job exists while it lives), so a converged cache with one
  copy costs nothing here.
* :func:`cached_mounts` reads the manager's shared pod cache, which holds the pods of ModelServings (label
  ``modelserving.volcano.sh/name``, :func:`~kthena_py.controllers.resources.narrow_cache`): the gated
  ModelServings' pods are all there, no LIST per reconcile. Before a cleanup Job is created the reconciler
  confirms with :func:`live_mounts` (one live LIST of the namespace's pods), so a pod the manager does not cache
  (made by hand, by another workload) that mounts the copy also holds it.
* :func:`rollouts` judges each ModelServing naming the cache by
  :func:`~kthena_py.plan.modelserving.rollout.progress.rollout_progress` (what ``kthena-py rollout status``
  prints): finished only when complete, never at a partition; a ModelServing being deleted recreates no pod and
  counts as finished; one whose spec cannot be read does not.
"""

from __future__ import annotations

from collections.abc import Sequence

import pydantic

from kthena_py.kube import KubeApi
from kthena_py.kube.objects import KubeObject, is_deleting, name_of
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelcache import CLEANUP, DOWNLOAD, JobView
from kthena_py.plan.modelcache.retire import PodMount, Rollout, pod_mounts
from kthena_py.plan.modelserving.rollout.progress import rollout_progress
from kthena_py.runtime.cache import CacheReader

from ..servingview import parse_modelserving

__all__ = ["cached_mounts", "live_mounts", "may_retire", "rollouts"]


def may_retire(jobs: Sequence[JobView]) -> bool:
    """Whether the cache may have a superseded copy (see the module docstring)."""
    copies: dict[str, set[str]] = {}
    for job in jobs:
        if job.kind == CLEANUP:
            return True
        if job.kind == DOWNLOAD:
            copies.setdefault(job.fingerprint, set()).add(job.content)
    return any(len(found) > 1 for found in copies.values())


def _mounts(pods: Sequence[KubeObject], claim: str) -> tuple[PodMount, ...]:
    return tuple(m for p in pods for m in pod_mounts(p) if m.claim == claim)


def cached_mounts(cache: CacheReader, namespace: str, claim: str) -> tuple[PodMount, ...]:
    """Mounts of ``claim`` by the cached pods of ``namespace`` (ModelServing pods)."""
    return _mounts(cache.list(PODS, namespace), claim)


async def live_mounts(client: KubeApi, namespace: str, claim: str) -> tuple[PodMount, ...]:
    """Mounts of ``claim`` by every pod of ``namespace`` (one live LIST).

    Raises:
        ApiError: The LIST failed (the engine retries; nothing was removed).
    """
    listed = await client.list(PODS, namespace)
    return _mounts(list(listed.items), claim)


def rollouts(servings: Sequence[KubeObject]) -> tuple[Rollout, ...]:
    """Whether each ModelServing's rollout has finished (see the module docstring)."""
    found = []
    for obj in servings:
        if is_deleting(obj):
            found.append(Rollout(name_of(obj), True, "being deleted"))
            continue
        try:
            progress = rollout_progress(parse_modelserving(obj))
        except pydantic.ValidationError:
            found.append(Rollout(name_of(obj), False, "its spec cannot be read"))
            continue
        found.append(Rollout(name_of(obj), progress.done and not progress.partition, progress.message))
    return tuple(found)
