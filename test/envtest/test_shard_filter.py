"""The API server's sharded lists (KEP-5866) against the replica's own hash, with the feature gate on and off.

The test tier's kube-apiserver runs with ``ShardedListAndWatch`` on. A ``shardSelector`` range of
``object.metadata.namespace`` must select exactly the objects whose namespace :func:`fnv1a64` puts in the range
(the replica's hash is the server's), and :func:`server_filters_shards` must see the feature. A second API server
with the gate off answers the same request unfiltered and without ``shardInfo``, and detection says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kthena_py.kube import KubeClient
from kthena_py.kube.resources import CONFIGMAPS, NAMESPACES
from kthena_py.runtime.shards.detect import server_filters_shards, shard_info_of
from kthena_py.runtime.shards.hashing import SPACE, fnv1a64
from kthena_py.runtime.shards.selector import shard_selector
from kthena_py.testing.controlplane.envtest import EnvTest

pytestmark = pytest.mark.envtest

RANGES = [(0, SPACE // 2), (SPACE // 2, SPACE), (0x3000000000000000, 0xB000000000000000), (0, SPACE)]


async def selected(kube: KubeClient, lo: int, hi: int, label: str) -> tuple[list[str], object | None]:
    reply = await kube.request(
        "GET", CONFIGMAPS.path(None), query={"shardSelector": shard_selector([(lo, hi)]), "labelSelector": label}
    )
    return sorted(item["metadata"]["namespace"] for item in reply["items"]), shard_info_of(reply)


async def test_a_shard_range_selects_exactly_the_namespaces_the_replicas_hash_puts_in_it(
    kube: KubeClient, make_namespace: Callable[..., str]
) -> None:
    label = "kthena-py-test=shard-filter"
    namespaces = [make_namespace(f"shard-filter-{i}") for i in range(24)]
    for ns in namespaces:
        await kube.create(CONFIGMAPS, {"metadata": {"name": "probe", "labels": {"kthena-py-test": "shard-filter"}}}, ns)
    assert await server_filters_shards(kube)
    for lo, hi in RANGES:
        got, info = await selected(kube, lo, hi, label)
        assert got == sorted(ns for ns in namespaces if lo <= fnv1a64(ns) < hi), (hex(lo), hex(hi))
        assert info is not None
    low, _ = await selected(kube, 0, SPACE // 2, label)
    high, _ = await selected(kube, SPACE // 2, SPACE, label)
    assert low and high  # both halves are exercised


async def test_with_the_gate_off_the_selector_is_ignored_and_detection_says_so(tmp_path: Path) -> None:
    with EnvTest(tmp_path, apiserver_args=["--feature-gates=ShardedListAndWatch=false"]) as off:
        kube = await KubeClient.from_kubeconfig(str(off.kubeconfig_path))
        try:
            names = []
            for i in range(6):
                ns = f"gate-off-{i}"
                await kube.create(NAMESPACES, {"metadata": {"name": ns}})
                await kube.create(CONFIGMAPS, {"metadata": {"name": "probe", "labels": {"t": "off"}}}, ns)
                names.append(ns)
            got, info = await selected(kube, 0, 1, "t=off")  # a range almost nothing hashes into
            assert got == sorted(names) and info is None
            assert not await server_filters_shards(kube)
        finally:
            await kube.close()
