"""The cluster tier: the envtest tier plus controllers, fake nodes and Volcano's gang scheduler.

Start order (each step waits for the previous one):

1. etcd and kube-apiserver (:class:`~kthena_py.testing.controlplane.envtest.EnvTest`).
2. Volcano's CRDs (from the Volcano cache directory ``crd/``), then the caller's CRDs, all listed by
   discovery before any controller starts (the garbage collector only rediscovers every 30 s).
3. kube-controller-manager with :data:`DEFAULT_CONTROLLERS` (garbage collector, namespace
   deletion, service accounts, Deployment/ReplicaSet/Job/StatefulSet, TTL-after-finished, claim binding and the
   volume protection finalizers, :data:`VOLUME_CONTROLLERS`), no
   serving port (``--secure-port=0``). Ready when the ``default`` ServiceAccount exists.
4. kwok, playing the stages of :mod:`~kthena_py.testing.controlplane.kwokstages` (the stock "fast" ones, adjusted:
   pod-ready after ``pod_ready_delay_ms``, never for a pod with a bad image; pods held not Ready; in-place updates
   reflected as the kubelet would, Ready again after ``inplace_ready_delay_ms``), managing only
   Nodes annotated ``kwok.x-k8s.io/node=fake``; it opens no port. Pod IPs come from
   ``pod_cidr`` (default ``127.100.0.0/16``, on loopback, so a test can serve on a fake pod IP), the
   node IP is 127.0.0.1.
5. The fake Nodes (default 4 x :class:`FakeNode`), each ``Ready`` (kwok initialised it).
6. vc-scheduler (``--scheduler-name=volcano``, ``--schedule-period=500ms``, gang + proportion +
   predicates..., no leader election, healthz/metrics/pprof disabled: no port). Ready when it has
   created the ``root`` and ``default`` Queues; both are then opened (``status.state: Open``,
   normally vc-controller-manager's job).

What it guarantees beyond :class:`EnvTest`: ownerReferences are garbage-collected, namespaces are
really deleted, Deployments/ReplicaSets/Jobs/StatefulSets create pods, pods with
``schedulerName: volcano`` and a PodGroup (annotation ``scheduling.k8s.io/group-name``) are
gang-scheduled onto fake nodes and become Running/Ready; deleted pods go away.

Not included: kube-scheduler (pods without ``schedulerName: volcano`` stay Pending unless a test
sets ``nodeName``), vc-controller-manager (no automatic PodGroups for bare pods, no Volcano Jobs),
the node-lifecycle controller (nodes never go NotReady on their own), kubelet (no containers run; for pods
that must really run, :mod:`kthena_py.testing.kubelet` serves a manual node from the test process), volume
provisioning (no StorageClass: bind claims to PVs made with :func:`kthena_py.testing.kubelet.hostpath_volume`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kthena_py.testing.controlplane.binaries import ClusterBinaries, find_cluster_binaries
from kthena_py.testing.controlplane.envtest import CRDSource, EnvTest
from kthena_py.testing.controlplane.kubeapi import ApiError
from kthena_py.testing.controlplane.kwokstages import stage_documents
from kthena_py.testing.controlplane.process import wait_for

__all__ = [
    "DEFAULT_CONTROLLERS",
    "DEFAULT_GPU_PRODUCT",
    "DEFAULT_POD_CIDR",
    "DEFAULT_SCHEDULER_CONF",
    "KWOK_NODE_ANNOTATION",
    "VOLUME_CONTROLLERS",
    "ClusterTier",
    "FakeNode",
]

VOLUME_CONTROLLERS: tuple[str, ...] = (
    "persistentvolume-binder-controller",
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
)
"""The controllers that bind claims to PersistentVolumes (a PV pre-bound through ``claimRef`` needs no provisioner)
and remove the ``kubernetes.io/pvc-protection``/``pv-protection`` finalizers the apiserver's admission adds, so that
deleting a namespace with claims completes. They act only on PersistentVolumes and claims, which no other test of
the tier creates, and the tier has no StorageClass, so nothing is ever provisioned: harmless to every other test.
Leave them out with ``ClusterTier(controllers=...)``."""

DEFAULT_CONTROLLERS: tuple[str, ...] = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "replicaset-controller",
    "deployment-controller",
    "job-controller",
    "statefulset-controller",
    "ttl-after-finished-controller",
    *VOLUME_CONTROLLERS,
)
"""kube-controller-manager controllers the tier runs (names as of Kubernetes 1.35)."""

DEFAULT_POD_CIDR = "127.100.0.0/16"
DEFAULT_GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")

DEFAULT_SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
"""vc-scheduler configuration: the Volcano Helm chart's default."""

_VOLCANO_CRDS = (
    "scheduling.volcano.sh_podgroups.yaml",
    "scheduling.volcano.sh_queues.yaml",
    "topology.volcano.sh_hypernodes.yaml",
    "nodeinfo.volcano.sh_numatopologies.yaml",
)
_QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


@dataclass(frozen=True)
class FakeNode:
    """A fake Node managed by kwok.

    Attributes:
        name: Node name (also its ``kubernetes.io/hostname`` label).
        cpu: CPU capacity.
        memory: Memory capacity.
        pods: Pod capacity.
        gpus: ``nvidia.com/gpu`` capacity (0: none).
        gpu_product: Value of the ``nvidia.com/gpu.product`` label (None: no label).
        labels: Extra labels.
        taints: Taints (``{"key", "value", "effect"}`` dicts).
    """

    name: str
    cpu: str = "32"
    memory: str = "256Gi"
    pods: str = "110"
    gpus: int = 8
    gpu_product: str | None = DEFAULT_GPU_PRODUCT
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()

    def manifest(self) -> dict[str, Any]:
        """Build the Node object.

        Returns:
            The manifest, with capacity and allocatable set in ``status``.
        """
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        if self.gpus:
            resources["nvidia.com/gpu"] = str(self.gpus)
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
        }
        if self.gpu_product is not None:
            labels["nvidia.com/gpu.product"] = self.gpu_product
        labels.update(self.labels)
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = [dict(t) for t in self.taints]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {
                    KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1],
                    "node.alpha.kubernetes.io/ttl": "0",
                },
            },
            "spec": spec,
            "status": {"capacity": dict(resources), "allocatable": dict(resources)},
        }


class ClusterTier(EnvTest):
    """etcd + kube-apiserver + kube-controller-manager + kwok + vc-scheduler on loopback.

    Args:
        run_dir: See :class:`EnvTest`.
        binaries: Binary paths; default: :func:`find_cluster_binaries` at :meth:`start`.
        crds: Extra CRDs, installed after Volcano's and before any controller starts.
        nodes: Number of default fake nodes (``kwok-node-0``...), or the nodes themselves.
        gpu_product: ``nvidia.com/gpu.product`` label of the default nodes.
        pod_cidr: kwok's pod IP range (keep it inside 127.0.0.0/8 to be able to bind pod IPs).
        controllers: kube-controller-manager ``--controllers``.
        scheduler_conf: vc-scheduler configuration YAML.
        scheduler_verbosity: vc-scheduler ``-v`` (3 logs every scheduling decision).
        apiserver_args: See :class:`EnvTest`.
        service_account_admission: See :class:`EnvTest` (kube-controller-manager creates the ``default``
            ServiceAccounts here).
        start_timeout: See :class:`EnvTest`.
        stop_timeout: See :class:`EnvTest`.
        start_attempts: See :class:`EnvTest`.
        pod_ready_delay_ms: How long kwok waits before making a scheduled pod Running and Ready.
        inplace_ready_delay_ms: How long a container restarted by an image patch stays not Ready (plus
            ``pod_ready_delay_ms``).
        pod_parallelism: kwok's pod stage workers (``podPlayStageParallelism``): how many pods it moves through a
            stage (e.g. to Running and Ready) at a time, each with one status write. Real kubelets work in
            parallel, one per node; the default of 4 keeps the tier light for tests, benchmarks raise it.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        binaries: ClusterBinaries | None = None,
        crds: Sequence[CRDSource] = (),
        nodes: int | Sequence[FakeNode] = 4,
        gpu_product: str | None = DEFAULT_GPU_PRODUCT,
        pod_cidr: str = DEFAULT_POD_CIDR,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        scheduler_conf: str = DEFAULT_SCHEDULER_CONF,
        scheduler_verbosity: int = 2,
        apiserver_args: Sequence[str] = (),
        service_account_admission: bool = False,
        start_timeout: float = 120.0,
        stop_timeout: float = 15.0,
        start_attempts: int = 3,
        pod_ready_delay_ms: int = 0,
        inplace_ready_delay_ms: int = 1000,
        pod_parallelism: int = 4,
    ) -> None:
        super().__init__(
            run_dir,
            binaries=binaries,
            crds=crds,
            apiserver_args=apiserver_args,
            service_account_admission=service_account_admission,
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
            start_attempts=start_attempts,
        )
        self._cluster_binaries = binaries
        self._extra_crds = list(crds)
        if isinstance(nodes, int):
            self._initial_nodes = [FakeNode(f"kwok-node-{i}", gpu_product=gpu_product) for i in range(nodes)]
        else:
            self._initial_nodes = list(nodes)
        self.pod_cidr = pod_cidr
        self._controllers = list(controllers)
        self._scheduler_conf = scheduler_conf
        self._scheduler_verbosity = scheduler_verbosity
        self._nodes: dict[str, FakeNode] = {}
        self.pod_ready_delay_ms = pod_ready_delay_ms
        self.inplace_ready_delay_ms = inplace_ready_delay_ms
        self.pod_parallelism = pod_parallelism

    @property
    def binaries(self) -> ClusterBinaries:
        """The binaries in use (resolved at :meth:`start`)."""
        if self._cluster_binaries is None:
            raise RuntimeError("not started")
        return self._cluster_binaries

    @property
    def nodes(self) -> list[FakeNode]:
        """The fake nodes the harness created and has not removed."""
        return list(self._nodes.values())

    def _resolve_binaries(self) -> ClusterBinaries:
        if self._cluster_binaries is None:
            self._cluster_binaries = find_cluster_binaries()
        self._crds = [self._cluster_binaries.volcano_crd_dir / n for n in _VOLCANO_CRDS] + self._extra_crds
        return self._cluster_binaries

    def _start_components(self) -> None:
        b = self.binaries
        self._nodes = {}
        kubeconfig = str(self.kubeconfig_path)
        self._spawn(
            "kube-controller-manager",
            [
                str(b.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--controllers={','.join(self._controllers)}",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={self.pki.sa_key}",
                f"--root-ca-file={self.pki.serving_ca_cert}",
                "--v=1",
            ],
        )
        kwok_conf = self.run_dir / "kwok.yaml"
        kwok_conf.write_text(self._kwok_config())
        self._spawn(
            "kwok",
            [
                str(b.kwok),
                f"--kubeconfig={kubeconfig}",
                f"--config={kwok_conf}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION[0]}={KWOK_NODE_ANNOTATION[1]}",
                f"--cidr={self.pod_cidr}",
                "--node-ip=127.0.0.1",
                "--node-port=0",
                "--server-address=",
            ],
        )
        if "serviceaccount-controller" in self._controllers:
            wait_for(
                "kube-controller-manager (ServiceAccount default/default)",
                lambda: self._exists("/api/v1/namespaces/default/serviceaccounts/default"),
                timeout=self.start_timeout,
                processes=self._processes,
            )
        for node in self._initial_nodes:
            self.add_node(node, wait=False)
        for node in self._initial_nodes:
            self._wait_node_ready(node.name)
        sched_conf = self.run_dir / "volcano-scheduler.conf"
        sched_conf.write_text(self._scheduler_conf)
        self._spawn(
            "vc-scheduler",
            [
                str(b.vc_scheduler),
                f"--kubeconfig={kubeconfig}",
                f"--scheduler-conf={sched_conf}",
                "--scheduler-name=volcano",
                "--schedule-period=500ms",
                "--leader-elect=false",
                "--enable-healthz=false",
                "--enable-metrics=false",
                "--enable-pprof=false",
                "--healthz-address=127.0.0.1:0",
                "--listen-address=127.0.0.1:0",
                "--cache-dumper=false",
                "--logtostderr",
                f"-v={self._scheduler_verbosity}",
            ],
        )
        for queue in ("root", "default"):
            wait_for(
                f"vc-scheduler (Queue {queue})",
                functools.partial(self._exists, f"{_QUEUES}/{queue}"),
                timeout=self.start_timeout,
                processes=self._processes,
            )
            self.open_queue(queue)

    def _kwok_config(self) -> str:
        options = {
            "cidr": self.pod_cidr,
            "nodeIP": "127.0.0.1",
            "manageAllNodes": False,
            "manageNodesWithAnnotationSelector": "=".join(KWOK_NODE_ANNOTATION),
            "enableDebuggingHandlers": False,
            "enableContentionProfiling": False,
            "enableProfilingHandler": False,
            # kwok applies its defaults only when there is no KwokConfiguration document at all.
            "podPlayStageParallelism": self.pod_parallelism,
            "nodePlayStageParallelism": 4,
            "nodeLeaseParallelism": 4,
            "podsOnNodeSyncParallelism": 1,
            "enablePodsOnNodeSyncListPager": True,
            "enablePodsOnNodeSyncStreamWatch": False,
        }
        docs: list[Any] = [
            {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration", "options": options}
        ]
        docs.extend(
            stage_documents(
                self.binaries.kwok_stages_dir,
                pod_ready_delay_ms=self.pod_ready_delay_ms,
                inplace_ready_delay_ms=self.inplace_ready_delay_ms,
            )
        )
        return yaml.safe_dump_all(docs, sort_keys=False)

    # ----------------------------------------------------------------------------- queues

    def open_queue(self, name: str, *, timeout: float = 30.0) -> None:
        """Set a Volcano Queue's ``status.state`` to ``Open`` and wait until it reads back so.

        Without vc-controller-manager nothing else opens queues, and the ``proportion`` plugin
        refuses jobs of queues that are not Open.

        Args:
            name: Queue name.
            timeout: Seconds to keep retrying.
        """

        def patch() -> bool | None:
            self.client.merge_patch(f"{_QUEUES}/{name}/status", {"status": {"state": "Open"}})
            current = self.client.get(f"{_QUEUES}/{name}")
            return True if current.get("status", {}).get("state") == "Open" else None

        wait_for(f"Queue {name} Open", patch, timeout=timeout, interval=0.5, processes=self._processes)

    # ----------------------------------------------------------------------------- nodes

    def add_node(self, node: FakeNode | str, *, wait: bool = True, timeout: float = 60.0) -> FakeNode:
        """Create a fake Node for kwok to manage.

        Args:
            node: The node, or just a name for a default-sized one.
            wait: Wait until kwok reports it ``Ready``.
            timeout: Seconds to wait.

        Returns:
            The node.

        Raises:
            ApiError: The apiserver rejected it (e.g. it exists).
        """
        if isinstance(node, str):
            gpu_product = self._initial_nodes[0].gpu_product if self._initial_nodes else DEFAULT_GPU_PRODUCT
            node = FakeNode(node, gpu_product=gpu_product)
        self.client.create("/api/v1/nodes", node.manifest())
        self._nodes[node.name] = node
        if wait:
            self._wait_node_ready(node.name, timeout)
        return node

    def _wait_node_ready(self, name: str, timeout: float | None = None) -> None:
        def ready() -> bool | None:
            status, body = self.client.raw("GET", f"/api/v1/nodes/{name}")
            if status != 200:
                return None
            conds = body.get("status", {}).get("conditions") or []
            return True if any(c["type"] == "Ready" and c["status"] == "True" for c in conds) else None

        wait_for(
            f"node {name} Ready",
            ready,
            timeout=timeout or self.start_timeout,
            interval=0.2,
            processes=self._processes,
        )

    def remove_node(self, name: str, *, delete_pods: bool = True, timeout: float = 60.0) -> None:
        """Delete a fake Node.

        There is no pod-GC or node-lifecycle controller, so pods bound to the node would otherwise
        stay forever; with ``delete_pods`` they are force-deleted first.

        Args:
            name: Node name.
            delete_pods: Force-delete the pods bound to it.
            timeout: Seconds to wait for the Node to disappear.
        """
        if delete_pods:
            pods = self.client.get("/api/v1/pods", query={"fieldSelector": f"spec.nodeName={name}"})
            for pod in pods.get("items", []):
                meta = pod["metadata"]
                self.client.delete(
                    f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                    {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                )
        self.client.delete(f"/api/v1/nodes/{name}")
        self._nodes.pop(name, None)
        deadline = time.monotonic() + timeout
        while self.client.raw("GET", f"/api/v1/nodes/{name}")[0] != 404:
            if time.monotonic() > deadline:
                raise ApiError("DELETE", f"/api/v1/nodes/{name}", 409, "node still present")
            time.sleep(0.2)

    def state(self) -> dict[str, Any]:
        """Describe the running tier; see :meth:`EnvTest.state`.

        Returns:
            The :class:`EnvTest` state plus the node names and pod CIDR.
        """
        return {**super().state(), "nodes": sorted(self._nodes), "pod_cidr": self.pod_cidr}
