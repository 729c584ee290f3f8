"""A pure simulation of the three ModelServing reconcilers (gang, ServingGroups, rollout) over an in-memory cluster.

Pods are created Pending; :meth:`Fleet.tick` makes them Running and Ready, except pods whose image contains
``bad``, which stay Pending with ``ImagePullBackOff`` (what kwok's stage does in the cluster tier). Deleted pods
disappear at once. Status shares are merged like server-side apply does (owned keys replaced, conditions by type).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kthena_py.plan.modelserving import naming
from kthena_py.plan.modelserving.podgroups import plan_podgroups
from kthena_py.plan.modelserving.rollout import UPDATE_IN_PROGRESS, plan_rollout
from kthena_py.plan.modelserving.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.status import format_time
from kthena_py.plan.modelserving.types import Plan

from .builders import NOW, VOLCANO, Cluster, parse, ready_status, ref_of


def _running_ready(pod: dict[str, Any]) -> bool:
    status = pod["status"]
    return bool(status.get("phase") == "Running" and status["conditions"][0]["status"] == "True")


def merge_status(doc: dict[str, Any], share: dict[str, Any] | None) -> None:
    """Merge one reconciler's status share into ``doc`` (conditions by type)."""
    if share is None:
        return
    status = doc.setdefault("status", {})
    for key, value in share.items():
        if key != "conditions":
            status[key] = copy.deepcopy(value)
            continue
        by_type = {c["type"]: c for c in status.get("conditions") or []}
        for condition in value:
            by_type[condition["type"]] = copy.deepcopy(condition)
        status["conditions"] = list(by_type.values())


@dataclass
class Fleet:
    """A ModelServing document, its cluster, and the three planners."""

    doc: dict[str, Any]
    cluster: Cluster = field(default_factory=lambda: Cluster(ready=False))
    now: float = NOW
    events: list[tuple[str, str, str]] = field(default_factory=list)
    min_available: int | None = None
    """The fewest ready groups observed after any step since the last :meth:`watch`."""

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.doc["spec"]
        return spec

    def _run(self, plan: Plan) -> bool:
        self.cluster.apply(plan, self.now)
        self.events.extend((e.type, e.reason, e.message) for e in plan.events)
        changed = bool(plan.creates or plan.deletes or plan.updates)
        if not changed and plan.status is not None:
            before = copy.deepcopy(self.doc.get("status"))
            merge_status(self.doc, plan.status)
            changed = before != self.doc.get("status")
        self._observe()
        return changed

    def reconcile(self, *, rollout: bool = True) -> bool:
        """One pass of every reconciler; return whether anything changed."""
        ms = parse(self.doc)
        changed = self._run(plan_podgroups(ms, ref_of(ms), self.cluster.observed(), VOLCANO))
        ms = parse(self.doc)
        changed = self._run(plan_servinggroups(ms, ref_of(ms), self.cluster.observed(), VOLCANO, self.now)) or changed
        if rollout:
            ms = parse(self.doc)
            changed = self._run(plan_rollout(ms, ref_of(ms), self.cluster.observed(), VOLCANO, self.now)) or changed
        return changed

    def tick(self) -> bool:
        """Pending pods with a good image become Running and Ready; bad ones report ImagePullBackOff."""
        changed = False
        for pod in self.cluster.pods().values():
            if pod["status"].get("phase") == "Running":
                continue
            images = [c["image"] for c in pod["spec"]["containers"]]
            if any("bad" in image for image in images):
                waiting = {"waiting": {"reason": "ImagePullBackOff"}}
                pod["status"] = {
                    "phase": "Pending",
                    "containerStatuses": [{"name": "main", "restartCount": 0, "state": waiting}],
                }
                continue
            pod["status"] = ready_status(self.now)
            changed = True
        self._observe()
        return changed

    def settle(self, rounds: int = 200) -> int:
        """Alternate reconciles and ticks until nothing changes; return the rounds used."""
        for n in range(rounds):
            reconciled = self.reconcile()
            ticked = self.tick()
            if not reconciled and not ticked:
                return n
        raise AssertionError("did not settle")

    def watch(self) -> None:
        self.min_available = self.ready_groups()

    def _observe(self) -> None:
        if self.min_available is not None:
            self.min_available = min(self.min_available, self.ready_groups())

    # --- reading the cluster ------------------------------------------------------------------------------------

    def group_pods(self) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = {}
        for pod in self.cluster.pods().values():
            parsed = naming.parse_group_name(
                self.doc["metadata"]["name"], pod["metadata"]["labels"][naming.LABEL_GROUP_NAME]
            )
            assert parsed is not None
            out.setdefault(parsed, []).append(pod)
        return out

    def ready_groups(self) -> int:
        ms = parse(self.doc)
        total = 0
        for pods in self.group_pods().values():
            roles = {r.name: r for r in ms.spec.template.roles}
            ready = all(
                p["status"].get("phase") == "Running" and p["status"]["conditions"][0]["status"] == "True" for p in pods
            )
            expected = sum(r.replicas * (1 + r.worker_replicas) for r in roles.values())
            if ready and len(pods) >= expected:
                total += 1
        return total

    def images(self) -> dict[str, str]:
        return {name: pod["spec"]["containers"][0]["image"] for name, pod in sorted(self.cluster.pods().items())}

    def uids(self) -> dict[str, str]:
        return {name: pod["metadata"]["uid"] for name, pod in self.cluster.pods().items()}

    def condition(self, type_: str = UPDATE_IN_PROGRESS) -> dict[str, Any] | None:
        for c in (self.doc.get("status") or {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return None

    def set_image(self, image: str, role: int | None = None) -> None:
        roles = self.spec()["template"]["roles"]
        for i, r in enumerate(roles):
            if role is None or i == role:
                r["entryTemplate"]["spec"]["containers"][0]["image"] = image
                if "workerTemplate" in r:
                    r["workerTemplate"]["spec"]["containers"][0]["image"] = image
        self.doc["metadata"]["generation"] = self.doc["metadata"].get("generation", 1) + 1

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def stamp(self) -> str:
        return format_time(self.now)
