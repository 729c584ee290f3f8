"""Rolling updates end to end in the cluster tier (kwok pods, Volcano gang scheduling).

Re-expresses Kthena's rollout scenarios (image change lifecycle, maxUnavailable, bad image stall, partition
boundary / protected group keeps its revision / scale during a partitioned update, role-based update keeps other
roles' pods, role maxUnavailable with a bad image, role partition) plus surge availability, undo, and a manager
killed (SIGKILL) at several points of a rollout. A sampler lists the pods every 0.2 s and records the fewest
complete-and-ready ServingGroups it ever saw: the availability claims are about what the cluster showed, not
about the status the controller wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import PODS
from kthena_py.testing.controlplane.kwokstages import BAD_IMAGE_PREFIX
from kthena_py.testing.wait import eventually

from .msutil import (
    is_ready,
    live_pods,
    modelserving,
    pods,
    role,
    running_manager,
    start_manager_process,
    wait_available,
)

pytestmark = pytest.mark.cluster

GROUP = "modelserving.volcano.sh/group-name"
BAD = f"{BAD_IMAGE_PREFIX}engine:missing"


@dataclass
class Sampler:
    """Counts complete, ready ServingGroups of one ModelServing from its pods, every ``interval`` seconds."""

    kube: KubeClient
    namespace: str
    name: str
    per_group: int
    interval: float = 0.2
    lowest: int | None = None
    samples: int = 0
    seen_groups: set[str] = field(default_factory=set)

    async def ready_groups(self) -> int:
        by_group: dict[str, list[KubeObject]] = {}
        for pod in await pods(self.kube, self.namespace, self.name):
            by_group.setdefault(pod["metadata"]["labels"][GROUP], []).append(pod)
        self.seen_groups |= set(by_group)
        return sum(
            1
            for group in by_group.values()
            if len(group) >= self.per_group
            and all(is_ready(p) and not p["metadata"].get("deletionTimestamp") for p in group)
        )

    async def run(self) -> None:
        while True:
            ready = await self.ready_groups()
            self.samples += 1
            self.lowest = ready if self.lowest is None else min(self.lowest, ready)
            await asyncio.sleep(self.interval)


@contextlib.asynccontextmanager
async def sampling(kube: KubeClient, namespace: str, name: str, per_group: int) -> AsyncIterator[Sampler]:
    sampler = Sampler(kube, namespace, name, per_group)
    task = asyncio.create_task(sampler.run())
    try:
        yield sampler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _rolling(name: str, replicas: int, roles: list[dict[str, Any]], **config: Any) -> KubeObject:
    doc = modelserving(name, replicas=replicas, roles=roles)
    doc["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": config}
    return doc


async def _set_image(kube: KubeClient, namespace: str, name: str, image: str, role_index: int | None = None) -> None:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    roles = ms["spec"]["template"]["roles"]
    for i, r in enumerate(roles):
        if role_index is not None and i != role_index:
            continue
        r["entryTemplate"]["spec"]["containers"][0]["image"] = image
        if r.get("workerTemplate"):
            r["workerTemplate"]["spec"]["containers"][0]["image"] = image
    await kube.patch(MODELSERVINGS, name, {"spec": {"template": {"roles": roles}}}, namespace)


async def _images(kube: KubeClient, namespace: str, name: str) -> dict[str, str]:
    live = await live_pods(kube, namespace, name)
    return {n: p["spec"]["containers"][0]["image"] for n, p in sorted(live.items())}


async def _condition(kube: KubeClient, namespace: str, name: str, type_: str = "UpdateInProgress") -> dict[str, Any]:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    for c in (ms.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return {}


async def _wait_reason(
    kube: KubeClient, namespace: str, name: str, reason: str, timeout: float = 180
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        c = await _condition(kube, namespace, name)
        return c if c.get("reason") == reason else None

    result: dict[str, Any] = await eventually(check, timeout=timeout, description=f"{name} UpdateInProgress {reason}")
    return result


async def _wait_images(kube: KubeClient, namespace: str, name: str, want: dict[str, str], timeout: float = 180) -> None:
    async def check() -> bool:
        have = await _images(kube, namespace, name)
        assert have == want, have
        return True

    await eventually(check, timeout=timeout, description=f"{name} pods {want}")


async def test_image_change_rolls_every_group_within_max_unavailable(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _rolling("mu", 4, [role("decode", workers=1)], maxUnavailable=2), namespace)
        before = (await wait_available(kube, namespace, "mu", 4))["status"]
        async with sampling(kube, namespace, "mu", per_group=2) as sampler:
            await _set_image(kube, namespace, "mu", "nginx:1.28")
            done = await _wait_reason(kube, namespace, "mu", "RolloutComplete")
        assert done["status"] == "False"
        assert sampler.lowest is not None and sampler.lowest >= 2, sampler.lowest
        images = await _images(kube, namespace, "mu")
        assert set(images.values()) == {"nginx:1.28"}
        assert {n.rsplit("-", 3)[0] for n in images} == {f"mu-{g}" for g in range(4)}
        status = (await wait_available(kube, namespace, "mu", 4))["status"]
        assert status["currentRevision"] == status["updateRevision"] != before["currentRevision"]
        assert status["updatedReplicas"] == 4
        # Both reconcilers' conditions survive each other's writes.
        types = {c["type"] for c in status["conditions"]}
        assert {"Available", "Progressing", "UpdateInProgress"} <= types
        # `kubectl wait` on the rollout finishing.
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "-n",
            namespace,
            "wait",
            "--for=condition=UpdateInProgress=false",
            "modelserving/mu",
            "--timeout=30s",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()


async def test_bad_image_stalls_then_fixing_it_resumes(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _rolling("bad", 4, [role("decode")], maxUnavailable=2), namespace)
        await wait_available(kube, namespace, "bad", 4)
        async with sampling(kube, namespace, "bad", per_group=1) as sampler:
            await _set_image(kube, namespace, "bad", BAD)
            stalled = await _wait_reason(kube, namespace, "bad", "UpdateStalled")
            assert "ImagePullBackOff" in stalled["message"]
            await asyncio.sleep(8)  # the rollout stays stalled: no further group is taken down
            images = await _images(kube, namespace, "bad")
            assert sorted(images.values()).count(BAD) == 2
            assert sampler.lowest == 2
            await _set_image(kube, namespace, "bad", "nginx:1.28")
            await _wait_reason(kube, namespace, "bad", "RolloutComplete")
        assert set((await _images(kube, namespace, "bad")).values()) == {"nginx:1.28"}
        assert sampler.lowest == 2


async def test_partition_boundary_protected_group_and_scaling(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _rolling("pt", 4, [role("decode")], partition=2), namespace)
        old = (await wait_available(kube, namespace, "pt", 4))["status"]["currentRevision"]
        await _set_image(kube, namespace, "pt", "nginx:1.28")
        reached = await _wait_reason(kube, namespace, "pt", "PartitionReached")
        assert reached["status"] == "False" and "pt-0" in reached["message"] and "pt-1" in reached["message"]
        want = {"pt-0-decode-0-0": "nginx:1.27", "pt-1-decode-0-0": "nginx:1.27"}
        want |= {"pt-2-decode-0-0": "nginx:1.28", "pt-3-decode-0-0": "nginx:1.28"}
        await _wait_images(kube, namespace, "pt", want)
        status = (await wait_available(kube, namespace, "pt", 4))["status"]
        assert status["currentRevision"] == old != status["updateRevision"]
        # A protected group's pod is deleted: it comes back on its historical revision.
        await kube.delete(PODS, "pt-1-decode-0-0", namespace)
        await _wait_images(kube, namespace, "pt", want)
        # Scale up during the partitioned update: the new group gets the update revision.
        await kube.set_scale(MODELSERVINGS, "pt", namespace, 5)
        await _wait_images(kube, namespace, "pt", want | {"pt-4-decode-0-0": "nginx:1.28"})
        # Scale down: updated groups (outside the partition) go first, protected ones stay.
        await kube.set_scale(MODELSERVINGS, "pt", namespace, 3)
        await _wait_images(kube, namespace, "pt", {k: v for k, v in want.items() if not k.startswith("pt-3")})
        assert (await wait_available(kube, namespace, "pt", 3))["status"]["currentRevision"] == old


async def test_surge_keeps_every_group_available(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        doc = _rolling("sg", 3, [role("decode", workers=1)], maxUnavailable=0, maxSurge=1)
        await kube.create(MODELSERVINGS, doc, namespace)
        await wait_available(kube, namespace, "sg", 3)
        async with sampling(kube, namespace, "sg", per_group=2) as sampler:
            await _set_image(kube, namespace, "sg", "nginx:1.28")
            await _wait_reason(kube, namespace, "sg", "RolloutComplete")
        assert sampler.lowest == 3
        assert "sg-3" in sampler.seen_groups  # the surge group existed
        images = await _images(kube, namespace, "sg")
        assert {n.rsplit("-", 3)[0] for n in images} == {"sg-0", "sg-1", "sg-2"}
        assert set(images.values()) == {"nginx:1.28"}


async def test_undo_by_reverting_the_template(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _rolling("un", 2, [role("decode")]), namespace)
        first = (await wait_available(kube, namespace, "un", 2))["status"]["currentRevision"]
        await _set_image(kube, namespace, "un", "nginx:1.28")
        await _wait_reason(kube, namespace, "un", "RolloutComplete")
        await _set_image(kube, namespace, "un", "nginx:1.27")
        await _wait_images(kube, namespace, "un", {"un-0-decode-0-0": "nginx:1.27", "un-1-decode-0-0": "nginx:1.27"})
        await _wait_reason(kube, namespace, "un", "RolloutComplete")
        assert (await wait_available(kube, namespace, "un", 2))["status"]["currentRevision"] == first


def _role_rolling(name: str, prefill: dict[str, Any]) -> KubeObject:
    doc = modelserving(name, replicas=1, roles=[prefill, role("decode", workers=1)])
    doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    return doc


async def test_role_rolling_update_keeps_other_roles_pods(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _role_rolling("rr", role("prefill", replicas=2)), namespace)
        await wait_available(kube, namespace, "rr", 1)
        decode = {n: p["metadata"]["uid"] for n, p in (await live_pods(kube, namespace, "rr")).items() if "decode" in n}
        await _set_image(kube, namespace, "rr", "nginx:1.28", role_index=0)
        await _wait_reason(kube, namespace, "rr", "RolloutComplete")
        live = await live_pods(kube, namespace, "rr")
        assert {n: p["metadata"]["uid"] for n, p in live.items() if "decode" in n} == decode
        assert {p["spec"]["containers"][0]["image"] for n, p in live.items() if "prefill" in n} == {"nginx:1.28"}


async def test_role_max_unavailable_with_bad_image_and_role_partition(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        prefill = role("prefill", replicas=4) | {"maxUnavailable": 2}
        await kube.create(MODELSERVINGS, _role_rolling("rb", prefill), namespace)
        await wait_available(kube, namespace, "rb", 1)
        decode = {n: p["metadata"]["uid"] for n, p in (await live_pods(kube, namespace, "rb")).items() if "decode" in n}
        await _set_image(kube, namespace, "rb", BAD, role_index=0)
        await _wait_reason(kube, namespace, "rb", "UpdateStalled")
        await asyncio.sleep(5)
        live = await live_pods(kube, namespace, "rb")
        prefill_pods = {n: p for n, p in live.items() if "prefill" in n}
        old_ready = [
            p for p in prefill_pods.values() if p["spec"]["containers"][0]["image"] == "nginx:1.27" and is_ready(p)
        ]
        assert len(old_ready) >= 2
        assert {n: p["metadata"]["uid"] for n, p in live.items() if "decode" in n} == decode
        # Role partition: protect prefill-0 and prefill-1, fix the image: only 2 and 3 move.
        ms = await kube.get(MODELSERVINGS, "rb", namespace)
        roles = ms["spec"]["template"]["roles"]
        roles[0]["partition"] = 2
        roles[0]["entryTemplate"]["spec"]["containers"][0]["image"] = "nginx:1.28"
        await kube.patch(MODELSERVINGS, "rb", {"spec": {"template": {"roles": roles}}}, namespace)
        await _wait_reason(kube, namespace, "rb", "PartitionReached")
        images = await _images(kube, namespace, "rb")
        assert {k: v for k, v in images.items() if "prefill" in k} == {
            "rb-0-prefill-0-0": "nginx:1.27",
            "rb-0-prefill-1-0": "nginx:1.27",
            "rb-0-prefill-2-0": "nginx:1.28",
            "rb-0-prefill-3-0": "nginx:1.28",
        }


async def _start_manager(kubeconfig: Path, namespace: str) -> asyncio.subprocess.Process:
    return await start_manager_process(kubeconfig, namespace)


async def test_manager_killed_at_several_points_of_a_rollout(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    proc = await _start_manager(kubeconfig, namespace)
    try:
        await kube.create(MODELSERVINGS, _rolling("kl", 4, [role("decode", workers=1)], maxUnavailable=1), namespace)
        await wait_available(kube, namespace, "kl", 4)
        async with sampling(kube, namespace, "kl", per_group=2) as sampler:
            await _set_image(kube, namespace, "kl", "nginx:1.28")
            for delay in (0.5, 1.5, 3.0):
                await asyncio.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
                proc = await _start_manager(kubeconfig, namespace)
            await _wait_reason(kube, namespace, "kl", "RolloutComplete", timeout=240)
        assert sampler.lowest is not None and sampler.lowest >= 3, sampler.lowest
        images = await _images(kube, namespace, "kl")
        assert set(images.values()) == {"nginx:1.28"} and len(images) == 8
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
