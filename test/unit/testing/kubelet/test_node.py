"""The manual node's manifest and placement, the pod IP pool and the pre-bound hostPath PV."""

from __future__ import annotations

import ipaddress

import pytest

from kthena_py.testing.controlplane.cluster import KWOK_NODE_ANNOTATION
from kthena_py.testing.kubelet import MINI_KUBELET_LABEL, ManualNode, PodIPPool, hostpath_volume


def test_the_node_is_not_kwoks_and_is_ready_on_loopback() -> None:
    node = ManualNode("mk", gpus=2, labels={"zone": "a"}).manifest("T")
    assert KWOK_NODE_ANNOTATION[0] not in (node["metadata"].get("annotations") or {})
    assert node["metadata"]["labels"][MINI_KUBELET_LABEL] == "mk"
    assert node["metadata"]["labels"]["zone"] == "a"
    assert node["status"]["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"}
    assert node["status"]["capacity"] == node["status"]["allocatable"]
    assert {"type": "InternalIP", "address": "127.0.0.1"} in node["status"]["addresses"]
    assert [(c["type"], c["status"]) for c in node["status"]["conditions"]] == [("Ready", "True")]
    assert node["spec"]["taints"] == [{"key": MINI_KUBELET_LABEL, "value": "true", "effect": "NoSchedule"}]


@pytest.mark.parametrize("tainted", [True, False])
def test_placement_tolerates_exactly_its_taint(tainted: bool) -> None:
    node = ManualNode("mk", tainted=tainted)
    taints = node.manifest("T")["spec"].get("taints", [])
    placement = node.placement()
    assert placement["nodeSelector"] == {MINI_KUBELET_LABEL: "mk"}
    tolerated = {(t["key"], t["effect"]) for t in placement.get("tolerations", [])}
    assert {(t["key"], t["effect"]) for t in taints} == tolerated


def test_the_ip_pool_leases_each_address_once_and_reuses_released_ones_last() -> None:
    pool = PodIPPool("127.100.250.0/30")
    a, b = pool.lease("a"), pool.lease("b")
    assert {a, b} == {"127.100.250.1", "127.100.250.2"}
    assert pool.lease("a") == a
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.lease("c")
    pool.release("a")
    assert pool.lease("c") == a
    pool.release("unknown")


def test_the_default_range_stays_clear_of_kwoks_low_addresses() -> None:
    ip = ipaddress.ip_address(PodIPPool().lease("x"))
    assert ip in ipaddress.ip_network("127.100.250.0/24")


def test_hostpath_volume_is_pre_bound_and_retained() -> None:
    pv = hostpath_volume("pv1", "/exports/m", claim_namespace="ns", claim_name="models", capacity="5Gi")
    assert pv["spec"]["claimRef"] == {"namespace": "ns", "name": "models"}
    assert pv["spec"]["hostPath"]["path"] == "/exports/m"
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["capacity"] == {"storage": "5Gi"}
    assert pv["spec"]["storageClassName"] == ""
