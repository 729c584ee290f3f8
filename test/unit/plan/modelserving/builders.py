"""Test helpers: ModelServing documents, pod status edits, and the shared in-memory store with plans applied to it."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from kthena_py.api.modelserving import ModelServing
from kthena_py.kube.memory import MemoryStore
from kthena_py.kube.resources import PODS
from kthena_py.plan.modelserving.core.types import KubeObject, MSRef, Observed, Plan, PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups
from kthena_py.simulation.applier import KINDS, apply_plan, observed

NOW = 1_700_000_000.0
MS_UID = "ms-uid-1"
VOLCANO = PodGroupSupport(crd_served=True, sub_group_policy=True)
VOLCANO_OLD = PodGroupSupport(crd_served=True, sub_group_policy=False)
NO_VOLCANO = PodGroupSupport()


def container(name: str = "main", image: str = "img:1", requests: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": name, "image": image}
    if requests:
        doc["resources"] = {"requests": requests}
    return doc


def role_doc(
    name: str,
    replicas: int = 1,
    workers: int = 0,
    image: str = "img:1",
    requests: dict[str, Any] | None = None,
    worker_requests: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    worker_template: bool | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"spec": {"containers": [container(image=image, requests=requests)]}}
    if labels:
        entry["metadata"] = {"labels": labels}
    doc: dict[str, Any] = {"name": name, "replicas": replicas, "workerReplicas": workers, "entryTemplate": entry}
    if workers > 0 or worker_template:
        doc["workerTemplate"] = {"spec": {"containers": [container(image=image, requests=worker_requests)]}}
    return doc


def ms_doc(
    *roles: dict[str, Any],
    name: str = "llama",
    replicas: int = 1,
    scheduler: str | None = None,
    policy: str | None = None,
    grace: int | None = None,
    plugins: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    gang: dict[str, int] | None = None,
    topology: dict[str, Any] | None = None,
    generation: int = 1,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    template: dict[str, Any] = {"roles": list(roles) or [role_doc("prefill")]}
    if grace is not None:
        template["restartGracePeriodSeconds"] = grace
    if gang is not None:
        template["gangPolicy"] = {"minRoleReplicas": gang}
    if topology is not None:
        template["networkTopology"] = topology
    spec: dict[str, Any] = {"replicas": replicas, "template": template}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if policy is not None:
        spec["recoveryPolicy"] = policy
    if plugins is not None:
        spec["plugins"] = plugins
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "uid": MS_UID, "generation": generation}
    if annotations:
        metadata["annotations"] = annotations
    doc: dict[str, Any] = {"metadata": metadata, "spec": spec}
    if status is not None:
        doc["status"] = status
    return doc


def parse(doc: dict[str, Any]) -> ModelServing:
    return ModelServing.model_validate(doc)


def ref_of(ms: ModelServing) -> MSRef:
    return MSRef(ms.name, ms.namespace, ms.uid, ms.generation)


def ready_status(now: float, restarts: int = 0) -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": format_time(now)}],
        "containerStatuses": [{"name": "main", "restartCount": restarts}],
    }


NS = "ns"


class Cluster:
    """The objects of one ModelServing's namespace in the shared in-memory store, plans applied as the controller
    applies them (:func:`kthena_py.simulation.applier.apply_plan`); reads are copies, edits go through the store."""

    def __init__(self, ready: bool = True) -> None:
        numbers = itertools.count(1)
        self.now = NOW
        self.store = MemoryStore(clock=lambda: format_time(self.now), uids=lambda: f"uid-{next(numbers)}")
        self.ready = ready
        """Whether created pods come up Running and Ready."""

    def observed(self) -> Observed:
        return observed(self.store, NS)

    def objects(self, kind: str) -> dict[str, KubeObject]:
        """The objects of one kind (``Pod``, ``Service``, ``PodGroup``, ``ControllerRevision``) by name (copies)."""
        return {obj["metadata"]["name"]: obj for obj in self.store.objects(KINDS[kind], NS)}

    def all_uids(self) -> set[tuple[str, str, str]]:
        return {(kind, name, obj["metadata"]["uid"]) for kind in KINDS for name, obj in self.objects(kind).items()}

    def pods(self) -> dict[str, KubeObject]:
        return self.objects("Pod")

    def put(self, kind: str, obj: KubeObject) -> None:
        """Store ``obj`` as given (a seed, or a test's edit of a read copy)."""
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("namespace", NS)
        self.store.put(KINDS[kind], obj)

    def drop(self, kind: str, name: str) -> None:
        """Delete an object at once (as if someone deleted it)."""
        self.store.delete(KINDS[kind], name, NS, grace_period_seconds=0)

    def apply(self, plan: Plan, now: float = NOW, graceful: bool = False) -> None:
        """Apply a plan: creations get fresh UIDs (pods Running+Ready), deletions need the observed UID."""
        self.now = now
        for obj in apply_plan(self.store, plan, NS, field_manager="test", graceful=graceful):
            if obj["kind"] == "Pod":
                self.set_pod_status(obj["metadata"]["name"], ready_status(now) if self.ready else {"phase": "Pending"})

    def finish_terminating(self) -> None:
        for kind in KINDS:
            for name, obj in self.objects(kind).items():
                if obj["metadata"].get("deletionTimestamp"):
                    self.drop(kind, name)

    def reconcile(self, ms: ModelServing, support: PodGroupSupport = VOLCANO, now: float = NOW) -> tuple[Plan, Plan]:
        """One controller pass: PodGroups, then ServingGroups (each applied before the next)."""
        ref = ref_of(ms)
        pg_plan = plan_podgroups(ms, ref, self.observed(), support)
        self.apply(pg_plan, now)
        sg_plan = plan_servinggroups(ms, ref, self.observed(), support, now)
        self.apply(sg_plan, now)
        return pg_plan, sg_plan

    def converge(self, ms: ModelServing, support: PodGroupSupport = VOLCANO, now: float = NOW, rounds: int = 8) -> int:
        """Reconcile until a pass changes nothing; return the number of passes that changed something."""
        for attempt in range(rounds):
            pg_plan, sg_plan = self.reconcile(ms, support, now)
            if is_noop(pg_plan) and is_noop(sg_plan):
                return attempt
        raise AssertionError("did not converge")

    # --- pod edits ---------------------------------------------------------------------------------------------

    def set_pod_status(self, name: str, status: dict[str, Any]) -> None:
        """Report ``status`` for the pod (the status subresource, as the kubelet writes it)."""
        pod = self.store.get(PODS, name, NS)
        self.store.replace(PODS, {**pod, "status": status}, NS, subresource="status")

    def set_status(self, name: str, **fields: Any) -> None:
        self.set_pod_status(name, {**self.pods()[name]["status"], **fields})

    def fail(self, name: str, since: float) -> None:
        self.set_pod_status(
            name,
            {
                "phase": "Failed",
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": format_time(since)}],
            },
        )

    def restart(self, name: str, since: float, ready: bool = False, count: int = 1) -> None:
        status = ready_status(since, restarts=count)
        status["conditions"][0]["status"] = "True" if ready else "False"
        self.set_pod_status(name, status)

    def not_ready(self, name: str, since: float) -> None:
        status = ready_status(since)
        status["conditions"][0]["status"] = "False"
        self.set_pod_status(name, status)

    def terminate(self, name: str, now: float = NOW) -> None:
        """The pod starts terminating (a graceful delete at ``now``)."""
        self.now = now
        self.store.delete(PODS, name, NS, grace_period_seconds=30)

    def remove(self, name: str) -> None:
        self.drop("Pod", name)

    def set_cost(self, name: str, cost: str) -> None:
        self.store.patch(
            PODS, name, {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": cost}}}, NS
        )


def is_noop(plan: Plan) -> bool:
    return not plan.creates and not plan.deletes and not plan.updates


def names(objects: Any, kind: str | None = None) -> list[str]:
    return [o["metadata"]["name"] for o in objects if kind is None or o["kind"] == kind]


def pod_names(ms: str, group: int, role: str, ordinal: int, workers: int) -> list[str]:
    return [f"{ms}-{group}-{role}-{ordinal}-{i}" for i in range(workers + 1)]


def deleted(plan: Plan, kind: str = "Pod") -> list[str]:
    return sorted(d.name for d in plan.deletes if d.kind == kind)


def created(plan: Plan, kind: str = "Pod") -> list[str]:
    return [o["metadata"]["name"] for o in plan.creates if o["kind"] == kind]
