"""A pure simulation of the three ModelServing reconcilers (gang, ServingGroups, rollout) over the shared in-memory
store (:class:`~.builders.Cluster`: plans applied by the simulation's applier, pod status by the status subresource).

Pods are created Pending; :meth:`Fleet.tick` makes them Running and Ready, except pods whose image contains
``bad``, which stay Pending with ``ImagePullBackOff`` (what kwok's stage does in the cluster tier). Deleted pods
disappear at once.

The ModelServing lives in the store too, as in :class:`~kthena_py.simulation.Simulation`: :attr:`Fleet.doc` is
a copy, edits go through :meth:`Fleet.edit` (and the helpers built on it), so the store raises
``metadata.generation`` when the spec changes, and each planner's status share is written by
:func:`~kthena_py.simulation.applier.apply_status` (server-side apply under the planner's field manager).

In-place updates are simulated like the kubelet (and the cluster tier's kwok stages) reflect them: a Running pod
whose spec image differs from its container status restarts that container on a tick (status image follows the
spec, ``restartCount`` + 1, Ready False) and becomes Ready on the next tick; with a ``bad`` image it reports
``ImagePullBackOff`` and stays not Ready. :attr:`Fleet.patches` counts the image patches per pod UID and revision.
These kubelet rules (a restart takes two ticks, ``bad`` images by name, ``lastState``) are the fleet's own, unlike
the one-tick :class:`~kthena_py.simulation.Kubelet`; they read copies and write only the pods' ``status``
subresource.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.revision import revision_data, role_template_hash
from kthena_py.plan.modelserving.core.types import Plan
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.groups.status import format_time
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups
from kthena_py.plan.modelserving.rollout.rollout import UPDATE_IN_PROGRESS, plan_rollout
from kthena_py.simulation.applier import MODELSERVINGS, apply_status
from kthena_py.simulation.driver import MANAGERS

from .builders import NOW, NS, VOLCANO, Cluster, parse, ref_of


def _running_ready(pod: dict[str, Any]) -> bool:
    status = pod["status"]
    return bool(status.get("phase") == "Running" and status["conditions"][0]["status"] == "True")


def pod_status(
    pod: dict[str, Any],
    now: float,
    *,
    ready: bool,
    restarts: dict[str, int] | None = None,
    waiting: str = "",
    phase: str = "Running",
    restarted: bool = False,
) -> dict[str, Any]:
    """A pod status reporting its spec images (what kwok and the kubelet report)."""
    statuses = []
    for c in pod["spec"]["containers"]:
        cs: dict[str, Any] = {
            "name": c["name"],
            "image": c["image"],
            "ready": ready,
            "restartCount": (restarts or {}).get(c["name"], 0),
            "state": {"waiting": {"reason": waiting}} if waiting else {"running": {"startedAt": format_time(now)}},
        }
        if restarted:
            cs["lastState"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
        statuses.append(cs)
    flag = "True" if ready else "False"
    return {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": flag, "lastTransitionTime": format_time(now)}],
        "containerStatuses": statuses,
    }


class Fleet:
    """A ModelServing document in its cluster's store, and the three planners."""

    def __init__(self, doc: dict[str, Any], cluster: Cluster | None = None, now: float = NOW) -> None:
        self.cluster = cluster if cluster is not None else Cluster(ready=False)
        self.now = now
        self.name = str(doc["metadata"]["name"])
        doc = copy.deepcopy(doc)
        doc["metadata"].setdefault("namespace", NS)
        self.cluster.store.put(MODELSERVINGS, doc)
        self.events: list[tuple[str, str, str]] = []
        self.min_available: int | None = None
        """The fewest ready groups observed after any step since the last :meth:`watch`."""
        self.patches: dict[tuple[str, str], int] = {}
        """Image patches applied, by (pod UID, target revision label)."""
        self.samples: list[dict[str, tuple[int, int]]] = []
        """After every step while :attr:`sampling`: per role, (target-version ready instances, replicas) of group 0."""
        self.sampling = False

    # --- the ModelServing ---------------------------------------------------------------------------------------

    @property
    def doc(self) -> dict[str, Any]:
        """The stored ModelServing (a copy: change it through :meth:`edit`)."""
        return self.cluster.store.get(MODELSERVINGS, self.name, NS)

    def spec(self) -> dict[str, Any]:
        """The stored spec (a copy)."""
        spec: dict[str, Any] = self.doc["spec"]
        return spec

    def edit(self, change: Callable[[dict[str, Any]], Any]) -> None:
        """A user's edit: ``change`` edits a copy of the document, which replaces the stored one (its ``status`` is
        left alone; the store raises ``metadata.generation`` when the spec changed)."""
        doc = self.doc
        change(doc)
        self.cluster.store.replace(MODELSERVINGS, doc, NS)

    def set_spec(self, path: str, value: Any) -> None:
        """Set ``spec.<path>`` (dotted; list items by index), as a user edit."""
        self.edit(lambda doc: _set(doc["spec"], path, value))

    def set_status(self, **fields: Any) -> None:
        """Overwrite status fields as another writer would (a merge patch of the ``status`` subresource)."""
        self.cluster.store.patch(MODELSERVINGS, self.name, {"status": fields}, NS, subresource="status")

    def apply_status(self, share: dict[str, Any] | None, planner: str = "rollout") -> bool:
        """Write one planner's status share as the controller does; returns whether the status changed."""
        if share is None:
            return False
        return apply_status(self.cluster.store, self.name, NS, share, field_manager=MANAGERS[planner])

    def _run(self, plan: Plan, planner: str = "rollout") -> bool:
        for update in plan.updates:
            if update.kind == "Pod" and "spec" in update.patch:
                revision = update.patch["metadata"]["labels"][naming.LABEL_REVISION]
                key = (update.uid, revision)
                self.patches[key] = self.patches.get(key, 0) + 1
        self.cluster.apply(plan, self.now)
        self.events.extend((e.type, e.reason, e.message) for e in plan.events)
        changed = bool(plan.creates or plan.deletes or plan.updates)
        if not (plan.creates or plan.deletes) and plan.status is not None:
            # like the applier: a reconcile that created or deleted leaves the status to the next one
            changed = self.apply_status(plan.status, planner) or changed
        self._observe()
        return changed

    def reconcile(self, *, rollout: bool = True) -> bool:
        """One pass of every reconciler; return whether anything changed."""
        ms = parse(self.doc)
        changed = self._run(plan_podgroups(ms, ref_of(ms), self.cluster.observed(), VOLCANO), "podgroups")
        ms = parse(self.doc)
        plan = plan_servinggroups(ms, ref_of(ms), self.cluster.observed(), VOLCANO, self.now)
        changed = self._run(plan, "servinggroups") or changed
        if rollout:
            ms = parse(self.doc)
            changed = self._run(plan_rollout(ms, ref_of(ms), self.cluster.observed(), VOLCANO, self.now)) or changed
        return changed

    def tick(self, only: set[str] | None = None) -> bool:
        """Pending pods with a good image become Running and Ready; bad ones report ImagePullBackOff.

        Running pods reflect an image patch (see the module docstring). ``only`` limits the tick to those pods.
        """
        changed = False
        for name, pod in self.cluster.pods().items():
            if only is not None and name not in only:
                continue
            changed = self._tick_pod(pod) or changed
        self._observe()
        return changed

    def _report(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        self.cluster.set_pod_status(pod["metadata"]["name"], status)

    def _tick_pod(self, pod: dict[str, Any]) -> bool:
        containers = pod["spec"]["containers"]
        bad = any("bad" in c["image"] for c in containers)
        status = pod["status"]
        if status.get("phase") != "Running":
            if bad:
                self._report(pod, pod_status(pod, self.now, ready=False, waiting="ImagePullBackOff", phase="Pending"))
                return False
            self._report(pod, pod_status(pod, self.now, ready=True))
            return True
        seen = {c["name"]: c for c in status.get("containerStatuses") or []}
        for c in containers:  # a status without images (built by hand) follows the spec silently
            seen.setdefault(c["name"], {"name": c["name"], "restartCount": 0}).setdefault("image", c["image"])
        drift = [c["name"] for c in containers if seen[c["name"]].get("image") != c["image"]]
        restarts = {n: int(cs.get("restartCount") or 0) for n, cs in seen.items()}
        if drift:
            if bad:
                self._report(pod, pod_status(pod, self.now, ready=False, waiting="ImagePullBackOff", restarts=restarts))
            else:
                bumped = {n: r + (1 if n in drift else 0) for n, r in restarts.items()}
                self._report(pod, pod_status(pod, self.now, ready=False, restarts=bumped, restarted=True))
            return True
        if not _running_ready(pod) and not bad and any("lastState" in cs for cs in seen.values()):
            self._report(pod, pod_status(pod, self.now, ready=True, restarts=restarts, restarted=True))
            return True
        return False

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
        if self.sampling:
            self.samples.append(self.target_ready())

    def target_ready(self, group: int = 0) -> dict[str, tuple[int, int]]:
        """Per role of ``group``: (instances complete, ready and on the update revision's template, replicas)."""
        ms = parse(self.doc)
        data = revision_data(ms.spec)
        out: dict[str, tuple[int, int]] = {}
        pods = self.group_pods().get(group, [])
        for role in ms.spec.template.roles:
            want = role_template_hash(data, role)
            count = 0
            for r in range(role.replicas):
                inst = [p for p in pods if p["metadata"]["labels"][naming.LABEL_ROLE_ID] == f"{role.name}-{r}"]
                if len(inst) == role.worker_replicas + 1 and all(
                    _running_ready(p)
                    and p["metadata"]["labels"][naming.LABEL_ROLE_TEMPLATE_HASH] == want
                    and not p["metadata"].get("deletionTimestamp")
                    and all(
                        cs.get("image") == c["image"]
                        for cs, c in zip(p["status"]["containerStatuses"], p["spec"]["containers"], strict=False)
                    )
                    for p in inst
                ):
                    count += 1
            out[role.name] = (count, role.replicas)
        return out

    # --- reading the cluster ------------------------------------------------------------------------------------

    def group_pods(self) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = {}
        for pod in self.cluster.pods().values():
            parsed = naming.parse_group_name(self.name, pod["metadata"]["labels"][naming.LABEL_GROUP_NAME])
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

    def edit_role(self, role: int, path: str, value: Any) -> None:
        """Set ``entryTemplate.<path>`` (dotted) of one role, as a user edit (generation + 1)."""
        self.set_spec(f"template.roles.{role}.entryTemplate.{path}", value)

    def set_image(self, image: str, role: int | None = None) -> None:
        def change(doc: dict[str, Any]) -> None:
            for i, r in enumerate(doc["spec"]["template"]["roles"]):
                if role is None or i == role:
                    r["entryTemplate"]["spec"]["containers"][0]["image"] = image
                    if "workerTemplate" in r:
                        r["workerTemplate"]["spec"]["containers"][0]["image"] = image

        self.edit(change)

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def stamp(self) -> str:
        return format_time(self.now)


def _set(node: Any, path: str, value: Any) -> None:
    """Set the dotted ``path`` under ``node`` (list items by index; missing mappings are created)."""
    *parents, last = path.split(".")
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
