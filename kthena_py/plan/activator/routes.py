"""Model names from Kthena's router objects: ModelRoute ``modelName`` -> ModelServer -> ModelServing.

Guarantees:

* Used only when the ``networking.serving.volcano.sh`` CRDs are served (else no routes are given and nothing
  changes), so the activator answers to the names Kthena's router answers to.
* A ModelRoute's ``modelName`` maps to the first ``targetModels`` entry (rules in order; entries by weight, highest
  first, then in order) whose ModelServer, in the same namespace, selects (``workloadSelector.matchLabels``, the
  entry label left aside) the entry template labels of exactly one ModelServing of that namespace, the first by
  name when several match. The ModelServer's ``workloadPort.port`` is the port.
* A route whose servers resolve to no ModelServing is skipped; nothing here raises on malformed objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kthena_py.vocab.labels import SERVING_ENTRY

__all__ = ["RouteTarget", "route_targets"]


@dataclass(frozen=True)
class RouteTarget:
    """A router model name and the ModelServing (and port) serving it."""

    model: str
    namespace: str
    modelserving: str
    port: int | None


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _md(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _dict(obj.get("metadata"))


def _entry_labels(ms: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    roles = _list(_dict(_dict(ms.get("spec")).get("template")).get("roles"))
    return [_dict(_md(_dict(_dict(role).get("entryTemplate")))).get("labels") or {} for role in roles]


def _selected(ms: Mapping[str, Any], match: Mapping[str, Any]) -> bool:
    wanted = {k: v for k, v in match.items() if k != SERVING_ENTRY}
    if not wanted:
        return False
    return any(all(_dict(labels).get(k) == v for k, v in wanted.items()) for labels in _entry_labels(ms))


def _server_target(server: Mapping[str, Any], modelservings: list[Mapping[str, Any]]) -> tuple[str, int | None] | None:
    spec = _dict(server.get("spec"))
    match = _dict(_dict(spec.get("workloadSelector")).get("matchLabels"))
    found = sorted(str(_md(ms).get("name")) for ms in modelservings if _selected(ms, match))
    if not found:
        return None
    port = _dict(spec.get("workloadPort")).get("port")
    return found[0], port if isinstance(port, int) and 0 < port < 65536 else None


def route_targets(
    routes: Iterable[Mapping[str, Any]],
    servers: Iterable[Mapping[str, Any]],
    modelservings: Iterable[Mapping[str, Any]],
) -> list[RouteTarget]:
    """Every ModelRoute model name that resolves to a ModelServing, by (namespace, route name)."""
    by_ns: dict[str, list[Mapping[str, Any]]] = {}
    for ms in modelservings:
        by_ns.setdefault(str(_md(ms).get("namespace") or ""), []).append(ms)
    server_by_key = {(str(_md(s).get("namespace") or ""), str(_md(s).get("name") or "")): s for s in servers}
    found: list[RouteTarget] = []
    for route in sorted(routes, key=lambda r: (str(_md(r).get("namespace") or ""), str(_md(r).get("name") or ""))):
        namespace = str(_md(route).get("namespace") or "")
        model = _dict(route.get("spec")).get("modelName")
        if not isinstance(model, str) or not model:
            continue
        candidates: list[tuple[int, int, str]] = []
        for rule in _list(_dict(route.get("spec")).get("rules")):
            for target in _list(_dict(rule).get("targetModels")):
                weight = _dict(target).get("weight", 100)
                name = _dict(target).get("modelServerName")
                if isinstance(name, str):
                    candidates.append((-(weight if isinstance(weight, int) else 100), len(candidates), name))
        for _, _, server_name in sorted(candidates):
            server = server_by_key.get((namespace, server_name))
            resolved = _server_target(server, by_ns.get(namespace, [])) if server is not None else None
            if resolved is not None:
                found.append(RouteTarget(model, namespace, resolved[0], resolved[1]))
                break
    return found
