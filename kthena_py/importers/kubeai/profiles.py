"""KubeAI's system configuration as far as a Model's translation needs it: resource profiles and engine images.

Guarantees:

* :data:`DEFAULT_RESOURCE_PROFILES` and :data:`ENGINE_IMAGES` approximate the defaults KubeAI's chart ships
  (``resourceProfiles`` and ``modelServers.<engine>.images``); a team with its own profiles passes its system
  config (``--kubeai-config``), read by :func:`profiles_from_config`.
* :func:`profiles_from_config` and :func:`images_from_config` are pure: they take the parsed config (the
  ``config.yaml`` of KubeAI's ConfigMap, or the chart's values holding the same keys) and return its
  ``resourceProfiles`` and ``modelServers.<engine>.images``, or raise :class:`ValueError` naming the bad key.
* :func:`scaled` multiplies a profile's per-unit quantities by the ``<count>`` of ``resourceProfile``, as KubeAI
  does, keeping binary suffixes binary (``24Gi`` x 2 is ``48Gi``).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from kthena_py.api.quantity import QuantityError, QuantityFormat, format_quantity, parse_quantity
from kthena_py.importers.context import ResourceProfile

__all__ = [
    "DEFAULT_RESOURCE_PROFILES",
    "ENGINE_IMAGES",
    "engine_image",
    "images_from_config",
    "profiles_from_config",
    "scaled",
]

_GPU = "nvidia.com/gpu"
_GPU_TOLERATION: Mapping[str, Any] = {"key": _GPU, "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def _gpu_profile(cpu: str, memory: str) -> ResourceProfile:
    return ResourceProfile(
        image_name="nvidia-gpu",
        requests={_GPU: "1", "cpu": cpu, "memory": memory},
        limits={_GPU: "1"},
        tolerations=(_GPU_TOLERATION,),
    )


DEFAULT_RESOURCE_PROFILES: Mapping[str, ResourceProfile] = {
    "cpu": ResourceProfile(image_name="cpu", requests={"cpu": "1", "memory": "2Gi"}),
    "nvidia-gpu-l4": _gpu_profile("6", "24Gi"),
    "nvidia-gpu-a100-40gb": _gpu_profile("8", "80Gi"),
    "nvidia-gpu-a100-80gb": _gpu_profile("8", "160Gi"),
    "nvidia-gpu-h100": _gpu_profile("10", "160Gi"),
}
"""KubeAI's chart defaults, approximately (its cloud-specific node selectors are left out)."""

ENGINE_IMAGES: Mapping[str, Mapping[str, str]] = {
    "VLLM": {
        "default": "vllm/vllm-openai:v0.6.3.post1",
        "cpu": "substratusai/vllm:v0.6.3.post1-cpu",
        "nvidia-gpu": "vllm/vllm-openai:v0.6.3.post1",
        "google-tpu": "substratusai/vllm:v0.6.3.post1-tpu",
    },
    "OLlama": {"default": "ollama/ollama:latest"},
    "FasterWhisper": {
        "default": "fedirz/faster-whisper-server:latest-cpu",
        "nvidia-gpu": "fedirz/faster-whisper-server:latest-cuda",
    },
    "Infinity": {"default": "michaelf34/infinity:latest"},
}
"""KubeAI's ``modelServers.<engine>.images``: the profile's ``imageName`` picks one, ``default`` otherwise."""


def engine_image(engine: str, image_name: str, configured: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The image KubeAI would run for ``engine`` on a profile with ``imageName: image_name``.

    ``configured`` (from :func:`images_from_config`) replaces the defaults of the engines it names.
    """
    images = (configured or {}).get(engine) or ENGINE_IMAGES[engine]
    return images.get(image_name) or images.get("default") or ENGINE_IMAGES[engine]["default"]


def _string_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object")
    return {str(key): str(item) for key, item in value.items()}


def _profile(name: str, raw: object) -> ResourceProfile:
    where = f"resourceProfiles.{name}"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object")
    tolerations = raw.get("tolerations") or []
    if not isinstance(tolerations, list) or not all(isinstance(item, Mapping) for item in tolerations):
        raise ValueError(f"{where}.tolerations: expected a list of objects")
    affinity = raw.get("affinity")
    if affinity is not None and not isinstance(affinity, Mapping):
        raise ValueError(f"{where}.affinity: expected an object")
    return ResourceProfile(
        image_name=str(raw.get("imageName") or ""),
        requests=_string_map(raw.get("requests"), f"{where}.requests"),
        limits=_string_map(raw.get("limits"), f"{where}.limits"),
        node_selector=_string_map(raw.get("nodeSelector"), f"{where}.nodeSelector"),
        affinity=dict(affinity) if affinity else None,
        tolerations=tuple(dict(item) for item in tolerations),
        runtime_class_name=str(raw.get("runtimeClassName") or ""),
        scheduler_name=str(raw.get("schedulerName") or ""),
    )


def profiles_from_config(config: object) -> dict[str, ResourceProfile]:
    """The ``resourceProfiles`` of a parsed KubeAI system config."""
    if not isinstance(config, Mapping):
        raise ValueError("the KubeAI config is not an object")
    raw = config.get("resourceProfiles")
    if not isinstance(raw, Mapping):
        raise ValueError("resourceProfiles: missing, or not an object")
    return {str(name): _profile(str(name), body) for name, body in raw.items()}


def images_from_config(config: object) -> dict[str, dict[str, str]]:
    """The ``modelServers.<engine>.images`` of a parsed KubeAI system config (empty when it has none)."""
    if not isinstance(config, Mapping):
        raise ValueError("the KubeAI config is not an object")
    servers = config.get("modelServers")
    if servers is None:
        return {}
    if not isinstance(servers, Mapping):
        raise ValueError("modelServers: expected an object")
    found: dict[str, dict[str, str]] = {}
    for engine, body in servers.items():
        images = body.get("images") if isinstance(body, Mapping) else None
        if images is None:
            continue
        found[str(engine)] = _string_map(images, f"modelServers.{engine}.images")
    return found


def scaled(quantities: Mapping[str, str], count: int) -> dict[str, str]:
    """Every quantity times ``count`` (a binary suffix stays binary).

    Raises:
        ValueError: A value is not a quantity.
    """
    result: dict[str, str] = {}
    for name, text in quantities.items():
        try:
            value = parse_quantity(text)
        except QuantityError as exc:
            raise ValueError(f"{name}: {exc}") from None
        fmt = QuantityFormat.BINARY_SI if "i" in str(text) else QuantityFormat.DECIMAL_SI
        result[name] = format_quantity(value * Decimal(count), fmt)
    return result
