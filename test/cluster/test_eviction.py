"""The eviction budget end to end: real evictions (policy/v1 and ``kubectl drain``) of pods on kwok nodes, decided
by the eviction webhook of in-process manager replicas (``manifests/eviction``'s webhook pointed at them).

Covers: ServingGroup level minAvailable 2 of 3 through two drains (every node the ModelServing runs on) with the
fewest ready groups watched at every pod event; percentage rounding; Role level with a protected and an
unprotected role; concurrent evictions from several clients; a manager restart between a grant and the pod's
deletion; two manager replicas serving the webhook; the endpoint disabled; pods not owned by a ModelServing.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers.eviction.metrics import REQUESTS
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient, NotFound
from kthena_py.kube.metrics import REST_CLIENT_REQUESTS, WRITE_METHODS
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import CONFIGMAPS, EVENTS, PODS, ResourceType
from kthena_py.plan.modelserving.eviction import tracker_entries, tracker_name
from kthena_py.runtime.webhook import AdmissionRequest
from kthena_py.testing.controlplane import ClusterTier
from kthena_py.testing.controlplane.cluster import FakeNode
from kthena_py.testing.wait import eventually

from .evictionutil import (
    ReadyWatcher,
    Replica,
    RoundRobinProxy,
    cordon,
    dedicated_node,
    evict,
    kubectl,
    pin,
    pod_ready,
    replica,
    webhook_installed,
)
from .msutil import live_pods, modelserving, role, wait_available

pytestmark = pytest.mark.cluster

PDBS = ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
DENIED = "Eviction denied: protected by ModelServing"


def protected(
    name: str, replicas: int, strategy: dict[str, Any], roles: list[dict[str, Any]] | None = None
) -> KubeObject:
    return modelserving(name, replicas, roles or [role("main", gpu=0)], rolloutStrategy={"evictionStrategy": strategy})


@contextlib.asynccontextmanager
async def budget(
    kube: KubeClient, kubeconfig: Path, namespace: str, *, enabled: bool = True, ttl: float = 60.0
) -> AsyncIterator[tuple[Replica, RoundRobinProxy]]:
    """One manager replica serving the eviction webhook for ``namespace``, behind a stable proxy port."""
    async with replica(str(kubeconfig), namespace, enabled=enabled, ttl=ttl) as one:
        proxy = await RoundRobinProxy([one.port]).start()
        try:
            async with webhook_installed(kube, namespace, proxy.port, [one]):
                yield one, proxy
        finally:
            await proxy.stop()


async def group_pods(kube: KubeClient, namespace: str, ms: str) -> dict[int, list[str]]:
    """Live pod names by group ordinal."""
    out: dict[int, list[str]] = {}
    for name, pod in (await live_pods(kube, namespace, ms)).items():
        group = pod["metadata"]["labels"]["modelserving.volcano.sh/group-name"]
        out.setdefault(int(group.rsplit("-", 1)[1]), []).append(name)
    return {g: sorted(names) for g, names in sorted(out.items())}


async def conditions_by_type(kube: KubeClient, namespace: str, ms: str) -> dict[str, dict[str, Any]]:
    obj = await kube.get(MODELSERVINGS, ms, namespace)
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def condition(kube: KubeClient, namespace: str, ms: str) -> dict[str, Any]:
    return (await conditions_by_type(kube, namespace, ms)).get("DisruptionAllowed", {})


async def tracker(kube: KubeClient, namespace: str, ms: str) -> KubeObject | None:
    try:
        return await kube.get(CONFIGMAPS, tracker_name(ms), namespace)
    except NotFound:
        return None


async def denial_events(kube: KubeClient, namespace: str) -> list[KubeObject]:
    items = (await kube.list(EVENTS, namespace, field_selector="involvedObject.kind=ModelServing")).items
    return [e for e in items if e["reason"] == "EvictionDenied" and e["type"] == "Warning"]


def requests_counted(decision: str) -> float:
    return sum(
        s.value
        for m in REQUESTS.collect()
        for s in m.samples
        if s.name.endswith("_total") and s.labels.get("decision") == decision
    )


# -- ServingGroup level, through kubectl drain -------------------------------------------------------------------


def _nodes(cluster: ClusterTier, tag: str, names: list[str], gpus: int) -> list[str]:
    for name in names:
        node = FakeNode(
            f"{tag}-{name}",
            gpus=gpus,
            labels={"kthena-py/eviction-test": tag},
            taints=[{"key": "kthena-py/eviction-test", "value": tag, "effect": "NoSchedule"}],
        )
        cluster.add_node(node)
    return [f"{tag}-{name}" for name in names]


def pinned_role(tag: str) -> dict[str, Any]:
    r = role("main", gpu=1)
    spec = r["entryTemplate"]["spec"]
    spec["nodeSelector"] = {"kthena-py/eviction-test": tag}
    spec["tolerations"] = [
        {"key": "kthena-py/eviction-test", "operator": "Equal", "value": tag, "effect": "NoSchedule"}
    ]
    return r


async def nodes_of(kube: KubeClient, namespace: str, ms: str) -> set[str]:
    return {p["spec"].get("nodeName", "") for p in (await live_pods(kube, namespace, ms)).values()}


async def test_drain_keeps_two_of_three_groups_ready_and_completes_once_rebuilt(
    kube: KubeClient, namespace: str, kubeconfig: Path, cluster: ClusterTier
) -> None:
    tag = f"ev{uuid.uuid4().hex[:6]}"
    created: list[str] = []
    try:
        # All three groups start on one node with room for three; spare nodes take one group each.
        created += await asyncio.to_thread(_nodes, cluster, tag, ["a"], 3)
        async with budget(kube, kubeconfig, namespace):
            await kube.create(MODELSERVINGS, protected("llm", 3, {"minAvailable": 2}, [pinned_role(tag)]), namespace)
            await wait_available(kube, namespace, "llm", 3)
            assert await nodes_of(kube, namespace, "llm") == {f"{tag}-a"}

            async def budget_shown() -> bool:
                cond = await condition(kube, namespace, "llm")
                return cond.get("message") == (
                    "ServingGroup level: 3 of 3 ServingGroups ready, minAvailable 2: 1 eviction allowed"
                )

            await eventually(budget_shown, timeout=30, description="DisruptionAllowed condition")
            spares = await asyncio.to_thread(_nodes, cluster, tag, ["s1", "s2", "s3"], 1)
            created += spares
            async with ReadyWatcher(kube, namespace, {"llm": 1}) as watcher:
                # Drain 1: the three pods on one node are evicted at once; one at a time is granted.
                code, out = await kubectl(
                    str(kubeconfig),
                    "drain",
                    f"{tag}-a",
                    "--ignore-daemonsets",
                    "--delete-emptydir-data",
                    "--timeout=240s",
                )
                assert code == 0, out
                assert DENIED in out, "the budget must have held evictions back"
                await wait_available(kube, namespace, "llm", 3)
                assert await nodes_of(kube, namespace, "llm") <= set(spares)
                # Drain 2: every node the groups moved to, one after the other, onto fresh nodes.
                created += await asyncio.to_thread(_nodes, cluster, tag, ["t1", "t2", "t3"], 1)
                code, out = await kubectl(
                    str(kubeconfig), "drain", *spares, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=240s"
                )
                assert code == 0, out
                await wait_available(kube, namespace, "llm", 3)
                assert not await nodes_of(kube, namespace, "llm") & {f"{tag}-a", *spares}
            assert watcher.events > 0
            assert watcher.minimum["llm"] >= 2, f"fewest ready groups seen: {watcher.minimum}"
    finally:
        for name in created:
            await asyncio.to_thread(cluster.remove_node, name)


# -- percentages, concurrency, events, condition ---------------------------------------------------------------


async def evict_all(kube_clients: list[KubeClient], namespace: str, pods: list[str]) -> dict[str, str | None]:
    """Evict each pod from its own client, all at once."""
    start = asyncio.Event()

    async def one(client: KubeClient, pod: str) -> str | None:
        await start.wait()
        return await evict(client, namespace, pod)

    tasks = [asyncio.create_task(one(client, pod)) for client, pod in zip(kube_clients, pods, strict=True)]
    await asyncio.sleep(0)
    start.set()
    return dict(zip(pods, await asyncio.gather(*tasks), strict=True))


@contextlib.asynccontextmanager
async def clients(kubeconfig: Path, count: int) -> AsyncIterator[list[KubeClient]]:
    made = [await KubeClient.from_kubeconfig(str(kubeconfig)) for _ in range(count)]
    try:
        yield made
    finally:
        for client in made:
            await client.close()


@pytest.mark.parametrize(("replicas", "min_available", "granted"), [(3, "50%", 1), (4, "60%", 1), (4, "49%", 2)])
async def test_percentages_round_up_against_replicas(
    kube: KubeClient,
    namespace: str,
    kubeconfig: Path,
    cluster: ClusterTier,
    replicas: int,
    min_available: str,
    granted: int,
) -> None:
    async with dedicated_node(cluster) as node, budget(kube, kubeconfig, namespace):
        roles = pin([role("main", gpu=0)], node)
        await kube.create(MODELSERVINGS, protected("llm", replicas, {"minAvailable": min_available}, roles), namespace)
        await wait_available(kube, namespace, "llm", replicas)
        await cordon(kube, node)  # evicted groups are not rebuilt during the test
        pods = [names[0] for names in (await group_pods(kube, namespace, "llm")).values()]
        async with clients(kubeconfig, len(pods)) as several:
            results = await evict_all(several, namespace, pods)
        assert sum(1 for r in results.values() if r is None) == granted, results
        minimum = replicas - granted
        for message in (r for r in results.values() if r is not None):
            assert f"{DENIED} llm. Current ready groups ({minimum}) <= minAvailable ({minimum})." in message


async def test_concurrent_evictions_from_several_clients_grant_exactly_the_budget(
    kube: KubeClient, namespace: str, kubeconfig: Path, cluster: ClusterTier
) -> None:
    async with dedicated_node(cluster) as node, budget(kube, kubeconfig, namespace) as (one, _):
        roles = pin([role("main", gpu=0)], node)
        await kube.create(MODELSERVINGS, protected("llm", 8, {"minAvailable": 5}, roles), namespace)
        await wait_available(kube, namespace, "llm", 8, timeout=180)
        await cordon(kube, node)  # evicted groups are not rebuilt until the records are checked
        pods = [names[0] for names in (await group_pods(kube, namespace, "llm")).values()]
        denied_before = requests_counted("denied")
        async with clients(kubeconfig, len(pods)) as several:
            results = await evict_all(several, namespace, pods)
        granted = sorted(p for p, r in results.items() if r is None)
        assert len(granted) == 3, results
        # Exactly the granted pods are recorded, and they are the pods that went.
        entries = tracker_entries(await tracker(kube, namespace, "llm"))
        assert sorted(e.trigger_pod_name for e in entries.values()) == granted
        assert requests_counted("denied") - denied_before == 5

        # The budget is visible on the ModelServing and the denials as a (coalesced) Warning event.
        async def blocked() -> bool:
            cond = await condition(kube, namespace, "llm")
            return cond.get("status") == "False" and cond.get("reason") == "InsufficientReady"

        await eventually(blocked, timeout=30, description="DisruptionAllowed False")
        events = await eventually(
            lambda: denial_events(kube, namespace), timeout=30, description="EvictionDenied event"
        )
        assert DENIED in events[0]["message"]
        assert len(events) < 5, "denials of one moment are one Event"
        # Once the evicted groups are rebuilt, their records go and the budget is back.
        await cordon(kube, node, on=False)
        await wait_available(kube, namespace, "llm", 8, timeout=180)

        async def pruned() -> bool:
            return await tracker(kube, namespace, "llm") is None

        await eventually(pruned, timeout=60, description="tracker pruned and deleted")
        cond = await eventually(
            lambda: _status_true(kube, namespace), timeout=30, description="DisruptionAllowed True again"
        )
        assert cond["message"] == "ServingGroup level: 8 of 8 ServingGroups ready, minAvailable 5: 3 evictions allowed"
        assert one.calls >= len(pods)


async def _status_true(kube: KubeClient, namespace: str) -> dict[str, Any] | None:
    cond = await condition(kube, namespace, "llm")
    return cond if cond.get("status") == "True" and "8 of 8" in cond.get("message", "") else None


# -- Role level ------------------------------------------------------------------------------------------------


async def test_role_level_protects_only_the_listed_role(
    kube: KubeClient, namespace: str, kubeconfig: Path, cluster: ClusterTier
) -> None:
    strategy = {"protectionLevel": "Role", "roleMinAvailable": {"prefill": 1}}
    async with dedicated_node(cluster) as node, budget(kube, kubeconfig, namespace):
        roles = pin([role("prefill", replicas=2, gpu=0), role("decode", replicas=2, gpu=0)], node)
        await kube.create(MODELSERVINGS, protected("pd", 2, strategy, roles), namespace)
        await wait_available(kube, namespace, "pd", 2)
        await cordon(kube, node)  # evicted instances are not rebuilt during the test
        # decode is unprotected: both instances of group 0 may go.
        assert await evict(kube, namespace, "pd-0-decode-0-0") is None
        assert await evict(kube, namespace, "pd-0-decode-1-0") is None
        # prefill keeps one ready instance per group.
        assert await evict(kube, namespace, "pd-0-prefill-0-0") is None
        message = await evict(kube, namespace, "pd-0-prefill-1-0")
        assert message is not None and message.endswith(
            f"{DENIED} pd. ServingGroup pd-0 role prefill ready instances (1) <= minAvailable (1)."
        )
        # Per group: group 1's prefill has its own budget.
        assert await evict(kube, namespace, "pd-1-prefill-1-0") is None
        entries = tracker_entries(await tracker(kube, namespace, "pd"))
        assert set(entries) == {
            f"Role/{namespace}/pd/pd-0/prefill/prefill-0",
            f"Role/{namespace}/pd/pd-1/prefill/prefill-1",
        }
        cond = await eventually(
            lambda: _role_condition(kube, namespace), timeout=30, description="Role level condition"
        )
        assert cond["status"] == "False" and "pd-0 prefill" in cond["message"]


async def _role_condition(kube: KubeClient, namespace: str) -> dict[str, Any] | None:
    cond = await condition(kube, namespace, "pd")
    return cond if cond.get("message", "").startswith("Role level") and cond.get("status") == "False" else None


# -- restart, replicas ------------------------------------------------------------------------------------------


async def test_a_restarted_manager_honours_a_grant_whose_pod_is_not_deleted_yet(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with replica(str(kubeconfig), namespace) as first:
        proxy = await RoundRobinProxy([first.port]).start()
        try:
            async with webhook_installed(kube, namespace, proxy.port, [first]):
                await kube.create(MODELSERVINGS, protected("llm", 3, {"minAvailable": 2}), namespace)
                await wait_available(kube, namespace, "llm", 3)
                pods = await group_pods(kube, namespace, "llm")
                # A PodDisruptionBudget (that nothing computes: no disruption controller here) refuses the eviction
                # *after* our webhook granted it, so the grant is recorded while the pod stays Running and Ready.
                pdb = {
                    "metadata": {"name": "hold-llm-0"},
                    "spec": {
                        "maxUnavailable": 0,
                        "selector": {"matchLabels": {"modelserving.volcano.sh/group-name": "llm-0"}},
                    },
                }
                await kube.create(PDBS, pdb, namespace)
                message = await evict(kube, namespace, pods[0][0])
                assert message is not None and DENIED not in message, message  # refused by the PDB, not by us
                assert [a.allowed for a in first.answers][-1] is True
                entries = tracker_entries(await tracker(kube, namespace, "llm"))
                assert [e.trigger_pod_name for e in entries.values()] == [pods[0][0]]
                assert pod_ready(await kube.get(PODS, pods[0][0], namespace))
        finally:
            await proxy.stop()
        # The manager is gone; a new one (no memory of the grant) takes over the same URL.
    async with replica(str(kubeconfig), namespace) as second:
        proxy.ports[:] = [second.port]
        await proxy.start()
        try:
            async with webhook_installed(kube, namespace, proxy.port, [second]):
                message = await evict(kube, namespace, pods[1][0])
                assert message is not None and f"{DENIED} llm. Current ready groups (2)" in message
                # The granted pod itself may still go (already recorded), once the PDB is out of the way.
                await kube.delete(PDBS, "hold-llm-0", namespace)

                async def granted() -> bool:  # the API server's PDB cache may still hold the PDB for a moment
                    return await evict(kube, namespace, pods[0][0]) is None

                await eventually(granted, timeout=30, interval=0.5, description="the recorded pod may go")
                assert second.answers[-1].allowed
                await wait_available(kube, namespace, "llm", 3)

                async def next_granted() -> bool:
                    return await evict(kube, namespace, pods[1][0]) is None

                await eventually(next_granted, timeout=90, interval=1, description="budget back after the rebuild")
        finally:
            await proxy.stop()


def _review(namespace: str, pod: str) -> AdmissionRequest:
    return AdmissionRequest.from_dict(
        {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "operation": "CREATE",
            "name": pod,
            "namespace": namespace,
            "object": {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": pod, "namespace": namespace},
            },
        }
    )


async def test_two_manager_replicas_never_both_spend_the_last_disruption(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with (
        replica(str(kubeconfig), namespace, leader_elect=True, identity="replica-a") as a,
        replica(str(kubeconfig), namespace, leader_elect=True, identity="replica-b") as b,
    ):
        await eventually(
            lambda: a.manager.leading.is_set() or b.manager.leading.is_set(), timeout=60, description="a leader"
        )
        proxy = await RoundRobinProxy([a.port, b.port]).start()
        try:
            async with webhook_installed(kube, namespace, proxy.port, [a, b]):
                await kube.create(MODELSERVINGS, protected("llm", 6, {"minAvailable": 3}), namespace)
                await wait_available(kube, namespace, "llm", 6)
                pods = [names[0] for names in (await group_pods(kube, namespace, "llm")).values()]
                # Both replicas decide on the same moment, straight from their handlers, for different groups:
                # the tracker's resourceVersion check lets exactly one of each pair through past the budget.
                answers = await asyncio.gather(
                    a.handler(_review(namespace, pods[0])),
                    b.handler(_review(namespace, pods[1])),
                    a.handler(_review(namespace, pods[2])),
                    b.handler(_review(namespace, pods[3])),
                )
                assert sum(answer.allowed for answer in answers) == 3, [x.to_dict("u") for x in answers]
                # Through the API server: the proxy sends each new connection to the next replica.
                calls = (a.calls, b.calls)
                for pod in pods[4:]:
                    proxy.drop_connections()
                    await asyncio.sleep(1)  # the API server notices its idle connections are gone
                    assert await evict(kube, namespace, pod) is not None  # the budget is spent
                assert a.calls > calls[0] and b.calls > calls[1], "both replicas answered"
                entries = tracker_entries(await tracker(kube, namespace, "llm"))
                assert len(entries) == 3
        finally:
            await proxy.stop()


# -- disabled, not owned ------------------------------------------------------------------------------------------


async def test_disabled_endpoint_admits_every_eviction(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with budget(kube, kubeconfig, namespace, enabled=False) as (one, _):
        await kube.create(MODELSERVINGS, protected("llm", 2, {"minAvailable": 2}), namespace)
        await wait_available(kube, namespace, "llm", 2)
        pods = [names[0] for names in (await group_pods(kube, namespace, "llm")).values()]
        for pod in pods:
            assert await evict(kube, namespace, pod) is None
        assert one.calls >= 1 + len(pods)
        assert await tracker(kube, namespace, "llm") is None
        assert await condition(kube, namespace, "llm") == {}  # no budget reconciler either


async def test_pods_not_owned_by_a_modelserving_are_not_protected(
    kube: KubeClient, namespace: str, kubeconfig: Path, cluster: ClusterTier
) -> None:
    async with budget(kube, kubeconfig, namespace) as (one, _):
        await kube.create(MODELSERVINGS, protected("llm", 1, {"minAvailable": 1}), namespace)
        await wait_available(kube, namespace, "llm", 1)
        ((owned,),) = (await group_pods(kube, namespace, "llm")).values()
        assert await evict(kube, namespace, owned) is not None  # protected: 1 of 1 must stay
        node = cluster.nodes[0].name
        spec = {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]}
        # A plain pod, and one that wears the ModelServing's labels without being controlled by it.
        labels = dict((await kube.get(PODS, owned, namespace))["metadata"]["labels"])
        await kube.create(PODS, {"metadata": {"name": "plain"}, "spec": spec}, namespace)
        await kube.create(PODS, {"metadata": {"name": "llm-0-main-0-0x", "labels": labels}, "spec": spec}, namespace)
        for name in ("plain", "llm-0-main-0-0x"):
            await eventually(lambda n=name: _running(kube, namespace, n), timeout=60, description=f"{name} running")
            assert await evict(kube, namespace, name) is None
        assert await tracker(kube, namespace, "llm") is None, "nothing was recorded"
        assert one.calls >= 4


async def _running(kube: KubeClient, namespace: str, name: str) -> bool:
    return pod_ready(await kube.get(PODS, name, namespace))


def _writes() -> float:
    return sum(
        s.value
        for m in REST_CLIENT_REQUESTS.collect()
        for s in m.samples
        if s.name.endswith("_total") and s.labels.get("method") in WRITE_METHODS
    )


async def test_restart_on_a_converged_protected_modelserving_writes_nothing(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with replica(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, protected("llm", 2, {"minAvailable": 1}), namespace)
        await wait_available(kube, namespace, "llm", 2)

        async def shown() -> bool:
            found = await conditions_by_type(kube, namespace, "llm")
            # Converged means every writer's condition is in: the budget's, and Scheduled, which follows the pods'
            # bindings a few seconds later (its reconciler gathers them, SCHEDULING_COALESCE).
            return (
                found.get("DisruptionAllowed", {}).get("reason") == "SufficientReady"
                and found.get("Scheduled", {}).get("status") == "True"
            )

        await eventually(shown, timeout=30, description="DisruptionAllowed and Scheduled conditions")
        await asyncio.sleep(3)  # let the status settle (both writers agree)
    before = _writes()
    async with replica(str(kubeconfig), namespace):
        await asyncio.sleep(5)
        assert _writes() == before, "a restarted manager wrote to the API server"
        conditions = [c["type"] for c in (await kube.get(MODELSERVINGS, "llm", namespace))["status"]["conditions"]]
        # server-side apply: any order; Scheduled is the gang reconciler's
        assert sorted(conditions) == ["Available", "DisruptionAllowed", "Progressing", "Scheduled"]
        # Without an evictionStrategy the budget condition goes; the other reconciler's conditions stay.
        await kube.patch(
            MODELSERVINGS, "llm", [{"op": "remove", "path": "/spec/rolloutStrategy"}], namespace, patch_type="json"
        )

        async def removed() -> bool:
            obj = await kube.get(MODELSERVINGS, "llm", namespace)
            return sorted(c["type"] for c in obj["status"]["conditions"]) == ["Available", "Progressing", "Scheduled"]

        await eventually(removed, timeout=30, description="DisruptionAllowed removed")
