"""A real Kubernetes control plane on loopback for tests and local runs, in two tiers.

* :class:`EnvTest`: etcd + kube-apiserver (CRD validation, RBAC, watches, status, finalizers).
* :class:`ClusterTier`: EnvTest + kube-controller-manager + kwok fake nodes + Volcano's
  vc-scheduler (garbage collection, namespace deletion, gang-scheduled pods Running/Ready).

Binaries come from ``hack/build-controlplane.sh`` (see :mod:`.binaries`); every server listens on
127.0.0.1 only; certificates are minted per run (:mod:`.pki`); every process is stopped by process
group, never by name (:mod:`.process`). ``python -m kthena_py.testing.controlplane up`` runs a tier
in the foreground for local development.
"""

from kthena_py.testing.controlplane.binaries import (
    BinariesNotFoundError,
    ClusterBinaries,
    EnvTestBinaries,
    find_cluster_binaries,
    find_envtest_binaries,
    find_helm,
    find_kubectl,
)
from kthena_py.testing.controlplane.cluster import ClusterTier, FakeNode
from kthena_py.testing.controlplane.envtest import CRDSource, EnvTest, load_crds
from kthena_py.testing.controlplane.kubeapi import ApiError, KubeHTTP
from kthena_py.testing.controlplane.pki import PKI
from kthena_py.testing.controlplane.process import (
    ManagedProcess,
    ProcessExitedError,
    StartupTimeoutError,
    listening_sockets,
)

__all__ = [
    "PKI",
    "ApiError",
    "BinariesNotFoundError",
    "CRDSource",
    "ClusterBinaries",
    "ClusterTier",
    "EnvTest",
    "EnvTestBinaries",
    "FakeNode",
    "KubeHTTP",
    "ManagedProcess",
    "ProcessExitedError",
    "StartupTimeoutError",
    "find_cluster_binaries",
    "find_envtest_binaries",
    "find_helm",
    "find_kubectl",
    "listening_sockets",
    "load_crds",
]
