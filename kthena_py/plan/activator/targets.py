"""Which ModelServing serves a model, on which port, and whether and how long the activator may hold for it.

Guarantees:

* A ModelServing answers to the comma-separated names of its ``activator.kthena-py.io/model`` annotation
  (blanks dropped), or to its own name when the annotation is missing or empty.
* Its port is the ``activator.kthena-py.io/port`` annotation when that is a port number (1-65535), else the first
  ``containerPort`` of its entry template (the first role's entry template), else :data:`DEFAULT_PORT`.
* It is opted in to scale from zero when its ``activator.kthena-py.io/scale-from-zero`` annotation is ``"true"``
  (any case), or when an AutoscalingPolicy in its namespace whose homogeneous or heterogeneous target names it
  (``targetRef``, kind empty or ``ModelServing``) allows ``minReplicas: 0`` for it. kthena_py's AutoscalingPolicy
  names its target directly (no separate binding object).
* Its hold budget is its ``activator.kthena-py.io/hold-budget`` annotation (a Go duration above zero), else the
  default given; an unreadable annotation falls back to the default and is reported in ``problems``.
* A member of a ModelPool (:mod:`.pools`) is held up to its pool's ``swapBudget`` and is never scaled by the
  activator (the pool controller is the only writer of its replicas): :attr:`Target.holds` is true for it even
  when it has not opted in, and :attr:`Target.scale_from_zero` is false.
* Which name routes where (clashes, router names, adapters) is :mod:`.directory`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.api.autoscaling import target_ref_kind, target_ref_name
from kthena_py.api.duration import DurationError, parse_duration
from kthena_py.plan.activator.pools import PoolRef
from kthena_py.vocab.labels import (
    ACTIVATOR_HOLD_BUDGET,
    ACTIVATOR_MODEL,
    ACTIVATOR_PORT,
    ACTIVATOR_SCALE_FROM_ZERO,
)

__all__ = [
    "DEFAULT_PORT",
    "Target",
    "hold_budget_of",
    "models_of",
    "opted_in",
    "parse_hold_budget",
    "port_of",
    "replicas_of",
]

DEFAULT_PORT = 8000
_MODEL_SERVING_KIND = "ModelServing"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _annotations(ms: Mapping[str, Any]) -> Mapping[str, Any]:
    return _dict(_dict(ms.get("metadata")).get("annotations"))


def _name(obj: Mapping[str, Any]) -> str:
    return str(_dict(obj.get("metadata")).get("name") or "")


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(_dict(obj.get("metadata")).get("namespace") or "")


@dataclass(frozen=True)
class Target:
    """A ModelServing as the activator routes to it."""

    namespace: str
    name: str
    models: tuple[str, ...]
    port: int
    scale_from_zero: bool
    hold_budget: float
    """Seconds a request may be held for it."""
    replicas: int
    """``spec.replicas`` as last seen."""
    pool: PoolRef | None = None
    """The ModelPool it is a member of: held up to the pool's swap budget, never scaled by the activator."""

    @property
    def holds(self) -> bool:
        """Whether a request may wait for a Ready backend (opted in to scale from zero, or a pool member)."""
        return self.scale_from_zero or self.pool is not None

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


def models_of(ms: Mapping[str, Any]) -> tuple[str, ...]:
    """The model names ``ms`` answers to (see the module docstring)."""
    raw = _annotations(ms).get(ACTIVATOR_MODEL)
    names = tuple(dict.fromkeys(n.strip() for n in str(raw or "").split(",") if n.strip()))
    return names or ((_name(ms),) if _name(ms) else ())


def _entry_ports(ms: Mapping[str, Any]) -> list[Any]:
    template = _dict(_dict(ms.get("spec")).get("template"))
    for role in _list(template.get("roles")):
        entry = _dict(_dict(role).get("entryTemplate"))
        for container in _list(_dict(entry.get("spec")).get("containers")):
            ports = _list(_dict(container).get("ports"))
            if ports:
                return ports
    return []


def port_of(ms: Mapping[str, Any]) -> int:
    """The entry pods' serving port (see the module docstring)."""
    raw = _annotations(ms).get(ACTIVATOR_PORT)
    if raw is not None and str(raw).strip().isdigit() and 0 < int(str(raw).strip()) < 65536:
        return int(str(raw).strip())
    for port in _entry_ports(ms):
        number = _dict(port).get("containerPort")
        if isinstance(number, int) and 0 < number < 65536:
            return number
    return DEFAULT_PORT


def parse_hold_budget(text: str) -> float:
    """A hold budget in seconds from a Go duration (``"120s"``, ``"2m"``, ``"1.5m"``).

    Raises:
        ValueError: Not a duration, or not above zero.
    """
    try:
        nanos = parse_duration(text.strip())
    except DurationError as exc:
        raise ValueError(f"not a duration: {text!r}") from exc
    if nanos <= 0:
        raise ValueError(f"a hold budget must be above zero: {text!r}")
    return nanos / 1e9


def hold_budget_of(ms: Mapping[str, Any], default: float) -> tuple[float, str | None]:
    """The hold budget of ``ms`` in seconds, and a problem to report when its annotation cannot be read."""
    raw = _annotations(ms).get(ACTIVATOR_HOLD_BUDGET)
    if raw is None:
        return default, None
    try:
        return parse_hold_budget(str(raw)), None
    except ValueError as exc:
        return default, f"{_namespace(ms)}/{_name(ms)}: {ACTIVATOR_HOLD_BUDGET}: {exc}; using {default:g}s"


def _policy_min_zero(policy: Mapping[str, Any], ms_name: str) -> bool:
    spec = _dict(policy.get("spec"))
    candidates: list[tuple[Mapping[str, Any], Any]] = []
    homogeneous = _dict(spec.get("homogeneousTarget"))
    if homogeneous:
        candidates.append((_dict(_dict(homogeneous.get("target")).get("targetRef")), homogeneous.get("minReplicas")))
    for param in _list(_dict(spec.get("heterogeneousTarget")).get("params")):
        param = _dict(param)
        candidates.append((_dict(_dict(param.get("target")).get("targetRef")), param.get("minReplicas")))
    for ref, minimum in candidates:
        kind = target_ref_kind(dict(ref))
        if kind in ("", _MODEL_SERVING_KIND) and target_ref_name(dict(ref)) == ms_name and minimum == 0:
            return True
    return False


def opted_in(ms: Mapping[str, Any], policies: Iterable[Mapping[str, Any]]) -> bool:
    """Whether ``ms`` may be woken from zero (see the module docstring); ``policies`` may span namespaces."""
    if str(_annotations(ms).get(ACTIVATOR_SCALE_FROM_ZERO, "")).strip().lower() == "true":
        return True
    namespace, name = _namespace(ms), _name(ms)
    return any(_namespace(p) == namespace and _policy_min_zero(p, name) for p in policies)


def replicas_of(ms: Mapping[str, Any]) -> int:
    """``spec.replicas`` of ``ms`` (1, the API default, when missing or not an integer)."""
    value = _dict(ms.get("spec")).get("replicas", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1
