"""Fixtures of the cluster tier: mini-kubelets (pods that really run as local processes) and hostPath volumes.

* ``make_mini_kubelet(name=None, runner=None, **ManualNode fields) -> MiniKubelet``: a manual node served from
  this process (``runner``: its container mapper, default :class:`~kthena_py.testing.kubelet.CommandMapper`), its
  root under the test's ``tmp_path``; every kubelet of a test shares one volume root (claims are shared
  storage). All are stopped at the end of the test: processes killed, pods on their nodes force-deleted, nodes
  deleted.
* ``mini_kubelet``: one such kubelet.
* ``make_hostpath_volume(claim_namespace, claim_name, path, **kw) -> name``: a hostPath PV pre-bound to the claim
  (:func:`kthena_py.testing.kubelet.hostpath_volume`), deleted at the end of the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.kubelet import ContainerRunner, ManualNode, MiniKubelet, hostpath_volume


@pytest.fixture
def make_mini_kubelet(cluster: ClusterTier, tmp_path: Path) -> Iterator[Callable[..., MiniKubelet]]:
    kubelets: list[MiniKubelet] = []
    volume_root = tmp_path / "volumes"

    def make(name: str | None = None, runner: ContainerRunner | None = None, **node: Any) -> MiniKubelet:
        node_name = name or f"mini-kubelet-{uuid.uuid4().hex[:6]}"
        kubelet = MiniKubelet(
            cluster.kubeconfig_path,
            ManualNode(node_name, **node),
            tmp_path / node_name,
            volume_root=volume_root,
            runner=runner,
        )
        kubelet.start()
        kubelets.append(kubelet)
        return kubelet

    yield make
    for kubelet in kubelets:
        kubelet.stop()


@pytest.fixture
def mini_kubelet(make_mini_kubelet: Callable[..., MiniKubelet]) -> MiniKubelet:
    return make_mini_kubelet()


@pytest.fixture
def make_hostpath_volume(cluster: ClusterTier) -> Iterator[Callable[..., str]]:
    created: list[str] = []

    def make(claim_namespace: str, claim_name: str, path: str, **kwargs: Any) -> str:
        name = f"pv-{claim_name}-{uuid.uuid4().hex[:6]}"
        cluster.client.create(
            "/api/v1/persistentvolumes",
            hostpath_volume(name, path, claim_namespace=claim_namespace, claim_name=claim_name, **kwargs),
        )
        created.append(name)
        return name

    yield make
    for name in created:
        cluster.client.delete(f"/api/v1/persistentvolumes/{name}")
