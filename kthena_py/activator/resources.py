"""The resource types the activator reads and writes (Kthena's API group, without the controllers' package)."""

from __future__ import annotations

from kthena_py.api.common import (
    AUTOSCALING_POLICY_KIND,
    AUTOSCALING_POLICY_PLURAL,
    GROUP,
    MODEL_SERVING_KIND,
    MODEL_SERVING_PLURAL,
    VERSION,
)
from kthena_py.api.modelpool import MODEL_POOL_GROUP, MODEL_POOL_KIND, MODEL_POOL_PLURAL, MODEL_POOL_VERSION
from kthena_py.kube.resources import PODS, ResourceType
from kthena_py.plan.modelbooster.naming import NETWORKING_GROUP

__all__ = ["AUTOSCALINGPOLICIES", "MODELPOOLS", "MODELROUTES", "MODELSERVERS", "MODELSERVINGS", "PODS"]

MODELSERVINGS = ResourceType(GROUP, VERSION, MODEL_SERVING_KIND, MODEL_SERVING_PLURAL)
AUTOSCALINGPOLICIES = ResourceType(GROUP, VERSION, AUTOSCALING_POLICY_KIND, AUTOSCALING_POLICY_PLURAL)
# Kthena's router API (optional CRDs): model names as the router knows them.
MODELSERVERS = ResourceType(NETWORKING_GROUP, "v1alpha1", "ModelServer", "modelservers")
MODELROUTES = ResourceType(NETWORKING_GROUP, "v1alpha1", "ModelRoute", "modelroutes")
# kthena_py's own group (optional CRD): pools of ModelServings sharing GPU slots.
MODELPOOLS = ResourceType(MODEL_POOL_GROUP, MODEL_POOL_VERSION, MODEL_POOL_KIND, MODEL_POOL_PLURAL)
