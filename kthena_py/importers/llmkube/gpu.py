"""The GPU an InferenceService's pods ask for, from its own ``resources.gpu`` and its Model's ``hardware``.

Guarantees (pure functions of the two documents):

* The count is the InferenceService's ``resources.gpu`` when set, else the Model's ``hardware.gpu.count``; a
  Model with ``hardware.gpu.enabled: false`` and no count on the service means no GPU.
* The resource name is ``hardware.gpu.resourceName`` when set; else ``devic.es/dri-render`` for AMD with the
  ``vulkan`` or ``rocm`` runtime (or accelerator), else the vendor's device-plugin resource (NVIDIA's by default).
* With ``resourceClaims`` the claims allocate the devices: no device-plugin limit, the count still sizes the
  engine (as LLMKube).
* :func:`layer_shares` turns ``sharding.layerSplit`` ranges (``0-15``) into per-GPU layer counts, or says why not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kthena_py.importers.context import ImportDocument
from kthena_py.importers.documents import boolean, integer, object_list, string, string_list
from kthena_py.importers.report import ImportFailure

__all__ = ["GpuRequest", "gpu_request", "layer_shares", "resource_name"]

_VENDOR_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "intel": "gpu.intel.com/i915"}
_DRI_RENDER = "devic.es/dri-render"
_SPLIT_MODE = {"layer": "layer", "pipeline": "layer", "tensor": "row", "row": "row", "none": "none"}


@dataclass(frozen=True)
class GpuRequest:
    """What the engine container asks for and how llama.cpp spreads the model."""

    count: int = 0
    resource: str = _VENDOR_RESOURCE["nvidia"]
    toleration_key: str = ""
    claims: tuple[dict[str, Any], ...] = ()
    layers: int | None = None
    split_mode: str | None = None
    tensor_split: tuple[int, ...] = ()
    accelerator: str = ""
    amd_runtime: str = ""


def resource_name(vendor: str, accelerator: str, amd_runtime: str, override: str) -> str:
    """The extended resource a GPU is requested as."""
    if override:
        return override
    if vendor == "amd" and (amd_runtime in ("vulkan", "rocm") or accelerator in ("vulkan", "rocm")):
        return _DRI_RENDER
    return _VENDOR_RESOURCE.get(vendor, _VENDOR_RESOURCE["nvidia"])


def layer_shares(ranges: Sequence[str]) -> tuple[int, ...] | str:
    """Per-GPU layer counts of ``["0-15", "16-31"]`` (``(16, 16)``), or an error message."""
    shares: list[int] = []
    for entry in ranges:
        first, dash, last = entry.strip().partition("-")
        if not dash or not first.isdigit() or not last.isdigit() or int(last) < int(first):
            return f"layer range {entry!r} is not <first>-<last>"
        shares.append(int(last) - int(first) + 1)
    return tuple(shares)


def gpu_request(service: ImportDocument, model: ImportDocument | None) -> GpuRequest:
    """The GPU request of ``service``'s engine container (``model``: the Model it references, if in the input)."""
    count = integer(service, "spec.resources.gpu")
    if model is None:
        return GpuRequest(count=count or 0)
    enabled = boolean(model, "spec.hardware.gpu.enabled")
    if count is None:
        count = 0 if enabled is False else (integer(model, "spec.hardware.gpu.count") or 0)
    vendor = string(model, "spec.hardware.gpu.vendor") or "nvidia"
    accelerator = string(model, "spec.hardware.accelerator") or ""
    amd_runtime = string(model, "spec.hardware.gpu.runtime") or ""
    override = string(model, "spec.hardware.gpu.resourceName") or ""
    resource = resource_name(vendor, accelerator, amd_runtime, override)
    claims = tuple(dict(claim) for claim in object_list(model, "spec.hardware.gpu.resourceClaims") or ())
    strategy = string(model, "spec.hardware.gpu.sharding.strategy")
    split_ranges = string_list(model, "spec.hardware.gpu.sharding.layerSplit") or []
    shares = layer_shares(split_ranges)
    if isinstance(shares, str):
        raise ImportFailure(model.index, model.source, "spec.hardware.gpu.sharding.layerSplit", shares)
    layers = integer(model, "spec.hardware.gpu.layers")
    return GpuRequest(
        count=count,
        resource=resource,
        toleration_key=string(model, "spec.hardware.gpu.tolerationKey") or resource,
        claims=claims,
        layers=999 if layers == -1 else layers,
        split_mode=_SPLIT_MODE.get(strategy) if strategy else None,
        tensor_split=shares,
        accelerator=accelerator,
        amd_runtime=amd_runtime if vendor == "amd" else "",
    )
