"""In-place updates (``rolloutStrategy.updateMethod: InPlace``): eligibility, the pod patches, verification.

The rollout planner (:mod:`kthena_py.plan.modelserving.rollout.rollout`) chooses the units to move within the
``maxUnavailable`` budget, exactly as for a recreate; this module decides how: in place when only images differ,
else by recreating the unit with an ``InPlaceUpdateFallback`` Warning saying why.

Guarantees:

* :func:`ineligibility` is a pure comparison of the unit's source revision with the update revision. A unit is
  eligible only when nothing but the ``image`` of regular containers differs: same roles in the same order, same
  ``workerReplicas``, same container names in the same order, same init containers, same metadata, same
  ``schedulerName`` and plugins, the same effective ``imagePullPolicy`` (an unset policy defaults from the tag, as
  the API server does) and a pod ``restartPolicy`` of ``Always``. Otherwise it names the first difference found
  (deterministic: fields in sorted order).
* :func:`patch_unit` patches every live pod of the unit that is not already on the update revision: the images,
  the ``revision`` and ``role-template-hash`` labels and the state annotation
  (:mod:`kthena_py.plan.modelserving.core.inplace_state`) in one JSON merge patch guarded by the pod's UID. The images
  come from rendering the pod at the update revision (plugins included), so a patched pod is what a new one
  would be. The annotation is written in the same patch, so a pod is never patched twice for one revision, and
  a restarted manager resumes a half-patched unit by patching only the pods it had not reached.
* :func:`maintain` follows every patched pod: once it is Running and Ready on its new image (every container's
  status reports the spec image and is ready) it is marked ``Done``; a unit whose patched pods are not all
  verified ``progressDeadlineSeconds`` after its earliest patch has them marked ``Failed`` (a
  ``ProgressDeadlineExceeded`` Warning names them), which the recovery planner then handles by
  ``recoveryPolicy``; otherwise it asks for a requeue when the deadline comes. Nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kthena_py.api.common import to_dict
from kthena_py.api.modelserving import Role
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.groups import InstanceState, PodState
from kthena_py.plan.modelserving.core.inplace_state import (
    ANNOTATION_INPLACE_STATE,
    PHASE_FAILED,
    PHASE_PATCHED,
    InPlaceState,
    container_restarts,
    excused_restarts,
)
from kthena_py.plan.modelserving.core.plugins import plugin_applies
from kthena_py.plan.modelserving.core.revision import RevisionData, role_template_hash
from kthena_py.plan.modelserving.core.state import PlanningState
from kthena_py.plan.modelserving.core.types import KubeObject, PlannedEvent, Update
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.plan.modelserving.render.pods import RenderContext, build_pod
from kthena_py.vocab.conditions import REASON_DEADLINE
from kthena_py.vocab.pods import running_and_ready

__all__ = [
    "DEFAULT_PROGRESS_DEADLINE_SECONDS",
    "Maintenance",
    "in_place_enabled",
    "ineligibility",
    "maintain",
    "patch_unit",
    "progress_deadline",
    "verified",
]

DEFAULT_PROGRESS_DEADLINE_SECONDS = 1800
"""The API reference's runtime default of ``progressDeadlineSeconds``."""

_ROLLOUT_ONLY_FIELDS = ("replicas", "maxUnavailable", "maxSurge", "partition")


def in_place_enabled(state: PlanningState) -> bool:
    """Whether ``rolloutStrategy.updateMethod`` is ``InPlace``."""
    strategy = state.ms.spec.rollout_strategy
    return strategy is not None and strategy.update_method == "InPlace"


def progress_deadline(state: PlanningState) -> int:
    """``progressDeadlineSeconds``, defaulted."""
    strategy = state.ms.spec.rollout_strategy
    value = strategy.progress_deadline_seconds if strategy is not None else None
    return value if value is not None else DEFAULT_PROGRESS_DEADLINE_SECONDS


# --- eligibility --------------------------------------------------------------------------------------------------


def _pull_policy(container: Mapping[str, Any]) -> str:
    policy = container.get("imagePullPolicy")
    if isinstance(policy, str) and policy:
        return policy
    image = str(container.get("image") or "")
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    if a is None and isinstance(b, dict):
        a = {}
    if b is None and isinstance(a, dict):
        b = {}
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else path


def _containers(spec: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    items = spec.get(key)
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def _template_difference(where: str, old: Any, new: Any) -> str | None:
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    found = _first_difference(old.get("metadata") or {}, new.get("metadata") or {}, "metadata")
    if found is not None:
        return f"{where} {found} changed"
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if new_spec.get("restartPolicy", "Always") != "Always":
        return f"{where} restartPolicy is {new_spec.get('restartPolicy')}, not Always"
    old_containers, new_containers = _containers(old_spec, "containers"), _containers(new_spec, "containers")
    old_names = [c.get("name") for c in old_containers]
    new_names = [c.get("name") for c in new_containers]
    if old_names != new_names:
        return f"{where} container names changed ({', '.join(map(str, old_names))} -> {', '.join(map(str, new_names))})"
    for a, b in zip(old_containers, new_containers, strict=True):
        name = a.get("name")
        if _pull_policy(a) != _pull_policy(b):
            change = f"{_pull_policy(a)} -> {_pull_policy(b)}"
            return f"{where} container {name}: effective imagePullPolicy changed ({change})"
        rest_a = {k: v for k, v in a.items() if k != "image"}
        rest_b = {k: v for k, v in b.items() if k != "image"}
        found = _first_difference(rest_a, rest_b, "")
        if found is not None:
            return f"{where} container {name}: {found} changed"
    others_a = {k: v for k, v in old_spec.items() if k != "containers"}
    others_b = {k: v for k, v in new_spec.items() if k != "containers"}
    found = _first_difference(others_a, others_b, "spec")
    if found is not None:
        if found.startswith("spec.initContainers"):
            return f"{where} init containers changed ({found})"
        return f"{where} {found} changed"
    return None


def _role_difference(old: Role, new: Role) -> str | None:
    where = f"role {new.name}"
    shape_old = {k: v for k, v in to_dict(old).items() if k not in _ROLLOUT_ONLY_FIELDS}
    shape_new = {k: v for k, v in to_dict(new).items() if k not in _ROLLOUT_ONLY_FIELDS}
    if shape_old == shape_new:
        return None
    if old.worker_replicas != new.worker_replicas:
        return f"{where} workerReplicas changed ({old.worker_replicas} -> {new.worker_replicas})"
    if (old.worker_template is None) != (new.worker_template is None):
        return f"{where} workerTemplate added or removed"
    found = _template_difference(f"{where} entryTemplate", to_dict(old.entry_template), to_dict(new.entry_template))
    if found is None and old.worker_template is not None and new.worker_template is not None:
        found = _template_difference(
            f"{where} workerTemplate", to_dict(old.worker_template), to_dict(new.worker_template)
        )
    if found is not None:
        return found
    extra_old = {k: v for k, v in to_dict(old).items() if k not in _ROLLOUT_ONLY_FIELDS}
    extra_new = {k: v for k, v in to_dict(new).items() if k not in _ROLLOUT_ONLY_FIELDS}
    for key in ("entryTemplate", "workerTemplate", "workerReplicas"):
        extra_old.pop(key, None)
        extra_new.pop(key, None)
    found = _first_difference(extra_old, extra_new, "")
    return f"{where} {found} changed" if found is not None else None


def ineligibility(source: RevisionData | None, target: RevisionData, role: str | None = None) -> str | None:
    """Why a unit cannot be updated in place (``None``: it can).

    Args:
        source: The revision the unit is on (``None``: it cannot be resolved).
        target: The update revision.
        role: The role of a role instance (``RoleRollingUpdate``), or ``None`` for a whole ServingGroup.

    Returns:
        The first difference that is not a regular-container image, or ``None``.
    """
    if source is None:
        return "the revision it is on cannot be resolved (its ControllerRevision is missing)"
    if source.scheduler_name != target.scheduler_name:
        return f"schedulerName changed ({source.scheduler_name} -> {target.scheduler_name})"
    if source.model_cache != target.model_cache:
        was = source.model_cache.cache if source.model_cache is not None else "none"
        now = target.model_cache.cache if target.model_cache is not None else "none"
        return f"the ModelCache mount changed ({was} -> {now}): volumes cannot change in place"
    if role is None:
        old_plugins = [to_dict(p) for p in source.plugins]
        new_plugins = [to_dict(p) for p in target.plugins]
        if old_plugins != new_plugins:
            return "plugins changed"
        old_names = [r.name for r in source.roles]
        new_names = [r.name for r in target.roles]
        if old_names != new_names:
            return f"roles changed ({', '.join(old_names)} -> {', '.join(new_names)})"
        pairs = list(zip(source.roles, target.roles, strict=True))
    else:
        old_role, new_role = source.role(role), target.role(role)
        if old_role is None or new_role is None:
            return f"role {role} is new"

        def applying(data: RevisionData) -> list[dict[str, Any]]:
            return [to_dict(p) for p in data.plugins if plugin_applies(p, role, True) or plugin_applies(p, role, False)]

        if applying(source) != applying(target):
            return f"plugins applying to role {role} changed"
        pairs = [(old_role, new_role)]
    for old, new in pairs:
        found = _role_difference(old, new)
        if found is not None:
            return found
    return None


# --- patching -----------------------------------------------------------------------------------------------------


def _render_context(state: PlanningState) -> RenderContext:
    owners = tuple(o for o in (state.ms.metadata or {}).get("ownerReferences") or [] if isinstance(o, dict))
    return RenderContext(state.ref, state.revision, state.data, state.gang, owners)


def _on_target(pod: PodState, state: PlanningState, role_hash: str) -> bool:
    return pod.revision == state.revision and pod.role_hash == role_hash


def patch_unit(state: PlanningState, instances: Iterable[InstanceState], now: float) -> list[Update]:
    """Patch the live pods of a unit that are not yet on the update revision (see the module docstring).

    Args:
        state: The planning state (``raw_pods`` holds the cached pod objects).
        instances: The role instances of the unit (one, or every instance of a ServingGroup).
        now: The current time (epoch seconds), recorded as ``patchedAt``.

    Returns:
        One update per pod to patch.
    """
    ctx = _render_context(state)
    updates: list[Update] = []
    for inst in instances:
        role = state.data.role(inst.role)
        if role is None:
            continue
        role_hash = role_template_hash(state.data, role)
        for pod in inst.sorted_pods():
            raw = state.raw_pods.get(pod.name)
            if pod.terminating or raw is None or _on_target(pod, state, role_hash):
                continue
            rendered = build_pod(ctx, role, pod.group, pod.role_ordinal, pod.index, role_hash)
            images = {c.get("name"): c.get("image") for c in _containers(rendered.get("spec") or {}, "containers")}
            current = _containers(raw.get("spec") or {}, "containers")
            containers = [{**c, "image": images.get(c.get("name"), c.get("image"))} for c in current]
            restarts = container_restarts(raw.get("status"))
            record = InPlaceState(
                pod_uid=pod.uid,
                source_revision=pod.revision,
                target_revision=state.revision,
                phase=PHASE_PATCHED,
                patched_at=now,
                baseline_restarts=restarts,
                excused_before=excused_restarts(pod.inplace, restarts),
            )
            patch: KubeObject = {
                "metadata": {
                    "labels": {naming.LABEL_REVISION: state.revision, naming.LABEL_ROLE_TEMPLATE_HASH: role_hash},
                    "annotations": {ANNOTATION_INPLACE_STATE: record.to_json()},
                },
                "spec": {"containers": containers},
            }
            updates.append(Update("Pod", pod.name, pod.uid, patch, "in-place update"))
    return updates


# --- verification -------------------------------------------------------------------------------------------------


def _normalise(image: str) -> str:
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/"):
        if image.startswith(prefix):
            image = image[len(prefix) :]
            break
    if "/" not in image.split(":", 1)[0] and image.startswith("library/"):
        image = image[len("library/") :]
    return image


def verified(raw: KubeObject) -> bool:
    """Whether a pod runs, Ready, on the images of its spec (every regular container's status says so)."""
    status = raw.get("status") or {}
    if not running_and_ready(raw):
        return False
    by_name = {s.get("name"): s for s in status.get("containerStatuses") or [] if isinstance(s, dict)}
    for container in _containers(raw.get("spec") or {}, "containers"):
        seen = by_name.get(container.get("name"))
        if seen is None or seen.get("ready") is not True:
            return False
        image = seen.get("image")
        if not isinstance(image, str) or _normalise(image) != _normalise(str(container.get("image") or "")):
            return False
    return True


@dataclass
class Maintenance:
    """What following the patched pods decided."""

    updates: dict[str, Update] = field(default_factory=dict)
    """Annotation updates (``Done`` / ``Failed``) by pod name."""
    events: list[PlannedEvent] = field(default_factory=list)
    verifying: list[str] = field(default_factory=list)
    """Units patched in place and waiting to be Ready on their new images (with their deadline)."""
    exceeded: list[str] = field(default_factory=list)
    """Units that missed ``progressDeadlineSeconds`` and are being handled by ``recoveryPolicy``."""
    missed: list[str] = field(default_factory=list)
    """The units of ``exceeded`` marked failed by this pass (one ``ProgressDeadlineExceeded`` event each)."""
    requeue_after: float | None = None


def _state_patch(pod: PodState, record: InPlaceState, reason: str) -> Update:
    patch: KubeObject = {"metadata": {"annotations": {ANNOTATION_INPLACE_STATE: record.to_json()}}}
    return Update("Pod", pod.name, pod.uid, patch, reason)


def maintain(
    state: PlanningState, units: Sequence[tuple[str, Sequence[InstanceState]]], now: float | None
) -> Maintenance:
    """Follow the pods patched in place (see the module docstring).

    Args:
        state: The planning state.
        units: ``(unit name, its role instances)`` for every observed unit.
        now: The current time (epoch seconds); ``None`` to only verify (no deadline, no requeue).

    Returns:
        The decisions.
    """
    out = Maintenance()
    deadline_seconds = progress_deadline(state)
    policy = state.ms.spec.recovery_policy
    for unit, instances in units:
        pods = [p for inst in instances for p in inst.sorted_pods() if not p.terminating and p.inplace is not None]
        patched = [p for p in pods if p.inplace is not None and p.inplace.phase == PHASE_PATCHED]
        if any(p.inplace is not None and p.inplace.phase == PHASE_FAILED for p in pods):
            out.exceeded.append(f"{unit} (handled by recoveryPolicy {policy})")
        if not patched:
            continue
        unfinished: list[PodState] = []
        for pod in patched:
            raw = state.raw_pods.get(pod.name)
            record = pod.inplace
            assert record is not None
            if raw is not None and pod.revision == record.target_revision and verified(raw):
                restarts = container_restarts(raw.get("status"))
                out.updates[pod.name] = _state_patch(pod, record.done(restarts), "in-place update verified")
            else:
                unfinished.append(pod)
        if not unfinished:
            continue
        deadline = min(p.inplace.patched_at for p in patched if p.inplace is not None) + deadline_seconds
        target = unfinished[0].inplace.target_revision if unfinished[0].inplace is not None else state.revision
        if now is not None and now >= deadline:
            reason = (
                f"not Ready on revision {target} within progressDeadlineSeconds ({deadline_seconds}s) "
                "of its in-place update"
            )
            for pod in unfinished:
                assert pod.inplace is not None
                out.updates[pod.name] = _state_patch(pod, pod.inplace.failed(reason), "in-place update failed")
            names = ", ".join(p.name for p in unfinished)
            out.events.append(
                PlannedEvent(
                    "Warning",
                    REASON_DEADLINE,
                    f"{unit} did not become Ready on revision {target} within progressDeadlineSeconds "
                    f"({deadline_seconds}s) of its in-place update: {names}; handled by recoveryPolicy {policy}",
                )
            )
            out.exceeded.append(f"{unit} (handled by recoveryPolicy {policy})")
            out.missed.append(unit)
            continue
        problems = sorted({p.problem for p in unfinished if p.problem})
        detail = f"; {', '.join(problems)}" if problems else ""
        out.verifying.append(f"{unit} (deadline {format_time(deadline)}{detail})")
        if now is not None:
            left = max(1.0, deadline - now)
            out.requeue_after = left if out.requeue_after is None else min(out.requeue_after, left)
    return out
