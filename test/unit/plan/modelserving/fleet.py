"""The three ModelServing reconcilers over an in-memory cluster, for planner tests.

A thin layer over :class:`kthena_py.plan.modelserving.simulate.Simulation`: pods are created Pending;
:meth:`Fleet.tick` makes them Running and Ready, except pods whose image contains ``bad``, which stay Pending with
``ImagePullBackOff`` (what kwok's stage does in the cluster tier). Deleted pods disappear at once. Status shares
are merged like server-side apply does (owned keys replaced, conditions by type). Availability is counted here
from the pods alone, independently of the planners' own readiness rules.
"""

from __future__ import annotations

from typing import Any

from kthena_py.plan.modelserving import naming
from kthena_py.plan.modelserving.simulate import Readiness, Simulation
from kthena_py.plan.modelserving.status import format_time

from .builders import NOW, VOLCANO, parse


class Fleet(Simulation):
    """A ModelServing document, its cluster, and the three planners."""

    def __init__(self, doc: dict[str, Any]) -> None:
        super().__init__(doc, support=VOLCANO, readiness=Readiness(bad_image="bad"), now=NOW)
        self.min_available: int | None = None
        """The fewest ready groups observed after any plan or tick since the last :meth:`watch`."""

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.doc["spec"]
        return spec

    def tick(self) -> tuple[str, ...]:
        made = super().tick()
        self.after_apply()
        return made

    def watch(self) -> None:
        self.min_available = self.ready_groups()

    def after_apply(self) -> None:
        super().after_apply()
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
