"""The AutoscalingPolicy mutating webhook's defaults: the CRD defaults, made explicit.

Kthena's mutating webhook adds ``spec.behavior`` sections with values of its own (scale-up 4 instances per
1m, scale-down with a 5m stabilization window, panic mode disabled) that disagree with the CRD defaults of
the same fields. kthena_py's adds exactly the sections Kthena's adds, when absent: ``behavior.scaleDown``,
``behavior.scaleUp.stablePolicy`` and ``behavior.scaleUp.panicPolicy`` (and their parents), but filled with
the CRD defaults, taken from the API models themselves (so the two cannot drift apart):

* a stable policy (scale-down, scale-up): ``instances: 1``, ``percent: 100``, ``period: 15s``,
  ``selectPolicy: Or``;
* the panic policy: ``percent: 1000``, ``panicThresholdPercent: 200``, ``panicModeHold: 60s``.

A policy stored with a mutated behaviour therefore behaves exactly like one that spelled those sections out
as ``{}``. Sections that are present are left alone (the API server has already defaulted their fields).
Guarantees: pure; never raises; emits only RFC 6902 ``add`` operations at absent (or ``null``) members; an
object whose ``spec`` or ``behavior`` is not an object gets no patch (schema validation rejects it later).
"""

from __future__ import annotations

from typing import Any

from kthena_py.api.autoscaling import AutoscalingPolicyPanicPolicy, AutoscalingPolicyStablePolicy
from kthena_py.api.common import to_dict

__all__ = ["autoscaling_policy_patch", "default_panic_policy", "default_stable_policy"]


def default_stable_policy() -> dict[str, Any]:
    """The CRD defaults of a stable policy, as JSON."""
    return to_dict(AutoscalingPolicyStablePolicy())


def default_panic_policy() -> dict[str, Any]:
    """The CRD defaults of a panic policy, as JSON."""
    return to_dict(AutoscalingPolicyPanicPolicy())


def _absent(container: dict[str, Any], key: str) -> bool:
    return container.get(key) is None


def autoscaling_policy_patch(policy: Any) -> list[dict[str, Any]]:
    """Return the JSON Patch that adds the absent ``spec.behavior`` sections of an AutoscalingPolicy.

    Args:
        policy: The AutoscalingPolicy as received by the webhook (any JSON value).

    Returns:
        ``add`` operations, possibly none.
    """
    spec = policy.get("spec") if isinstance(policy, dict) else None
    if not isinstance(spec, dict):
        return []
    scale_up = {"stablePolicy": default_stable_policy(), "panicPolicy": default_panic_policy()}
    if _absent(spec, "behavior"):
        behavior = {"scaleUp": scale_up, "scaleDown": default_stable_policy()}
        return [{"op": "add", "path": "/spec/behavior", "value": behavior}]
    behavior = spec["behavior"]
    if not isinstance(behavior, dict):
        return []
    ops: list[dict[str, Any]] = []
    if _absent(behavior, "scaleDown"):
        ops.append({"op": "add", "path": "/spec/behavior/scaleDown", "value": default_stable_policy()})
    if _absent(behavior, "scaleUp"):
        ops.append({"op": "add", "path": "/spec/behavior/scaleUp", "value": scale_up})
    elif isinstance(behavior["scaleUp"], dict):
        for key, value in scale_up.items():
            if _absent(behavior["scaleUp"], key):
                ops.append({"op": "add", "path": f"/spec/behavior/scaleUp/{key}", "value": value})
    return ops
