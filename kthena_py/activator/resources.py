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
from kthena_py.kube.resources import PODS, ResourceType

__all__ = ["AUTOSCALINGPOLICIES", "MODELSERVINGS", "PODS"]

MODELSERVINGS = ResourceType(GROUP, VERSION, MODEL_SERVING_KIND, MODEL_SERVING_PLURAL)
AUTOSCALINGPOLICIES = ResourceType(GROUP, VERSION, AUTOSCALING_POLICY_KIND, AUTOSCALING_POLICY_PLURAL)
