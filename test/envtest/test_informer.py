"""Informers against a real apiserver: sync, events, relist after 410 Gone, reconnect after a cut."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject, name_of, strip_managed_fields
from kthena_py.kube.resources import CONFIGMAPS, PODS, ResourceType
from kthena_py.runtime.informer import Informer
from kthena_py.testing.controlplane import EnvTest
from kthena_py.testing.proxy import proxy_kubeconfig
from kthena_py.testing.wait import eventually

pytestmark = pytest.mark.envtest

# The envtest tier serves PodTemplates without a watch cache, so their watches go straight to
# etcd and an etcd compaction really makes an old resourceVersion answer 410 Gone.
PODTEMPLATES = ResourceType("", "v1", "PodTemplate", "podtemplates")


class HandlerLog:
    """An informer event handler that logs what it is called with (not an event sink: no Kubernetes Events)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: KubeObject) -> None:
        self.events.append(("add", name_of(obj)))

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        self.events.append(("update", name_of(new)))

    def on_delete(self, obj: KubeObject) -> None:
        self.events.append(("delete", name_of(obj)))


def _template(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }


def _etcd(env: EnvTest, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        f"{env.etcd_endpoint}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        result: dict[str, Any] = json.loads(resp.read())
        return result


def compact_etcd(env: EnvTest) -> int:
    """Compact etcd up to its current revision; return that revision."""
    key = base64.b64encode(b"/").decode()
    rev = int(_etcd(env, "/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
    _etcd(env, "/v3/kv/compaction", {"revision": rev, "physical": True})
    return rev


async def test_sync_and_events(kube: KubeClient, namespace: str) -> None:
    await kube.create(CONFIGMAPS, {"metadata": {"name": "before"}}, namespace)
    inf = Informer(kube, CONFIGMAPS, namespace=namespace)
    rec = HandlerLog()
    inf.add_handler(rec)
    task = asyncio.create_task(inf.run())
    try:
        assert await inf.wait_for_sync(30)
        assert rec.events == [("add", "before")]
        assert "managedFields" not in inf.store.get(f"{namespace}/before")["metadata"]  # type: ignore[index]
        await kube.create(CONFIGMAPS, {"metadata": {"name": "after"}}, namespace)
        await kube.patch(CONFIGMAPS, "before", {"data": {"a": "b"}}, namespace)
        await kube.delete(CONFIGMAPS, "after", namespace)
        await eventually(lambda: ("delete", "after") in rec.events, timeout=30)
        assert rec.events[1:] == [("add", "after"), ("update", "before"), ("delete", "after")]
        assert sorted(inf.store.keys()) == [f"{namespace}/before"]
    finally:
        task.cancel()


@pytest.mark.parametrize("transform", ["dropping", "none"])
async def test_a_watch_decodes_managed_fields_only_for_an_informer_that_keeps_them(
    kube: KubeClient, namespace: str, transform: str
) -> None:
    """Watched pods (the API server's field-by-field layout, managedFields cut out of the bytes) equal a read."""
    arrived_with_them: list[bool] = []

    def dropping(obj: KubeObject) -> KubeObject:
        arrived_with_them.append("managedFields" in obj["metadata"])
        return strip_managed_fields(obj)

    inf = Informer(kube, PODS, namespace=namespace, transform=dropping if transform == "dropping" else None)
    task = asyncio.create_task(inf.run())
    try:
        assert await inf.wait_for_sync(30)
        body = {"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        await kube.create(PODS, body, namespace)
        patched = await kube.patch(PODS, "p", {"metadata": {"labels": {"c": "d"}}}, namespace, field_manager="second")
        version = patched["metadata"]["resourceVersion"]

        def current() -> bool:
            return (inf.store.get(f"{namespace}/p") or {}).get("metadata", {}).get("resourceVersion") == version

        await eventually(current, timeout=30)
        stored = inf.store.get(f"{namespace}/p")
        read = await kube.get(PODS, "p", namespace)
        assert len(read["metadata"]["managedFields"]) == 2
        if transform == "dropping":
            assert arrived_with_them and not any(arrived_with_them), "the watch decoded them"
            del read["metadata"]["managedFields"]
        assert stored == read
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_gone_relists_without_missing_deletes(kube: KubeClient, namespace: str, envtest: EnvTest) -> None:
    for n in ("keep", "doomed"):
        await kube.create(PODTEMPLATES, _template(n), namespace)
    inf = Informer(kube, PODTEMPLATES, namespace=namespace)
    rec = HandlerLog()
    inf.add_handler(rec)
    task = asyncio.create_task(inf.run())
    assert await inf.wait_for_sync(30)
    stale_rv = inf.resource_version
    # The informer is cut off; meanwhile the world changes and etcd compacts its history.
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await kube.delete(PODTEMPLATES, "doomed", namespace)
    await kube.create(PODTEMPLATES, _template("newcomer"), namespace)
    await kube.patch(PODTEMPLATES, "keep", {"metadata": {"labels": {"x": "y"}}}, namespace)
    compact_etcd(envtest)
    rec.events.clear()
    task = asyncio.create_task(inf.run())
    try:
        await eventually(lambda: inf.relists >= 2, timeout=60, description="relist after 410")
        assert inf.resource_version != stale_rv
        assert sorted(rec.events) == [("add", "newcomer"), ("delete", "doomed"), ("update", "keep")]
        assert sorted(inf.store.keys()) == [f"{namespace}/keep", f"{namespace}/newcomer"]
        # And it keeps watching after the relist.
        await kube.delete(PODTEMPLATES, "keep", namespace)
        await eventually(lambda: ("delete", "keep") in rec.events, timeout=30)
    finally:
        task.cancel()


async def test_dropped_connection_reconnects(kubeconfig: Path, namespace: str, kube: KubeClient) -> None:
    proxy, proxied_path = await proxy_kubeconfig(kubeconfig, f"proxied-{namespace}")
    proxied = await KubeClient.from_kubeconfig(str(proxied_path))
    inf = Informer(proxied, CONFIGMAPS, namespace=namespace)
    rec = HandlerLog()
    inf.add_handler(rec)
    task = asyncio.create_task(inf.run())
    try:
        assert await inf.wait_for_sync(30)
        await kube.create(CONFIGMAPS, {"metadata": {"name": "one"}}, namespace)
        await eventually(lambda: ("add", "one") in rec.events, timeout=30)
        # Cut every connection and refuse new ones for a while: changes made meanwhile must arrive.
        proxy.refusing = True
        assert proxy.drop_connections() > 0
        await kube.create(CONFIGMAPS, {"metadata": {"name": "two"}}, namespace)
        await kube.delete(CONFIGMAPS, "one", namespace)
        await asyncio.sleep(1.0)
        proxy.refusing = False
        await eventually(lambda: ("delete", "one") in rec.events and ("add", "two") in rec.events, timeout=60)
        assert sorted(inf.store.keys()) == [f"{namespace}/two"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await proxied.close()
        await proxy.stop()
