"""Built-in ModelServing plugins (``spec.plugins``): pure mutations of a pod before it is created.

Guarantees:

* A plugin only edits the pod dict it is given (a fresh object the planner owns); it never does I/O.
* Plugins run in ``spec.plugins`` order, each only on the pods its scope selects: ``scope.roles`` is a role
  whitelist (absent or empty: every role), ``scope.target`` is ``Entry``, ``Worker`` or ``All`` (absent: All).
* Every configuration problem (unknown plugin name, unsupported type, malformed config) raises
  :class:`PluginError` with a message naming the plugin; :func:`validate_plugins` finds them without a pod.
* Plugins see the pod with the controller's labels and environment variables already set, so a variable a
  plugin appends may refer to ``$(GROUP_SIZE)``, ``$(ENTRY_ADDRESS)`` or ``$(WORKER_INDEX)``. The pod planner
  re-asserts controller-owned labels and those variables (in place) after the plugins, so a plugin cannot
  break the labelling contract (see :mod:`kthena_py.plan.modelserving.render.pods`).

Built-ins: ``demo-pod-tweaks`` (alias ``pod-tweaks``), ``host-network-ports`` and ``lws-standard-labels``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kthena_py.api.modelserving import PluginSpec
from kthena_py.plan.modelserving.core.types import KubeObject
from kthena_py.vocab.labels import LWS_GROUP_INDEX, LWS_GROUP_KEY, LWS_NAME, LWS_WORKER_INDEX

__all__ = [
    "DEFAULT_PORT_ENV",
    "KNOWN_PLUGINS",
    "PluginContext",
    "PluginError",
    "apply_plugins",
    "host_port",
    "plugin_applies",
    "set_env",
    "validate_plugin",
    "validate_plugins",
]

DEFAULT_PORT_ENV = "KTHENA_HTTP_PORT"


class PluginError(ValueError):
    """A plugin is unknown or its configuration is invalid (the message names the plugin)."""


@dataclass(frozen=True)
class PluginContext:
    """Where the pod being created sits in the ModelServing."""

    ms_name: str
    namespace: str
    group_name: str
    group_ordinal: int
    role: str
    role_id: str
    index: int
    """0 for the entry pod, ``1..workerReplicas`` for workers."""
    owner_references: tuple[Mapping[str, Any], ...] = ()
    """The ModelServing's own ownerReferences (``lws-standard-labels`` looks for a LeaderWorkerSet)."""

    @property
    def is_entry(self) -> bool:
        """Whether the pod is its role instance's entry pod."""
        return self.index == 0


def set_env(container: KubeObject, name: str, value: str) -> None:
    """Set ``name=value`` in a container's env, replacing any variable of that name, appended at the end."""
    env = [item for item in container.get("env") or [] if not (isinstance(item, dict) and item.get("name") == name)]
    env.append({"name": name, "value": value})
    container["env"] = env


def _all_containers(pod: KubeObject) -> list[KubeObject]:
    spec = pod.setdefault("spec", {})
    found: list[KubeObject] = []
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if isinstance(items, list):
            found.extend(item for item in items if isinstance(item, dict))
    return found


def _config_object(plugin: str, config: Any, allowed: frozenset[str]) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise PluginError(f"plugin {plugin}: config must be an object, not {type(config).__name__}")
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise PluginError(f"plugin {plugin}: unknown config field(s) {unknown}; allowed: {sorted(allowed)}")
    return config


def _string_map(plugin: str, key: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise PluginError(f"plugin {plugin}: config.{key} must be a map of strings to strings")
    return value


def _int_field(plugin: str, config: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PluginError(f"plugin {plugin}: config.{key} must be an integer in [{low}, {high}], got {value!r}")
    return value


# --- demo-pod-tweaks -------------------------------------------------------------------------------------------

_TWEAK_FIELDS = frozenset({"runtimeClassName", "annotations", "labels", "env", "nodeSelector"})


def _tweak_env(plugin: str, value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PluginError(f"plugin {plugin}: config.env must be a list of EnvVar objects")
    for index, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise PluginError(f"plugin {plugin}: config.env[{index}] must be an EnvVar object with a non-empty name")
        if "value" in item and not isinstance(item["value"], str):
            raise PluginError(f"plugin {plugin}: config.env[{index}].value must be a string")
    return value


def _check_tweaks(plugin: str, config: Any) -> dict[str, Any]:
    conf = _config_object(plugin, config, _TWEAK_FIELDS)
    runtime_class = conf.get("runtimeClassName")
    if runtime_class is not None and (not isinstance(runtime_class, str) or not runtime_class):
        raise PluginError(f"plugin {plugin}: config.runtimeClassName must be a non-empty string")
    for key in ("annotations", "labels", "nodeSelector"):
        _string_map(plugin, key, conf.get(key))
    _tweak_env(plugin, conf.get("env"))
    return conf


def _apply_tweaks(plugin: str, pod: KubeObject, config: Any, ctx: PluginContext) -> None:
    conf = _check_tweaks(plugin, config)
    metadata = pod.setdefault("metadata", {})
    spec = pod.setdefault("spec", {})
    if conf.get("runtimeClassName"):
        spec["runtimeClassName"] = conf["runtimeClassName"]
    for key in ("annotations", "labels"):
        values = _string_map(plugin, key, conf.get(key))
        if values:
            metadata[key] = {**(metadata.get(key) or {}), **values}
    selector = _string_map(plugin, "nodeSelector", conf.get("nodeSelector"))
    if selector:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **selector}
    extra = _tweak_env(plugin, conf.get("env"))
    for container in _all_containers(pod):
        names = {item["name"] for item in extra}
        env = [e for e in container.get("env") or [] if not (isinstance(e, dict) and e.get("name") in names)]
        container["env"] = env + [dict(item) for item in extra]


# --- host-network-ports ----------------------------------------------------------------------------------------

_PORT_FIELDS = frozenset({"startPort", "endPort", "envName", "declarePort", "portName"})


def _check_ports(plugin: str, config: Any) -> tuple[int, int, str, bool, str]:
    conf = _config_object(plugin, config, _PORT_FIELDS)
    start = _int_field(plugin, conf, "startPort", 30000, 1, 65535)
    end = _int_field(plugin, conf, "endPort", 32767, 1, 65535)
    if end < start:
        raise PluginError(f"plugin {plugin}: config.endPort ({end}) must not be below config.startPort ({start})")
    env_name = conf.get("envName", DEFAULT_PORT_ENV)
    if not isinstance(env_name, str) or not env_name:
        raise PluginError(f"plugin {plugin}: config.envName must be a non-empty string")
    declare = conf.get("declarePort", True)
    if not isinstance(declare, bool):
        raise PluginError(f"plugin {plugin}: config.declarePort must be a boolean")
    port_name = conf.get("portName", "kthena-http")
    if not isinstance(port_name, str) or not 0 < len(port_name) <= 15:
        raise PluginError(f"plugin {plugin}: config.portName must be a string of 1 to 15 characters")
    return start, end, env_name, declare, port_name


def host_port(namespace: str, pod: str, start: int, end: int) -> int:
    """Return the deterministic port of a pod in ``[start, end]`` (a hash of ``<namespace>/<pod>``)."""
    digest = hashlib.sha256(f"{namespace}/{pod}".encode()).digest()
    return start + int.from_bytes(digest[:8], "big") % (end - start + 1)


def _apply_ports(plugin: str, pod: KubeObject, config: Any, ctx: PluginContext) -> None:
    start, end, env_name, declare, port_name = _check_ports(plugin, config)
    name = str(pod.get("metadata", {}).get("name", ""))
    port = host_port(ctx.namespace, name, start, end)
    spec = pod.setdefault("spec", {})
    spec["hostNetwork"] = True
    spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    containers = _all_containers(pod)
    for container in containers:
        set_env(container, env_name, str(port))
    regular = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    if declare and regular:
        # A declared hostPort makes the scheduler keep two pods with the same port off one node.
        ports = [p for p in regular[0].get("ports") or [] if isinstance(p, dict)]
        if not any(p.get("containerPort") == port for p in ports):
            ports.append({"name": port_name, "containerPort": port, "hostPort": port, "protocol": "TCP"})
        regular[0]["ports"] = ports


# --- lws-standard-labels ---------------------------------------------------------------------------------------


def _check_lws(plugin: str, config: Any) -> None:
    _config_object(plugin, config, frozenset())


def _apply_lws(plugin: str, pod: KubeObject, config: Any, ctx: PluginContext) -> None:
    _check_lws(plugin, config)
    owner = next((ref for ref in ctx.owner_references if ref.get("kind") == "LeaderWorkerSet"), None)
    if owner is None:
        return
    lws = str(owner.get("name", ""))
    labels = pod.setdefault("metadata", {}).setdefault("labels", {})
    labels[LWS_NAME] = lws
    labels[LWS_GROUP_INDEX] = str(ctx.group_ordinal)
    labels[LWS_WORKER_INDEX] = str(ctx.index)
    labels[LWS_GROUP_KEY] = hashlib.sha1(f"{lws}-{ctx.group_ordinal}".encode(), usedforsecurity=False).hexdigest()


# --- registry --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Builtin:
    check: Callable[[str, Any], object]
    apply: Callable[[str, KubeObject, Any, PluginContext], None]


_REGISTRY: dict[str, _Builtin] = {
    "demo-pod-tweaks": _Builtin(_check_tweaks, _apply_tweaks),
    "pod-tweaks": _Builtin(_check_tweaks, _apply_tweaks),
    "host-network-ports": _Builtin(_check_ports, _apply_ports),
    "lws-standard-labels": _Builtin(_check_lws, _apply_lws),
}

KNOWN_PLUGINS: frozenset[str] = frozenset(_REGISTRY)
"""Names of the built-in plugins; any other ``spec.plugins[].name`` is an error."""


def _lookup(plugin: PluginSpec) -> _Builtin:
    if plugin.type != "BuiltIn":
        raise PluginError(f"plugin {plugin.name} has unsupported type {plugin.type}")
    builtin = _REGISTRY.get(plugin.name)
    if builtin is None:
        raise PluginError(f"plugin {plugin.name} not registered; known plugins: {sorted(KNOWN_PLUGINS)}")
    return builtin


def validate_plugin(plugin: PluginSpec) -> None:
    """Check that a plugin is known and its config is well formed.

    Args:
        plugin: One ``spec.plugins`` entry.

    Raises:
        PluginError: Describing the first problem found.
    """
    _lookup(plugin).check(plugin.name, plugin.config)


def validate_plugins(plugins: Sequence[PluginSpec] | None) -> None:
    """Validate every plugin in order (see :func:`validate_plugin`).

    Raises:
        PluginError: For the first invalid plugin.
    """
    for plugin in plugins or ():
        validate_plugin(plugin)


def plugin_applies(plugin: PluginSpec, role: str, is_entry: bool) -> bool:
    """Return whether a plugin's scope selects a pod of ``role`` (entry or worker)."""
    scope = plugin.scope
    if scope is None:
        return True
    if scope.roles and role not in scope.roles:
        return False
    target = scope.target or "All"
    return target == "All" or (target == "Entry") == is_entry


def apply_plugins(pod: KubeObject, plugins: Sequence[PluginSpec] | None, ctx: PluginContext) -> None:
    """Run the plugins that select this pod, in order, mutating ``pod``.

    Args:
        pod: The pod being planned (owned by the caller; mutated in place).
        plugins: ``spec.plugins`` of the revision the pod is rendered from.
        ctx: Where the pod sits.

    Raises:
        PluginError: For an unknown plugin or an invalid config.
    """
    for plugin in plugins or ():
        builtin = _lookup(plugin)
        if plugin_applies(plugin, ctx.role, ctx.is_entry):
            builtin.apply(plugin.name, pod, plugin.config, ctx)
