"""ModelServing end to end in the cluster tier: pods really run on kwok nodes, Volcano gang-schedules.

Re-expresses Kthena's e2e scenarios (lifecycle, scale, recovery, deletion cost, not-ready first,
restart) plus gang, minRoleReplicas, None recovery, grace period, restart-is-a-no-op and PodGroup
recreation.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kthena_py.controllers.modelserving.gang import CONTROLLER as GANG_CONTROLLER
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.metrics import REST_CLIENT_REQUESTS, WRITE_METHODS
from kthena_py.kube.resources import CONTROLLER_REVISIONS, EVENTS, PODGROUPS, PODS, SERVICES
from kthena_py.plan.modelserving.offline.render import PLACEHOLDER_UID
from kthena_py.runtime.metrics import REGISTRY
from kthena_py.testing.controlplane import find_kubectl
from kthena_py.testing.wait import eventually

from .msutil import (
    event_reasons,
    is_ready,
    live_pods,
    modelserving,
    podgroups,
    pods,
    role,
    running_manager,
    services,
    wait_available,
)

pytestmark = pytest.mark.cluster

PD_PODS = {
    f"llm-{g}-{n}" for g in (0, 1) for n in ("prefill-0-0", "decode-0-0", "decode-0-1", "decode-1-0", "decode-1-1")
}


def _writes() -> float:
    return sum(
        s.value
        for m in REST_CLIENT_REQUESTS.collect()
        for s in m.samples
        if s.name.endswith("_total") and s.labels.get("method") in WRITE_METHODS
    )


async def test_pd_lifecycle(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, modelserving("llm", replicas=2), namespace)
        ms = await wait_available(kube, namespace, "llm", 2)
        live = await live_pods(kube, namespace, "llm")
        assert set(live) == PD_PODS
        assert all(is_ready(p) for p in live.values())
        # `kubectl wait` works on the Available condition.
        proc = await asyncio.create_subprocess_exec(
            str(find_kubectl()),
            "--kubeconfig",
            str(kubeconfig),
            "-n",
            namespace,
            "wait",
            "--for=condition=Available",
            "modelserving/llm",
            "--timeout=30s",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        entry, worker = live["llm-0-decode-1-0"], live["llm-0-decode-1-1"]
        labels = entry["metadata"]["labels"]
        assert labels["modelserving.volcano.sh/name"] == "llm"
        assert labels["modelserving.volcano.sh/group-name"] == "llm-0"
        assert labels["modelserving.volcano.sh/role"] == "decode"
        assert labels["modelserving.volcano.sh/role-id"] == "decode-1"
        assert labels["modelserving.volcano.sh/entry"] == "true"
        assert labels["modelserving.volcano.sh/revision"] == ms["status"]["updateRevision"]
        assert labels["app"] == "decode"
        assert "modelserving.volcano.sh/entry" not in worker["metadata"]["labels"]
        assert entry["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "llm-0"
        assert entry["metadata"]["annotations"]["volcano.sh/task-spec"] == "decode-1"
        env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0]["env"]}
        assert env == {"GROUP_SIZE": "2", "ENTRY_ADDRESS": f"llm-0-decode-1-0.{namespace}", "WORKER_INDEX": "1"}
        assert entry["spec"]["schedulerName"] == "volcano"
        assert entry["metadata"]["ownerReferences"][0]["uid"] == ms["metadata"]["uid"]
        # One headless Service per role instance that has workers; PodGroups per group.
        assert await services(kube, namespace, "llm") == [f"llm-{g}-decode-{r}-0" for g in (0, 1) for r in (0, 1)]
        svc = await kube.get(SERVICES, "llm-0-decode-0-0", namespace)
        assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
        pgs = await podgroups(kube, namespace)
        assert sorted(pgs) == ["llm-0", "llm-1"]
        assert pgs["llm-0"]["spec"]["minMember"] == 5

        async def pg_running() -> bool:
            return (await kube.get(PODGROUPS, "llm-0", namespace)).get("status", {}).get("phase") == "Running"

        await eventually(pg_running, timeout=60, description="PodGroup Running")
        st = ms["status"]
        assert st["labelSelector"] == (
            "modelserving.volcano.sh/entry=true,modelserving.volcano.sh/name=llm,"
            "modelserving.volcano.sh/role-id=prefill-0,modelserving.volcano.sh/role=prefill"
        )
        assert st["updatedReplicas"] == 2 and st["currentRevision"] == st["updateRevision"]
        assert st["currentReplicas"] == 2  # Kthena: 0 until Available, then = updatedReplicas
        scale = await kube.get_scale(MODELSERVINGS, "llm", namespace)
        assert scale["status"]["replicas"] == 2 and "entry=true" in scale["status"]["selector"]

        instances = [(g, "prefill", 0) for g in (0, 1)] + [(g, "decode", r) for g in (0, 1) for r in (0, 1)]

        def sentences(phase: str) -> set[str]:
            return {f"Role {role}/{role}-{r} in ServingGroup llm-{g} is now {phase}" for g, role, r in instances}

        async def lifecycle_events() -> bool:
            # Events are written in the background (kthena_py's own reasons joined for up to a second). Kthena's
            # tools select them by source component, and read one role instance per Event, in Kthena's words.
            found = await kube.list(EVENTS, namespace, field_selector="source=modelserving-controller")
            by_reason: dict[str, set[str]] = {}
            for e in found.items:
                assert e["reportingComponent"] == "modelserving-controller"
                by_reason.setdefault(e["reason"], set()).add(e["message"])
            return (
                by_reason.get("RoleCreating") == sentences("Creating")
                and by_reason.get("RoleRunning") == sentences("Running")
                and {"ServingGroupCreating", "ServingGroupRunning"} <= set(by_reason)
            )

        await eventually(lifecycle_events, timeout=60, description="creating and running events")
        # What the controller created equals what `kthena-py render` prints, server-set fields aside.
        await _assert_matches_render(kube, namespace, ms)
        # Deletion cascades to everything through ownerReferences (garbage collector).
        await kube.delete(MODELSERVINGS, "llm", namespace)
        await eventually(lambda: _none_left(kube, namespace), timeout=120, description="children garbage-collected")


async def _none_left(kube: KubeClient, namespace: str) -> bool:
    left = [
        *(await kube.list(PODS, namespace)).items,
        *(await kube.list(PODGROUPS, namespace)).items,
        *[s for s in (await kube.list(SERVICES, namespace)).items],
    ]
    return not left


async def test_scale_groups_and_roles(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(
            MODELSERVINGS, modelserving("sc", replicas=1, roles=[role("decode", 1, workers=1)]), namespace
        )
        await wait_available(kube, namespace, "sc", 1)
        await kube.set_scale(MODELSERVINGS, "sc", namespace, 3)
        await wait_available(kube, namespace, "sc", 3)
        groups = {
            p["metadata"]["labels"]["modelserving.volcano.sh/group-name"] for p in await pods(kube, namespace, "sc")
        }
        assert groups == {"sc-0", "sc-1", "sc-2"}
        assert len(await services(kube, namespace, "sc")) == 3
        await kube.set_scale(MODELSERVINGS, "sc", namespace, 1)
        await wait_available(kube, namespace, "sc", 1)
        await eventually(lambda: _names(kube, namespace, "sc", {"sc-0-decode-0-0", "sc-0-decode-0-1"}), timeout=60)
        assert await services(kube, namespace, "sc") == ["sc-0-decode-0-0"]
        assert sorted(await podgroups(kube, namespace)) == ["sc-0"]
        # Role replicas: 1 -> 3 -> 1 inside the group.
        await kube.patch(
            MODELSERVINGS,
            "sc",
            [{"op": "replace", "path": "/spec/template/roles/0/replicas", "value": 3}],
            namespace,
            patch_type="json",
        )
        await eventually(lambda: _count_ready(kube, namespace, "sc", 6), timeout=120)
        await wait_available(kube, namespace, "sc", 1)
        await kube.patch(
            MODELSERVINGS,
            "sc",
            [{"op": "replace", "path": "/spec/template/roles/0/replicas", "value": 1}],
            namespace,
            patch_type="json",
        )
        await eventually(lambda: _names(kube, namespace, "sc", {"sc-0-decode-0-0", "sc-0-decode-0-1"}), timeout=60)


async def _names(kube: KubeClient, namespace: str, ms: str, expected: set[str]) -> bool:
    return set(await live_pods(kube, namespace, ms)) == expected


async def _count_ready(kube: KubeClient, namespace: str, ms: str, n: int) -> bool:
    live = await live_pods(kube, namespace, ms)
    return len(live) == n and all(is_ready(p) for p in live.values())


async def _uids(kube: KubeClient, namespace: str, ms: str) -> dict[str, str]:
    return {n: p["metadata"]["uid"] for n, p in (await live_pods(kube, namespace, ms)).items()}


@pytest.mark.parametrize(
    ("policy", "replaced"),
    [
        ("RoleRecreate", {"rc-0-decode-1-0", "rc-0-decode-1-1"}),
        (
            "ServingGroupRecreate",
            {"rc-0-prefill-0-0", "rc-0-decode-0-0", "rc-0-decode-0-1", "rc-0-decode-1-0", "rc-0-decode-1-1"},
        ),
        ("None", {"rc-0-decode-1-1"}),
    ],
)
async def test_recovery_policies(
    kube: KubeClient, namespace: str, kubeconfig: Path, policy: str, replaced: set[str]
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, modelserving("rc", replicas=1, recoveryPolicy=policy), namespace)
        await wait_available(kube, namespace, "rc", 1)
        before = await _uids(kube, namespace, "rc")
        await kube.delete(PODS, "rc-0-decode-1-1", namespace)

        async def recovered() -> bool:
            now = await _uids(kube, namespace, "rc")
            return set(now) == set(before) and {n for n in now if now[n] != before[n]} == replaced

        await eventually(recovered, timeout=120, description=f"{policy} replaced exactly {sorted(replaced)}")
        await wait_available(kube, namespace, "rc", 1)
        # Settled: nothing else gets recreated afterwards (one recreate per failure).
        after = await _uids(kube, namespace, "rc")
        await asyncio.sleep(3)
        assert await _uids(kube, namespace, "rc") == after


async def test_service_and_podgroup_recreated(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, modelserving("sv", replicas=1), namespace)
        await wait_available(kube, namespace, "sv", 1)
        svc_uid = (await kube.get(SERVICES, "sv-0-decode-0-0", namespace))["metadata"]["uid"]
        pg_uid = (await kube.get(PODGROUPS, "sv-0", namespace))["metadata"]["uid"]
        pods_before = await _uids(kube, namespace, "sv")
        await kube.delete(SERVICES, "sv-0-decode-0-0", namespace)
        await kube.delete(PODGROUPS, "sv-0", namespace)

        async def back() -> bool:
            try:
                s = await kube.get(SERVICES, "sv-0-decode-0-0", namespace)
                p = await kube.get(PODGROUPS, "sv-0", namespace)
            except Exception:
                return False
            return s["metadata"]["uid"] != svc_uid and p["metadata"]["uid"] != pg_uid

        await eventually(back, timeout=60)
        assert await _uids(kube, namespace, "sv") == pods_before
        await wait_available(kube, namespace, "sv", 1)


async def test_scale_down_prefers_not_ready_then_low_deletion_cost(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, modelserving("bp", replicas=4, roles=[role("decode")]), namespace)
        await wait_available(kube, namespace, "bp", 4)
        # Group 3 (highest ordinal) is expensive to delete; group 1 is made not ready.
        await kube.patch(
            PODS,
            "bp-3-decode-0-0",
            {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "100"}}},
            namespace,
        )
        pod = await kube.get(PODS, "bp-1-decode-0-0", namespace, subresource="status")
        conds = [
            {**c, "status": "False"} if c["type"] in ("Ready", "ContainersReady") else c
            for c in pod["status"]["conditions"]
        ]
        await kube.patch(PODS, "bp-1-decode-0-0", {"status": {"conditions": conds}}, namespace, subresource="status")
        await eventually(lambda: _available(kube, namespace, "bp", 3), timeout=60, description="group 1 seen not ready")
        await kube.set_scale(MODELSERVINGS, "bp", namespace, 2)
        # Not ready first (group 1), then the cheaper of groups 0 and 2 with the higher ordinal (2).
        await eventually(lambda: _names(kube, namespace, "bp", {"bp-0-decode-0-0", "bp-3-decode-0-0"}), timeout=60)


async def _available(kube: KubeClient, namespace: str, name: str, n: int) -> bool:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    return (ms.get("status") or {}).get("availableReplicas") == n


async def test_gang_all_or_nothing_and_min_role_replicas(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    # 4 kwok nodes x 8 GPUs = 32 GPUs. 3 instances x (entry + 2 workers) x 4 GPUs = 36: does not fit.
    big = [role("decode", replicas=3, workers=2, gpu=4)]
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, modelserving("gang", replicas=1, roles=big), namespace)
        await eventually(lambda: _count(kube, namespace, "gang", 9), timeout=60)
        pg = await kube.get(PODGROUPS, "gang-0", namespace)
        assert pg["spec"]["minMember"] == 9
        await asyncio.sleep(8)  # many scheduler cycles (500 ms each)
        assert not [p for p in await pods(kube, namespace, "gang") if p["spec"].get("nodeName")]
        await kube.delete(MODELSERVINGS, "gang", namespace)
        await eventually(lambda: _count(kube, namespace, "gang", 0), timeout=120)
        # With minRoleReplicas 2, a partial group (2 of 3 instances = 6 pods, 24 GPUs) may start.
        await kube.create(
            MODELSERVINGS,
            modelserving("part", replicas=1, roles=big, gangPolicy={"minRoleReplicas": {"decode": 2}}),
            namespace,
        )
        await eventually(lambda: _bound_at_least(kube, namespace, "part", 6), timeout=120)
        pg = await kube.get(PODGROUPS, "part-0", namespace)
        assert pg["spec"]["minMember"] == 6
        ms = await kube.get(MODELSERVINGS, "part", namespace)
        assert ms["status"]["availableReplicas"] == 0


async def _count(kube: KubeClient, namespace: str, ms: str, n: int) -> bool:
    return len(await live_pods(kube, namespace, ms)) == n


async def _bound_at_least(kube: KubeClient, namespace: str, ms: str, n: int) -> bool:
    return len([p for p in (await live_pods(kube, namespace, ms)).values() if is_ready(p)]) >= n


async def test_grace_period_leaves_a_recovering_pod_alone(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        spec = modelserving("gr", replicas=1, roles=[role("decode", workers=1)], restartGracePeriodSeconds=6)
        await kube.create(MODELSERVINGS, spec, namespace)
        await wait_available(kube, namespace, "gr", 1)
        before = await _uids(kube, namespace, "gr")
        # A container restarts and the pod is not ready for a moment, then recovers inside the grace period.
        await _set_unhealthy(kube, namespace, "gr-0-decode-0-1", restarts=1, ready=False)
        await asyncio.sleep(2)
        await _set_unhealthy(kube, namespace, "gr-0-decode-0-1", restarts=1, ready=True)
        await asyncio.sleep(7)
        assert await _uids(kube, namespace, "gr") == before
        # Unhealthy for longer than the grace period: the role instance is recreated (RoleRecreate).
        await _set_unhealthy(kube, namespace, "gr-0-decode-0-1", restarts=2, ready=False)

        async def recreated() -> bool:
            now = await _uids(kube, namespace, "gr")
            return set(now) == set(before) and all(now[n] != before[n] for n in now)

        await eventually(recreated, timeout=90)
        await wait_available(kube, namespace, "gr", 1)


async def _set_unhealthy(kube: KubeClient, namespace: str, name: str, *, restarts: int, ready: bool) -> None:
    pod = await kube.get(PODS, name, namespace, subresource="status")
    status = pod["status"]
    flag = "True" if ready else "False"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status["conditions"] = [
        {**c, "status": flag, "lastTransitionTime": now} if c["type"] in ("Ready", "ContainersReady") else c
        for c in status["conditions"]
    ]
    for cs in status.get("containerStatuses") or []:
        cs["restartCount"] = restarts
        cs["ready"] = ready
    await kube.patch(PODS, name, {"status": status}, namespace, subresource="status")


async def test_restart_mid_creation_then_restart_is_a_no_op(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    roles = [role("prefill", replicas=1, workers=1), role("decode", replicas=1, workers=1)]
    expected = {f"mc-{g}-{r}-0-{i}" for g in range(5) for r in ("prefill", "decode") for i in (0, 1)}
    async with running_manager(str(kubeconfig), namespace, workers=1):
        await kube.create(MODELSERVINGS, modelserving("mc", replicas=5, roles=roles), namespace)
        await eventually(lambda: _at_least(kube, namespace, "mc", 3), timeout=60)
    # The first manager was stopped in the middle of creating; a new one finishes the job.
    async with running_manager(str(kubeconfig), namespace):
        await wait_available(kube, namespace, "mc", 5, timeout=180)
        all_pods = await pods(kube, namespace, "mc")
        assert sorted(p["metadata"]["name"] for p in all_pods) == sorted(expected)
        await eventually(lambda: _idle(kube, namespace, "mc"), timeout=60, description="Progressing=False")
    # Converged: a restarted manager makes no write at all.
    before = _writes()
    async with running_manager(str(kubeconfig), namespace):
        await asyncio.sleep(10)
        assert _writes() == before, "a restarted manager wrote to the API server"


async def _idle(kube: KubeClient, namespace: str, name: str) -> bool:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    conds = {c["type"]: c["status"] for c in (ms.get("status") or {}).get("conditions") or []}
    # Scheduled: the gang reconciler, which follows pod binding, has caught up too.
    return conds.get("Progressing") == "False" and conds.get("Available") == "True" and conds.get("Scheduled") == "True"


async def _at_least(kube: KubeClient, namespace: str, ms: str, n: int) -> bool:
    return len(await live_pods(kube, namespace, ms)) >= n


async def test_other_scheduler_gets_no_podgroups(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        spec = modelserving("ds", replicas=1, roles=[role("decode")])
        spec["spec"]["schedulerName"] = "default-scheduler"
        await kube.create(MODELSERVINGS, spec, namespace)
        await eventually(lambda: _count(kube, namespace, "ds", 1), timeout=60)
        await asyncio.sleep(2)
        assert await podgroups(kube, namespace) == {}
        pod = (await pods(kube, namespace, "ds"))[0]
        assert "scheduling.k8s.io/group-name" not in (pod["metadata"].get("annotations") or {})
        assert pod["spec"]["schedulerName"] == "default-scheduler"


def _subset(want: object, have: object, path: str = "") -> list[str]:
    """Where ``want`` is not contained in ``have`` (dicts: keys of want; lists: same length, elementwise)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [f"{path}: {have!r} is not an object"]
        return [d for k, v in want.items() for d in _subset(v, have.get(k), f"{path}.{k}")]
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return [f"{path}: {have!r} != {want!r}"]
        return [d for i, (w, h) in enumerate(zip(want, have, strict=True)) for d in _subset(w, h, f"{path}[{i}]")]
    return [] if want == have else [f"{path}: {have!r} != {want!r}"]


async def _assert_matches_render(kube: KubeClient, namespace: str, ms: dict[str, object]) -> None:
    doc = modelserving("llm", replicas=2)
    doc["metadata"]["namespace"] = namespace
    doc.update(apiVersion="workload.serving.volcano.sh/v1alpha1", kind="ModelServing")
    proc = await asyncio.create_subprocess_exec(
        "kthena-py",
        "render",
        "-f",
        "-",
        "-o",
        "json",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(json.dumps(doc).encode())
    assert proc.returncode == 0, err.decode()
    rendered = json.loads(out.replace(PLACEHOLDER_UID.encode(), ms["metadata"]["uid"].encode()))["items"]  # type: ignore[index]
    kinds = {"Pod": PODS, "Service": SERVICES, "PodGroup": PODGROUPS, "ControllerRevision": CONTROLLER_REVISIONS}
    live: dict[tuple[str, str], dict[str, object]] = {}
    for kind, rt in kinds.items():
        for o in (await kube.list(rt, namespace)).items:
            live[(kind, o["metadata"]["name"])] = o
    assert {(o["kind"], o["metadata"]["name"]) for o in rendered} == set(live)
    for o in rendered:
        diffs = _subset(o, live[(o["kind"], o["metadata"]["name"])])
        assert not diffs, f"{o['kind']}/{o['metadata']['name']}: {diffs[:5]}"


async def test_burst_of_modelservings_never_recreates_healthy_units(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    # Many concurrent reconciles while the informer lags behind our own writes: a pod just created
    # must never be taken for a missing one (which would recreate a healthy role instance).
    roles = [role("prefill", replicas=1, workers=1, gpu=0), role("decode", replicas=1, workers=1, gpu=0)]
    n = 30
    echoes_before = _gang_echoes_skipped()
    async with running_manager(str(kubeconfig), namespace, workers=64):
        await asyncio.gather(
            *(
                kube.create(MODELSERVINGS, modelserving(f"burst-{i}", replicas=1, roles=roles), namespace)
                for i in range(n)
            )
        )

        async def all_available() -> bool:
            items = (await kube.list(MODELSERVINGS, namespace)).items
            return sum((m.get("status") or {}).get("availableReplicas") == 1 for m in items) == n

        await eventually(all_available, timeout=240, description="every burst ModelServing available")
    reasons = await event_reasons(kube, namespace)
    assert "RoleRecreating" not in reasons and "ServingGroupRecreating" not in reasons
    assert reasons.count("ServingGroupCreating") == n
    # The gang reconciler was not woken by the watch echoes of the n PodGroups it created (one each). An echo whose
    # watch event outran the create's answer still wakes it (200 ModelServings in bench/converge.py: 6 of 400).
    echoes = _gang_echoes_skipped() - echoes_before
    assert n // 2 <= echoes <= n, echoes


def _gang_echoes_skipped() -> float:
    labels = {"controller": GANG_CONTROLLER}
    return REGISTRY.get_sample_value("kthena_modelserving_echoes_skipped_total", labels) or 0.0


async def test_duplicate_host_alias_ips_reach_the_pods(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    """Kthena's e2e TestModelServingWithDuplicateHostAliases: two hostAliases entries sharing an IP are accepted
    by the CRD and the pods run with both (the Pod API accepts them with a warning)."""
    aliases = [
        {"ip": "10.1.2.3", "hostnames": ["test.com", "example.com"]},
        {"ip": "10.1.2.3", "hostnames": ["test.org"]},
    ]
    server = role("server", gpu=0)
    server["entryTemplate"]["spec"]["hostAliases"] = aliases
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, modelserving("aliases", replicas=1, roles=[server]), namespace)
        await wait_available(kube, namespace, "aliases", 1)
        live = await live_pods(kube, namespace, "aliases")
        assert set(live) == {"aliases-0-server-0-0"}
        for pod in live.values():
            assert is_ready(pod)
            assert pod["spec"]["hostAliases"] == aliases
