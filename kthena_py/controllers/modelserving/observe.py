"""Read-only views of the cluster for the ModelServing reconcilers, all from the informer cache.

Guarantees: no API calls; every function tolerates objects that are absent or half-formed; only
objects controlled by the given ModelServing UID are returned as its own (leftovers of a deleted
same-named predecessor are never adopted; :func:`foreign_pods` lists them, since their names are
taken until the garbage collector removes them). :func:`observe_serving` is the one observation every
ModelServing reconciler plans from: the owned objects plus the units this ModelServing's eviction tracker
records as disrupted (only a tracker controlled by its UID counts), so the ServingGroup, PodGroup and rollout
planners build the same targets.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from kthena_py.kube.objects import KubeObject, meta
from kthena_py.kube.resources import CONFIGMAPS, CONTROLLER_REVISIONS, CRDS, PODGROUPS, PODS, SERVICES
from kthena_py.plan.modelserving.core.types import MSRef, Observed, PodGroupSupport
from kthena_py.plan.modelserving.eviction.tracker import disrupted_units, tracker_entries, tracker_name
from kthena_py.runtime.cache import CacheReader, SharedCache
from kthena_py.vocab.owners import controlled_by

from ..resources import narrow_cache
from ..servingview import NAME_LABEL, ms_ref, observe, parse_modelserving

PODGROUP_CRD_NAME = "podgroups.scheduling.volcano.sh"
PODGROUP_CRD_SELECTOR = f"metadata.name={PODGROUP_CRD_NAME}"

__all__ = [
    "PODGROUP_CRD_SELECTOR",
    "Observation",
    "foreign_pods",
    "ms_ref",
    "observe",
    "observe_serving",
    "parse_modelserving",
    "podgroup_support",
    "register_informers",
]


def register_informers(cache: SharedCache) -> None:
    """Make sure the cache watches everything the ModelServing reconcilers read (and only that)."""
    narrow_cache(cache)
    for rt in (PODS, SERVICES, CONTROLLER_REVISIONS):
        cache.informer(rt)
    cache.informer(PODGROUPS, optional=True)
    cache.informer(CRDS, field_selector=PODGROUP_CRD_SELECTOR)
    cache.index_label(CONTROLLER_REVISIONS, NAME_LABEL)


def foreign_pods(cache: CacheReader, ref: MSRef) -> list[KubeObject]:
    """Cached pods labelled with this ModelServing's name but not controlled by it.

    They are a same-named predecessor's pods that have not gone yet (or orphans): their names are not free.
    Only pods named the way this controller names pods (``<ms>-<group>-<role>-<ordinal>-<index>``) count.
    """
    others = [o for o in cache.by_label(PODS, NAME_LABEL, ref.name, ref.namespace) if not controlled_by(o, ref.uid)]
    if not others:
        return []  # the common case: no pattern to build
    shape = re.compile(rf"^{re.escape(ref.name)}-[0-9]+-.+-[0-9]+-[0-9]+$")
    return [o for o in others if shape.match(str(meta(o).get("name", "")))]


def podgroup_support(cache: CacheReader) -> PodGroupSupport:
    """Whether Volcano's PodGroup CRD is served, and whether it has ``spec.subGroupPolicy``."""
    crd = cache.get(CRDS, PODGROUP_CRD_NAME, field_selector=PODGROUP_CRD_SELECTOR)
    if crd is None:
        return PodGroupSupport(crd_served=False)
    sub_group = False
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") != "v1beta1" or not version.get("served"):
            continue
        schema = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
        spec_props = (schema.get("spec") or {}).get("properties") or {}
        sub_group = "subGroupPolicy" in spec_props
        return PodGroupSupport(crd_served=True, sub_group_policy=sub_group)
    return PodGroupSupport(crd_served=False)


EXPIRY_MARGIN = 0.1
"""Seconds added to a disruption record's expiry before looking again (so the record has surely expired)."""


@dataclass(frozen=True)
class Observation:
    """What one ModelServing reconcile plans from."""

    observed: Observed
    """The objects the ModelServing controls, with the units its eviction tracker records as disrupted."""
    disruption_ends_in: float | None = None
    """Seconds until the first recorded disruption expires (plus :data:`EXPIRY_MARGIN`); ``None`` when none is."""


def observe_serving(cache: CacheReader, ref: MSRef, now: float, *, trackers: bool) -> Observation:
    """Everything owned by the ModelServing ``ref`` and the units recorded as disrupted, as the cache sees them now.

    Args:
        cache: The informer cache.
        ref: The ModelServing.
        now: The current time (epoch seconds): expired records disrupt nothing.
        trackers: The eviction budget runs, so tracker ConfigMaps are cached (else nothing is recorded).

    Returns:
        The observation. A tracker controlled by another UID (left by a deleted ModelServing of the same name)
        records nothing.
    """
    observed = observe(cache, ref)
    if not trackers:
        return Observation(observed)
    tracker = cache.get(CONFIGMAPS, tracker_name(ref.name), ref.namespace)
    live = [entry.expires_at - now for entry in tracker_entries(tracker, ref.uid).values() if entry.expires_at > now]
    return Observation(
        dataclasses.replace(observed, disrupted=disrupted_units(tracker, now, ref.uid)),
        min(live) + EXPIRY_MARGIN if live else None,
    )
