"""The activator's directory: every name a request's ``model`` may carry, and where it goes.

Guarantees:

* Model names (:func:`~.targets.models_of`) route to their ModelServing (:class:`~.targets.Target`). When two
  ModelServings answer to one model name, the first by (namespace, name) wins, and the clash is reported in
  ``problems`` (the directory never routes one name to two targets).
* Kthena's router names (:mod:`.routes`, given when its CRDs are served) are added after: a ModelRoute's
  ``modelName`` routes to its ModelServing on the ModelServer's port, unless an annotation or a ModelServing name
  already claims it (then it is reported in ``problems``).
* A member of a ModelPool (:mod:`.pools`) gets its pool (:attr:`~.targets.Target.pool`), its pool's swap budget as
  hold budget, and is never woken by the activator (``scale_from_zero`` false); an opt-in of a member (annotation or
  policy) is reported as ignored.
* Adapter names (:mod:`.adapters`) come last: the adapter's own name, then ``<model>_<adapter>`` for each model
  name (router names included, on the route's port) of its ModelServing. A name already claimed by a model name or
  an earlier adapter route (ModelServings in (namespace, name) order) stays with it, and the clash is reported.
  :meth:`Directory.resolve` answers model names only, so a request for a plain model never pays for adapters.
* :meth:`Directory.model_cards` (``GET /v1/models``) lists every name a request may carry, each once, sorted: model
  names (ModelPool members included, resident or not) with ``parent`` null, and adapter names (the adapter's own and
  ``<model>_<adapter>``) with ``parent`` the base model name and ``root`` the adapter, as vLLM lists LoRA
  adapters; ``owned_by`` is the ModelServing (``namespace/name``), and a pool member's names carry ``modelpool``
  (``namespace/name`` of its pool).
* Pure: no I/O, no clock; inputs are not changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kthena_py.plan.activator.adapters import adapter_requirement, kubeai_name
from kthena_py.plan.activator.pools import pool_members
from kthena_py.plan.activator.routes import RouteTarget
from kthena_py.plan.activator.targets import (
    Target,
    hold_budget_of,
    models_of,
    opted_in,
    port_of,
    replicas_of,
)
from kthena_py.plan.adapters.desired import Adapter, adapters_of

__all__ = ["AdapterRoute", "Directory", "build_directory"]


@dataclass(frozen=True)
class AdapterRoute:
    """A name that reaches a LoRA adapter of a ModelServing."""

    target: Target
    adapter: str
    digest: str
    """The digest of the source the ModelServing asks for: the value the pod label must have."""
    rewrite: bool
    """Whether the body's ``model`` is set to :attr:`adapter` before forwarding (KubeAI's ``<model>_<adapter>``)."""
    parent: str = ""
    """The base model name it is listed under (``GET /v1/models``): ``<model>`` of ``<model>_<adapter>``, and for
    the adapter's own name the first model name of its ModelServing."""

    @property
    def requirement(self) -> tuple[str, str]:
        """The pod label (key, value) a backend must carry."""
        return adapter_requirement(self.adapter, self.digest)


@dataclass(frozen=True)
class Directory:
    """Model and adapter names to targets, and what could not be read."""

    by_model: Mapping[str, Target]
    problems: tuple[str, ...] = field(default=())
    by_adapter: Mapping[str, AdapterRoute] = field(default_factory=dict)

    def resolve(self, model: str) -> Target | None:
        """The target serving the model name ``model``, or ``None``."""
        return self.by_model.get(model)

    def resolve_adapter(self, name: str) -> AdapterRoute | None:
        """The adapter route of ``name``, or ``None``."""
        return self.by_adapter.get(name)

    def models(self) -> list[str]:
        """Every known model name, sorted (adapter names are not models)."""
        return sorted(self.by_model)

    def model_cards(self) -> list[dict[str, Any]]:
        """The ``data`` of ``GET /v1/models``: every model and adapter name, sorted by name (see the docstring)."""
        cards: list[dict[str, Any]] = []
        for model, target in self.by_model.items():
            card: dict[str, Any] = {"id": model, "object": "model", "created": 0, "owned_by": target.key}
            card["root"], card["parent"] = model, None
            if target.pool is not None:
                card["modelpool"] = target.pool.key
            cards.append(card)
        for name, route in self.by_adapter.items():
            card = {"id": name, "object": "model", "created": 0, "owned_by": route.target.key}
            card["root"], card["parent"] = route.adapter, route.parent
            if route.target.pool is not None:
                card["modelpool"] = route.target.pool.key
            cards.append(card)
        return sorted(cards, key=lambda c: str(c["id"]))


def _md(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(_md(obj).get("namespace") or ""), str(_md(obj).get("name") or "")


def build_directory(
    modelservings: Iterable[Mapping[str, Any]],
    policies: Iterable[Mapping[str, Any]],
    default_budget: float,
    routes: Iterable[RouteTarget] = (),
    pools: Iterable[Mapping[str, Any]] = (),
) -> Directory:
    """Every name the ModelServings, router routes and adapters answer to (see the module docstring)."""
    policy_list = list(policies)
    members, pool_problems = pool_members(pools)
    by_model: dict[str, Target] = {}
    problems: list[str] = list(pool_problems)
    bases: list[tuple[Target, tuple[Adapter, ...]]] = []
    for ms in sorted(modelservings, key=_key):
        namespace, name = _key(ms)
        if not name or _md(ms).get("deletionTimestamp"):
            continue
        pool = members.get(f"{namespace}/{name}")
        scale_from_zero = opted_in(ms, policy_list)
        if pool is not None:
            budget = pool.swap_budget
            if scale_from_zero:
                problems.append(
                    f"{namespace}/{name}: a member of ModelPool {pool.key}; its scale-from-zero opt-in is ignored "
                    "(the pool controller scales it)"
                )
            scale_from_zero = False
        else:
            budget, problem = hold_budget_of(ms, default_budget)
            if problem:
                problems.append(problem)
        target = Target(
            namespace=namespace,
            name=name,
            models=models_of(ms),
            port=port_of(ms),
            scale_from_zero=scale_from_zero,
            hold_budget=budget,
            replicas=replicas_of(ms),
            pool=pool,
        )
        bases.append((target, adapters_of(ms)))
        for model in target.models:
            winner = by_model.get(model)
            if winner is not None:
                problems.append(f"model {model!r}: served by {winner.key}; {target.key} also claims it")
                continue
            by_model[model] = target
    by_key = {t.key: t for t in by_model.values()}
    for route in routes:
        base = by_key.get(f"{route.namespace}/{route.modelserving}")
        if base is None:
            continue
        claimed = by_model.get(route.model)
        if claimed is not None:
            if claimed.key != base.key:
                problems.append(f"ModelRoute model {route.model!r}: already served by {claimed.key}")
            continue
        port = route.port if route.port is not None else base.port
        by_model[route.model] = replace(base, models=(*base.models, route.model), port=port)
    by_adapter = _adapter_routes(bases, by_model, problems)
    return Directory(by_model, tuple(problems), by_adapter)


def _adapter_routes(
    bases: list[tuple[Target, tuple[Adapter, ...]]], by_model: Mapping[str, Target], problems: list[str]
) -> dict[str, AdapterRoute]:
    # Each model name of a ModelServing (router names on the router's port) gives `<model>_<adapter>`.
    named: dict[str, list[tuple[str, Target]]] = {}
    for model, target in by_model.items():
        named.setdefault(target.key, []).append((model, target))
    found: dict[str, AdapterRoute] = {}
    for base, adapters in bases:
        names = named.get(base.key, [])
        first = names[0][0] if names else (base.models[0] if base.models else base.name)
        for adapter in adapters:
            candidates = [(adapter.name, base, False, first)]
            candidates += [(kubeai_name(model, adapter.name), target, True, model) for model, target in names]
            for name, target, rewrite, parent in candidates:
                if name in by_model:
                    problems.append(
                        f"adapter {adapter.name!r} of {base.key}: {name!r} is a model name of {by_model[name].key}, "
                        "which keeps it"
                    )
                elif name in found:
                    problems.append(
                        f"adapter {adapter.name!r} of {base.key}: {name!r} already routes to {found[name].target.key}"
                    )
                else:
                    found[name] = AdapterRoute(target, adapter.name, adapter.digest, rewrite, parent)
    return found
