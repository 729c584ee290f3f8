"""A container's environment, resolved like the kubelet does (pure: the caller fetches Secrets and ConfigMaps).

Order and precedence follow the kubelet: ``envFrom`` sources first (in order, each key optionally prefixed), then
``env`` entries, a later definition replacing an earlier one. ``$(NAME)`` in a literal ``value`` expands to a
variable defined before it (``$$`` escapes a ``$``; an unknown reference stays as written), and the same expansion
applies to ``command`` and ``args`` (:func:`expand`).

Supported sources: literal ``value``; ``valueFrom.fieldRef`` (``metadata.name``, ``metadata.namespace``,
``metadata.uid``, ``metadata.labels['k']``, ``metadata.annotations['k']``, ``spec.nodeName``,
``spec.serviceAccountName``, ``status.podIP``, ``status.podIPs``, ``status.hostIP``, ``status.hostIPs``);
``valueFrom.secretKeyRef`` / ``configMapKeyRef``; ``envFrom`` ``secretRef`` / ``configMapRef``. A missing
non-optional Secret, ConfigMap or key, or an unsupported source (``resourceFieldRef``), raises
:class:`ContainerConfigError`, which the kubelet reports as ``CreateContainerConfigError``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ContainerConfigError", "EnvSources", "env_sources", "expand", "resolve_env"]

Data = Mapping[str, Mapping[str, str]]
"""Objects by name: a Secret's decoded ``data`` (plus ``stringData``) or a ConfigMap's ``data``."""


class ContainerConfigError(Exception):
    """The container's environment cannot be built (the kubelet's ``CreateContainerConfigError``)."""


@dataclass(frozen=True)
class EnvSources:
    """The Secrets and ConfigMaps a container's environment reads.

    Attributes:
        secrets: Secret names.
        config_maps: ConfigMap names.
    """

    secrets: frozenset[str]
    config_maps: frozenset[str]


def env_sources(container: Mapping[str, Any]) -> EnvSources:
    """List the Secrets and ConfigMaps a container's ``env`` and ``envFrom`` refer to.

    Args:
        container: The container spec.

    Returns:
        The names to fetch before :func:`resolve_env`.
    """
    secrets: set[str] = set()
    config_maps: set[str] = set()
    for source in container.get("envFrom") or []:
        if "secretRef" in source:
            secrets.add(str(source["secretRef"].get("name", "")))
        if "configMapRef" in source:
            config_maps.add(str(source["configMapRef"].get("name", "")))
    for var in container.get("env") or []:
        value_from = var.get("valueFrom") or {}
        if "secretKeyRef" in value_from:
            secrets.add(str(value_from["secretKeyRef"].get("name", "")))
        if "configMapKeyRef" in value_from:
            config_maps.add(str(value_from["configMapKeyRef"].get("name", "")))
    return EnvSources(frozenset(secrets), frozenset(config_maps))


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Expand ``$(NAME)`` references as the kubelet does.

    Args:
        value: The string (an env value, a command or an argument).
        env: The variables defined so far.

    Returns:
        ``value`` with each known ``$(NAME)`` replaced, ``$$`` turned into ``$``, unknown references kept.
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _REFERENCE.sub(replace, value)


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


def field_value(pod: Mapping[str, Any], path: str, *, pod_ip: str, host_ip: str) -> str:
    """The value of a ``fieldRef`` on a pod.

    Args:
        pod: The pod.
        path: The ``fieldPath``.
        pod_ip: The pod's IP (the kubelet knows it before it is written to the status).
        host_ip: The node's IP.

    Returns:
        The value.

    Raises:
        ContainerConfigError: The field is not supported.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return str(simple[path] or "")
    match = _SUBSCRIPT.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise ContainerConfigError(f"unsupported fieldRef {path!r}")


def _lookup(kind: str, ref: Mapping[str, Any], objects: Data) -> str | None:
    name = str(ref.get("name", ""))
    key = str(ref.get("key", ""))
    optional = bool(ref.get("optional", False))
    if name not in objects:
        if optional:
            return None
        raise ContainerConfigError(f'{kind} "{name}" not found')
    if key not in objects[name]:
        if optional:
            return None
        raise ContainerConfigError(f"couldn't find key {key} in {kind} {name}")
    return objects[name][key]


def resolve_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    pod_ip: str,
    host_ip: str,
    secrets: Data,
    config_maps: Data,
) -> dict[str, str]:
    """Build a container's environment.

    Args:
        pod: The pod.
        container: One of its containers (or init containers).
        pod_ip: The pod's IP.
        host_ip: The node's IP.
        secrets: The Secrets named by :func:`env_sources` that exist, decoded.
        config_maps: The ConfigMaps named by :func:`env_sources` that exist.

    Returns:
        The variables, in definition order.

    Raises:
        ContainerConfigError: A non-optional source is missing or a source is unsupported.
    """
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for kind, key, objects in (("secret", "secretRef", secrets), ("configmap", "configMapRef", config_maps)):
            if key not in source:
                continue
            ref = source[key] or {}
            name = str(ref.get("name", ""))
            if name not in objects:
                if ref.get("optional", False):
                    continue
                raise ContainerConfigError(f'{kind} "{name}" not found')
            for var, value in objects[name].items():
                env[prefix + var] = value
    for var in container.get("env") or []:
        name = str(var["name"])
        if "valueFrom" not in var:
            env[name] = expand(str(var.get("value") or ""), env)
            continue
        value_from = var["valueFrom"] or {}
        resolved: str | None
        if "fieldRef" in value_from:
            resolved = field_value(
                pod, str(value_from["fieldRef"].get("fieldPath", "")), pod_ip=pod_ip, host_ip=host_ip
            )
        elif "secretKeyRef" in value_from:
            resolved = _lookup("secret", value_from["secretKeyRef"], secrets)
        elif "configMapKeyRef" in value_from:
            resolved = _lookup("configmap", value_from["configMapKeyRef"], config_maps)
        else:
            raise ContainerConfigError(f"env {name}: unsupported valueFrom {sorted(value_from)}")
        if resolved is not None:
            env[name] = resolved
    return env
