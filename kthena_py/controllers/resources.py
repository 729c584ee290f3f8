"""Resource types of the Kthena API, for the client layer, and what of the cluster the manager caches.

:func:`narrow_cache` limits the cached Pods, Services, PodGroups and ControllerRevisions to those labelled
``modelserving.volcano.sh/name`` (what a ModelServing creates, Kthena's and ours alike): the manager's
memory and watch traffic then grow with the ModelServing workloads, not with the cluster.
"""

from __future__ import annotations

from kthena_py.api.common import (
    AUTOSCALING_POLICY_KIND,
    AUTOSCALING_POLICY_PLURAL,
    GROUP,
    MODEL_BOOSTER_KIND,
    MODEL_BOOSTER_PLURAL,
    MODEL_SERVING_KIND,
    MODEL_SERVING_PLURAL,
    VERSION,
)
from kthena_py.api.modelcache import MODEL_CACHE_GROUP, MODEL_CACHE_KIND, MODEL_CACHE_PLURAL, MODEL_CACHE_VERSION
from kthena_py.api.modelpool import MODEL_POOL_GROUP, MODEL_POOL_KIND, MODEL_POOL_PLURAL, MODEL_POOL_VERSION
from kthena_py.kube.resources import CONTROLLER_REVISIONS, PODGROUPS, PODS, SERVICES, ResourceType
from kthena_py.plan.modelbooster.naming import NETWORKING_GROUP
from kthena_py.plan.modelserving.core import naming
from kthena_py.runtime.cache import SharedCache

MODELSERVINGS = ResourceType(GROUP, VERSION, MODEL_SERVING_KIND, MODEL_SERVING_PLURAL)
AUTOSCALINGPOLICIES = ResourceType(GROUP, VERSION, AUTOSCALING_POLICY_KIND, AUTOSCALING_POLICY_PLURAL)
MODELBOOSTERS = ResourceType(GROUP, VERSION, MODEL_BOOSTER_KIND, MODEL_BOOSTER_PLURAL)
# Kthena's router API (optional CRDs): what a ModelBooster expands into next to its ModelServing.
MODELSERVERS = ResourceType(NETWORKING_GROUP, "v1alpha1", "ModelServer", "modelservers")
MODELROUTES = ResourceType(NETWORKING_GROUP, "v1alpha1", "ModelRoute", "modelroutes")
# kthena_py's own API (optional CRD): the ModelCaches a ModelServing's serving gate waits for.
MODELCACHES = ResourceType(MODEL_CACHE_GROUP, MODEL_CACHE_VERSION, MODEL_CACHE_KIND, MODEL_CACHE_PLURAL)
# kthena_py's own API (optional CRD): ModelServings sharing GPU slots, whose replicas only the pool controller writes.
MODELPOOLS = ResourceType(MODEL_POOL_GROUP, MODEL_POOL_VERSION, MODEL_POOL_KIND, MODEL_POOL_PLURAL)

NARROWED = (PODS, SERVICES, PODGROUPS, CONTROLLER_REVISIONS)


def narrow_cache(cache: SharedCache) -> None:
    """Cache only the objects a ModelServing owns (idempotent; call before the first informer of each)."""
    for rt in NARROWED:
        cache.select(rt, naming.LABEL_NAME)
