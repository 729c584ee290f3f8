"""Objects of a P/D ModelServing as a client reads them, for the ``kthena-py status`` builder and CLI tests.

Pods carry the labels and names the controller gives them (revision label, role template hash), ControllerRevisions
record old specs, and the ModelServing's status is written by hand (the conditions each case needs).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kthena_py.api.modelserving import ModelServing
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.revision import (
    build_controller_revision,
    revision_data,
    role_template_hash,
    spec_revision_hash,
)
from kthena_py.plan.modelserving.core.types import MSRef
from kthena_py.plan.modelserving.eviction.tracker import TrackerEntry, group_key, render_entries, tracker_name
from kthena_py.vocab.times import format_time

NOW = 1_800_000_000.0
NS = "team"
NAME = "llama"
UID = "ms-uid"


def stamp(ago: float) -> str:
    """The RFC 3339 time ``ago`` seconds before :data:`NOW`."""
    return format_time(NOW - ago)


def _role(name: str, workers: int, image: str, requests: dict[str, Any] | None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "engine", "image": image}
    if requests:
        c["resources"] = {"requests": dict(requests), "limits": dict(requests)}
    doc: dict[str, Any] = {
        "name": name,
        "replicas": 1,
        "workerReplicas": workers,
        "entryTemplate": {"spec": {"containers": [c]}},
    }
    if workers:
        doc["workerTemplate"] = {"spec": {"containers": [copy.deepcopy(c)]}}
    return doc


def pd_doc(
    *,
    replicas: int = 1,
    image: str = "vllm:0.9",
    partition: int | None = None,
    requests: dict[str, Any] | None = None,
    queue: str | None = None,
    min_available: int | None = None,
) -> dict[str, Any]:
    """A ModelServing with a prefill role (entry only) and a decode role (entry + 1 worker), under Volcano."""
    strategy: dict[str, Any] = {"type": "ServingGroupRollingUpdate"}
    if partition is not None:
        strategy["rollingUpdateConfiguration"] = {"maxUnavailable": 1, "partition": partition}
    if min_available is not None:
        strategy["evictionStrategy"] = {"protectionLevel": "ServingGroup", "minAvailable": min_available}
    metadata: dict[str, Any] = {
        "name": NAME,
        "namespace": NS,
        "uid": UID,
        "generation": 1,
        "creationTimestamp": stamp(7200),
    }
    if queue:
        metadata["annotations"] = {naming.ANNOTATION_QUEUE: queue}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "schedulerName": "volcano",
            "rolloutStrategy": strategy,
            "template": {
                "roles": [_role("prefill", 0, image, requests), _role("decode", 1, image, requests)],
            },
        },
    }


def revision_of(doc: dict[str, Any]) -> str:
    return spec_revision_hash(ModelServing.model_validate(doc).spec)


def condition(kind: str, status: str, reason: str, message: str = "", ago: float = 60) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp(ago),
        "observedGeneration": 1,
    }


def running(ago: float = 3600, ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp(ago)}],
        "containerStatuses": [
            {
                "name": "engine",
                "ready": ready,
                "restartCount": restarts,
                "state": {"running": {"startedAt": stamp(ago)}},
            }
        ],
    }


def unscheduled(message: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if message is not None:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": stamp(120),
            }
        ]
    return status


def waiting(reason: str, message: str = "", *, phase: str = "Pending", restarts: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = {"reason": reason}
    if message:
        state["message"] = message
    return {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": stamp(300)}],
        "containerStatuses": [
            {"name": "engine", "ready": False, "restartCount": restarts, "state": {"waiting": state}}
        ],
    }


@dataclass
class World:
    """One ModelServing and what a client lists with it."""

    doc: dict[str, Any]
    pods: list[dict[str, Any]] = field(default_factory=list)
    services: list[dict[str, Any]] = field(default_factory=list)
    podgroups: list[dict[str, Any]] = field(default_factory=list)
    revisions: list[dict[str, Any]] = field(default_factory=list)
    tracker: dict[str, Any] | None = None

    def set_status(self, **fields: Any) -> None:
        status: dict[str, Any] = {"observedGeneration": 1}
        status.update(fields)
        self.doc["status"] = status

    def record(self, spec_doc: dict[str, Any]) -> str:
        """Add the ControllerRevision of ``spec_doc``'s spec; return its revision."""
        ms = ModelServing.model_validate(spec_doc)
        revision = spec_revision_hash(ms.spec)
        ref = MSRef(NAME, NS, UID, 1)
        self.revisions.append(build_controller_revision(ref, revision_data(ms.spec), revision, self.revisions))
        return revision

    def group(
        self,
        ordinal: int,
        spec_doc: dict[str, Any],
        statuses: dict[str, dict[str, Any]] | None = None,
        *,
        ago: float = 3600,
        terminating: frozenset[str] = frozenset(),
    ) -> None:
        """Add every pod of ServingGroup ``ordinal`` rendered from ``spec_doc`` (Running and Ready unless given)."""
        ms = ModelServing.model_validate(spec_doc)
        data = revision_data(ms.spec)
        revision = spec_revision_hash(ms.spec)
        group = naming.group_name(NAME, ordinal)
        for role in ms.spec.template.roles:
            if role.worker_template is not None:
                self.services.append(
                    {
                        "metadata": {
                            "name": naming.service_name(NAME, ordinal, role.name, 0),
                            "namespace": NS,
                            "uid": f"svc-{ordinal}-{role.name}",
                            "labels": {
                                naming.LABEL_NAME: NAME,
                                naming.LABEL_GROUP_NAME: group,
                                naming.LABEL_ROLE: role.name,
                                naming.LABEL_ROLE_ID: naming.role_id(role.name, 0),
                            },
                        }
                    }
                )
            template = role.entry_template
            for index in range(role.worker_replicas + 1):
                name = naming.pod_name(NAME, ordinal, role.name, 0, index)
                if index:
                    assert role.worker_template is not None
                    template = role.worker_template
                status = copy.deepcopy((statuses or {}).get(name) or running(ago))
                spec = copy.deepcopy(template.spec or {})
                if status.get("phase") != "Pending" or "containerStatuses" in status:
                    spec["nodeName"] = f"gpu-node-{(ordinal * 3 + index + (role.name == 'decode')) % 4}"
                metadata: dict[str, Any] = {
                    "name": name,
                    "namespace": NS,
                    "uid": f"uid-{name}-{revision}",
                    "creationTimestamp": stamp(ago),
                    "labels": {
                        naming.LABEL_NAME: NAME,
                        naming.LABEL_GROUP_NAME: group,
                        naming.LABEL_ROLE: role.name,
                        naming.LABEL_ROLE_ID: naming.role_id(role.name, 0),
                        naming.LABEL_REVISION: revision,
                        naming.LABEL_ROLE_TEMPLATE_HASH: role_template_hash(data, role),
                    },
                    "ownerReferences": [naming.owner_reference(MSRef(NAME, NS, UID, 1))],
                }
                if name in terminating:
                    metadata["deletionTimestamp"] = stamp(10)
                self.pods.append({"metadata": metadata, "spec": spec, "status": status})

    def podgroup(self, ordinal: int, phase: str, unschedulable: str = "", queue: str = "default") -> None:
        status: dict[str, Any] = {"phase": phase}
        if unschedulable:
            status["conditions"] = [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "reason": "NotEnoughResources",
                    "message": unschedulable,
                    "lastTransitionTime": stamp(100),
                }
            ]
        self.podgroups.append(
            {
                "apiVersion": naming.PODGROUP_API_VERSION,
                "kind": naming.PODGROUP_KIND,
                "metadata": {
                    "name": naming.podgroup_name(NAME, ordinal),
                    "namespace": NS,
                    "labels": {naming.LABEL_NAME: NAME, naming.LABEL_GROUP_NAME: naming.group_name(NAME, ordinal)},
                },
                "spec": {"minMember": 3, "queue": queue},
                "status": status,
            }
        )

    def evicted(self, group: int, pod: str, left: float) -> None:
        """Record a granted eviction of ``pod`` in ServingGroup ``group``, counting for ``left`` more seconds."""
        entry = TrackerEntry(NOW + left, self.uid_of(pod), pod)
        key = group_key(NS, NAME, naming.group_name(NAME, group))
        self.tracker = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": tracker_name(NAME), "namespace": NS},
            "data": {"entries": render_entries({key: entry})},
        }

    def uid_of(self, name: str) -> str:
        return str(next(p for p in self.pods if p["metadata"]["name"] == name)["metadata"]["uid"])
