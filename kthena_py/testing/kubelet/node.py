"""A Node that a mini-kubelet serves, and objects tests create beside it (pure manifests, plus the pod IP pool).

:class:`ManualNode` builds a Node kwok never touches (no ``kwok.x-k8s.io/node`` annotation): Ready, address
127.0.0.1, capacity and allocatable like a :class:`~kthena_py.testing.controlplane.FakeNode`. By default it carries
the taint :data:`MINI_KUBELET_TAINT` so that the cluster tier's other pods (which mostly cannot run as local
processes) never land on it; pods meant for it tolerate the taint and select the node (:meth:`ManualNode.placement`).

:class:`PodIPPool` hands out pod IPs from 127.100.250.0/24 (kwok uses the low end of 127.100.0.0/16), shared by
every mini-kubelet of a process, each address at most once at a time. :func:`hostpath_volume` builds a hostPath
PersistentVolume pre-bound to a claim (``claimRef``), so a claim binds without a provisioner.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kthena_py.vocab import conditions, labels

__all__ = [
    "DEFAULT_POD_IP_RANGE",
    "MINI_KUBELET_LABEL",
    "MINI_KUBELET_TAINT",
    "NODE_IP",
    "ManualNode",
    "PodIPPool",
    "hostpath_volume",
]

DEFAULT_POD_IP_RANGE = "127.100.250.0/24"
NODE_IP = "127.0.0.1"
MINI_KUBELET_LABEL = labels.MINI_KUBELET
"""Label on every manual node (value: the node name)."""
MINI_KUBELET_TAINT: Mapping[str, str] = {"key": MINI_KUBELET_LABEL, "value": "true", "effect": "NoSchedule"}
"""Default taint of a manual node: only pods that tolerate it land there."""


@dataclass(frozen=True)
class ManualNode:
    """A Node served by a :class:`~kthena_py.testing.kubelet.MiniKubelet` rather than by kwok.

    Attributes:
        name: Node name (also its ``kubernetes.io/hostname`` and :data:`MINI_KUBELET_LABEL` label).
        cpu: CPU capacity.
        memory: Memory capacity.
        pods: Pod capacity.
        gpus: ``nvidia.com/gpu`` capacity (0: none).
        labels: Extra labels.
        tainted: Carry :data:`MINI_KUBELET_TAINT`.
    """

    name: str
    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    gpus: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    tainted: bool = True

    def manifest(self, now: str) -> dict[str, Any]:
        """Build the Node object.

        Args:
            now: RFC 3339 time of the Ready condition.

        Returns:
            The Node, with its status (the apiserver ignores status on create; write it to the status subresource).
        """
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        if self.gpus:
            resources["nvidia.com/gpu"] = str(self.gpus)
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            MINI_KUBELET_LABEL: self.name,
            **self.labels,
        }
        spec: dict[str, Any] = {"taints": [dict(MINI_KUBELET_TAINT)]} if self.tainted else {}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "spec": spec,
            "status": self.status(now),
        }

    def status(self, now: str) -> dict[str, Any]:
        """The Node's status: Ready, its capacity and address.

        Args:
            now: RFC 3339 time of the conditions.

        Returns:
            The status.
        """
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        if self.gpus:
            resources["nvidia.com/gpu"] = str(self.gpus)
        return {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "addresses": [{"type": "InternalIP", "address": NODE_IP}, {"type": "Hostname", "address": self.name}],
            "conditions": [
                {
                    "type": conditions.NODE_READY,
                    "status": "True",
                    "reason": conditions.REASON_KUBELET_READY,
                    "message": "mini-kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "mini-kubelet",
                "containerRuntimeVersion": "mini-kubelet://local-processes",
                "kernelVersion": "",
                "osImage": "",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
                "kubeProxyVersion": "",
            },
        }

    def placement(self) -> dict[str, Any]:
        """Pod spec fields that put a pod on this node through a scheduler.

        Returns:
            ``nodeSelector`` (and ``tolerations`` for a tainted node), to merge into a pod spec.
        """
        result: dict[str, Any] = {"nodeSelector": {MINI_KUBELET_LABEL: self.name}}
        if self.tainted:
            result["tolerations"] = [{"key": MINI_KUBELET_LABEL, "operator": "Exists", "effect": "NoSchedule"}]
        return result


class PodIPPool:
    """Pod IPs from a range, each leased to at most one pod at a time (thread-safe).

    Args:
        cidr: The range (network and broadcast addresses are never handed out).
    """

    def __init__(self, cidr: str = DEFAULT_POD_IP_RANGE) -> None:
        self._free = [str(ip) for ip in ipaddress.ip_network(cidr).hosts()]
        self._leased: dict[str, str] = {}
        self._lock = threading.Lock()

    def lease(self, owner: str) -> str:
        """Lease an IP to ``owner`` (the same IP again if it already holds one).

        Args:
            owner: A pod UID.

        Returns:
            The IP.

        Raises:
            RuntimeError: The range is exhausted.
        """
        with self._lock:
            if owner in self._leased:
                return self._leased[owner]
            if not self._free:
                raise RuntimeError("mini-kubelet pod IP range exhausted")
            ip = self._free.pop(0)
            self._leased[owner] = ip
            return ip

    def release(self, owner: str) -> None:
        """Return ``owner``'s IP to the end of the pool (so it is reused as late as possible).

        Args:
            owner: A pod UID.
        """
        with self._lock:
            ip = self._leased.pop(owner, None)
            if ip is not None:
                self._free.append(ip)


def hostpath_volume(
    name: str,
    path: str,
    *,
    claim_namespace: str,
    claim_name: str,
    capacity: str = "1Gi",
    access_modes: tuple[str, ...] = ("ReadWriteMany",),
    storage_class: str = "",
) -> dict[str, Any]:
    """A hostPath PersistentVolume pre-bound to a claim (``claimRef``), reclaim policy Retain.

    With the cluster tier's ``persistentvolume-binder-controller`` the claim (whose ``storageClassName`` must
    equal ``storage_class``, and whose request fits ``capacity``) binds to it without any provisioner. A
    mini-kubelet maps the path under its root, so every pod using the claim sees the same files.

    Args:
        name: PV name.
        path: The node path (mapped under the mini-kubelet's root).
        claim_namespace: The claim's namespace.
        claim_name: The claim's name.
        capacity: ``spec.capacity.storage``.
        access_modes: ``spec.accessModes``.
        storage_class: ``spec.storageClassName`` (empty: none).

    Returns:
        The PersistentVolume.
    """
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": capacity},
            "accessModes": list(access_modes),
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "hostPath": {"path": path, "type": "DirectoryOrCreate"},
            "claimRef": {"namespace": claim_namespace, "name": claim_name},
        },
    }
