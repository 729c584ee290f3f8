"""In-place updates and coordinated role rollouts end to end in the cluster tier (kwok pods, Volcano gang scheduling).

kwok reflects an image patch on a running pod the way the kubelet does (the container's status reports the new
image, ``restartCount`` + 1, the pod turns not Ready, then Ready again), so the tests below see the same pod
lifecycle a real node would show. Samplers list the pods every 0.2 s: claims about what the cluster showed are
checked on those samples, not on the status the controller wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kthena_py.api.modelserving import ModelServing
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.objects import KubeObject
from kthena_py.kube.resources import EVENTS, NODES, PODS
from kthena_py.plan.modelserving.core.revision import revision_data, role_template_hash
from kthena_py.runtime.metrics import REGISTRY
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

STATE = "modelserving.volcano.sh/inplace-update-state"
HASH_LABEL = "modelserving.volcano.sh/role-template-hash"


def parse_ms(obj: KubeObject) -> ModelServing:
    return ModelServing.model_validate({"metadata": obj["metadata"], "spec": obj["spec"]})


BAD = f"{BAD_IMAGE_PREFIX}engine:missing"


# --- helpers ------------------------------------------------------------------------------------------------------


def _in_place(name: str, replicas: int, roles: list[dict[str, Any]], **config: Any) -> KubeObject:
    doc = modelserving(name, replicas=replicas, roles=roles)
    doc["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "updateMethod": "InPlace",
        "rollingUpdateConfiguration": config or {"maxUnavailable": 1},
    }
    return doc


async def _edit_roles(kube: KubeClient, namespace: str, name: str, edit: Callable[[list[Any]], None]) -> None:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    roles = ms["spec"]["template"]["roles"]
    edit(roles)
    await kube.patch(MODELSERVINGS, name, {"spec": {"template": {"roles": roles}}}, namespace)


def _image_setter(image: str, role_index: int | None = None) -> Callable[[list[Any]], None]:
    def edit(roles: list[Any]) -> None:
        for i, r in enumerate(roles):
            if role_index is not None and i != role_index:
                continue
            r["entryTemplate"]["spec"]["containers"][0]["image"] = image
            if r.get("workerTemplate"):
                r["workerTemplate"]["spec"]["containers"][0]["image"] = image

    return edit


async def _condition(kube: KubeClient, namespace: str, name: str, type_: str = "UpdateInProgress") -> dict[str, Any]:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    for c in (ms.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return {}


async def _wait_condition(
    kube: KubeClient,
    namespace: str,
    name: str,
    reason: str,
    type_: str = "UpdateInProgress",
    timeout: float = 180,
    mentioning: str = "",
) -> dict[str, Any]:
    """The condition once its reason is ``reason`` and its message holds ``mentioning``.

    The message can be written before it says everything (a pod's pull error arrives after the patch that causes it),
    so a test waits for the words it checks rather than reading the first message with the right reason.
    """

    async def check() -> dict[str, Any] | None:
        c = await _condition(kube, namespace, name, type_)
        return c if c.get("reason") == reason and mentioning in c.get("message", "") else None

    result: dict[str, Any] = await eventually(
        check, timeout=timeout, description=f"{name} {type_} {reason} {mentioning!r}"
    )
    return result


async def _events(kube: KubeClient, namespace: str) -> list[KubeObject]:
    items = (await kube.list(EVENTS, namespace, field_selector="involvedObject.kind=ModelServing")).items
    return list(items)


async def _wait_events(kube: KubeClient, namespace: str, reason: str, text: str = "") -> list[KubeObject]:
    """Events of ``reason`` (one mentioning ``text``), waited for: the recorder writes them in the background."""

    async def check() -> list[KubeObject] | None:
        found = [e for e in await _events(kube, namespace) if e["reason"] == reason]
        return found if found and any(text in e["message"] for e in found) else None

    result: list[KubeObject] = await eventually(check, timeout=60, description=f"{reason} event {text!r}")
    return result


def _uids(live: dict[str, KubeObject]) -> dict[str, str]:
    return {n: p["metadata"]["uid"] for n, p in live.items()}


def _status_image(pod: KubeObject) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return str(statuses[0].get("image")) if statuses else ""


def _restarts(pod: KubeObject) -> int:
    return sum(int(cs.get("restartCount") or 0) for cs in (pod.get("status") or {}).get("containerStatuses") or [])


@contextlib.asynccontextmanager
async def _sampling(probe: Callable[[], Awaitable[None]], interval: float = 0.2) -> AsyncIterator[None]:
    async def run() -> None:
        while True:
            await probe()
            await asyncio.sleep(interval)

    task = asyncio.create_task(run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# --- kwok reflects an image patch -------------------------------------------------------------------------------


async def test_kwok_reflects_an_image_patch_like_the_kubelet(kube: KubeClient, namespace: str) -> None:
    node = (await kube.list(NODES, None)).items[0]["metadata"]["name"]
    pod = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": node, "containers": [{"name": "engine", "image": "nginx:1.27"}]},
    }
    await kube.create(PODS, pod, namespace)
    await eventually(lambda: _pod_is(kube, namespace, lambda p: is_ready(p)), timeout=60, description="ready")
    seen: list[tuple[bool, int, str]] = []

    async def probe() -> None:
        p = await kube.get(PODS, "p", namespace)
        seen.append((is_ready(p), _restarts(p), _status_image(p)))

    async with _sampling(probe, interval=0.05):
        await kube.patch(PODS, "p", {"spec": {"containers": [{"name": "engine", "image": "nginx:1.28"}]}}, namespace)
        await eventually(
            lambda: _pod_is(kube, namespace, lambda p: is_ready(p) and _status_image(p) == "nginx:1.28"),
            timeout=60,
            description="ready on the new image",
        )
    assert (False, 1, "nginx:1.28") in seen, seen  # the restart window was visible
    p = await kube.get(PODS, "p", namespace)
    assert _restarts(p) == 1
    # An image that cannot be pulled: the container waits in ImagePullBackOff and the pod stays not Ready.
    await kube.patch(PODS, "p", {"spec": {"containers": [{"name": "engine", "image": BAD}]}}, namespace)
    await eventually(
        lambda: _pod_is(kube, namespace, lambda p: not is_ready(p) and _status_image(p) == BAD),
        timeout=60,
        description="image pull back-off",
    )
    await asyncio.sleep(3)
    p = await kube.get(PODS, "p", namespace)
    assert not is_ready(p) and _restarts(p) == 1
    assert p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"


async def _pod_is(kube: KubeClient, namespace: str, check: Callable[[KubeObject], bool]) -> bool:
    return check(await kube.get(PODS, "p", namespace))


# --- in-place updates ---------------------------------------------------------------------------------------------


async def test_image_change_keeps_every_pod(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        doc = _in_place("ip", 3, [role("decode", workers=1)], maxUnavailable=1)
        await kube.create(MODELSERVINGS, doc, namespace)
        before = (await wait_available(kube, namespace, "ip", 3))["status"]
        uids = _uids(await live_pods(kube, namespace, "ip"))
        await _edit_roles(kube, namespace, "ip", _image_setter("nginx:1.28"))
        await _wait_condition(kube, namespace, "ip", "RolloutComplete")
        live = await live_pods(kube, namespace, "ip")
        assert _uids(live) == uids
        for pod in live.values():
            assert pod["spec"]["containers"][0]["image"] == "nginx:1.28"
            assert _status_image(pod) == "nginx:1.28" and is_ready(pod) and _restarts(pod) == 1
            record = json.loads(pod["metadata"]["annotations"][STATE])
            assert record["phase"] == "Done" and record["podUID"] == pod["metadata"]["uid"]
        status = (await wait_available(kube, namespace, "ip", 3))["status"]
        assert status["currentRevision"] == status["updateRevision"] != before["currentRevision"]
        assert status["updatedReplicas"] == 3
        for pod in live.values():
            assert pod["metadata"]["labels"]["modelserving.volcano.sh/revision"] == status["updateRevision"]
        await _wait_events(kube, namespace, "ServingGroupUpdating")
        reasons = [e["reason"] for e in await _events(kube, namespace)]
        assert not {"RoleRecreating", "ServingGroupRecreating", "InPlaceUpdateFallback"} & set(reasons), reasons
        labels = {"namespace": namespace, "modelserving": "ip"}
        assert REGISTRY.get_sample_value("kthena_rollout_units_total", labels | {"method": "inplace"}) == 3
        assert REGISTRY.get_sample_value("kthena_rollout_units_total", labels | {"method": "recreate"}) is None


async def test_restart_caused_by_the_patch_never_triggers_role_recreate(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        doc = modelserving("rr", replicas=1, roles=[role("prefill", replicas=2), role("decode", workers=1)])
        doc["spec"]["recoveryPolicy"] = "RoleRecreate"
        doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate", "updateMethod": "InPlace"}
        await kube.create(MODELSERVINGS, doc, namespace)
        await wait_available(kube, namespace, "rr", 1)
        uids = _uids(await live_pods(kube, namespace, "rr"))
        windows: set[str] = set()

        async def probe() -> None:
            for name, pod in (await live_pods(kube, namespace, "rr")).items():
                if _restarts(pod) >= 1 and not is_ready(pod):
                    windows.add(name)

        async with _sampling(probe):
            await _edit_roles(kube, namespace, "rr", _image_setter("nginx:1.28", role_index=0))
            await _wait_condition(kube, namespace, "rr", "RolloutComplete")
        # kwok reported each patched pod restarted and not Ready for a while: recovery left them alone
        assert windows == {"rr-0-prefill-0-0", "rr-0-prefill-1-0"}, windows
        live = await live_pods(kube, namespace, "rr")
        assert _uids(live) == uids
        assert {p["spec"]["containers"][0]["image"] for n, p in live.items() if "prefill" in n} == {"nginx:1.28"}
        assert {p["spec"]["containers"][0]["image"] for n, p in live.items() if "decode" in n} == {"nginx:1.27"}
        await _wait_events(kube, namespace, "RoleUpdating")
        assert "RoleRecreating" not in [e["reason"] for e in await _events(kube, namespace)]


async def test_label_or_env_change_falls_back_to_recreate(kube: KubeClient, namespace: str, kubeconfig: Path) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _in_place("fb", 2, [role("decode")]), namespace)
        await wait_available(kube, namespace, "fb", 2)
        uids = _uids(await live_pods(kube, namespace, "fb"))

        def label_and_image(roles: list[Any]) -> None:
            roles[0]["entryTemplate"]["metadata"]["labels"]["tier"] = "gold"
            roles[0]["entryTemplate"]["spec"]["containers"][0]["image"] = "nginx:1.28"

        await _edit_roles(kube, namespace, "fb", label_and_image)
        await _wait_condition(kube, namespace, "fb", "RolloutComplete")
        live = await live_pods(kube, namespace, "fb")
        assert not set(_uids(live).values()) & set(uids.values())
        assert all(p["metadata"]["labels"]["tier"] == "gold" for p in live.values())
        fallback = await _wait_events(kube, namespace, "InPlaceUpdateFallback")
        assert fallback[0]["type"] == "Warning"
        labels = {"namespace": namespace, "modelserving": "fb", "method": "fallback"}
        assert REGISTRY.get_sample_value("kthena_rollout_units_total", labels) == 2
        assert "metadata.labels.tier changed" in fallback[0]["message"], fallback[0]["message"]
        # An env change alone: recreated too, and the event names the env.
        uids = _uids(live)

        def env(roles: list[Any]) -> None:
            roles[0]["entryTemplate"]["spec"]["containers"][0]["env"] = [{"name": "MODE", "value": "fast"}]

        await _edit_roles(kube, namespace, "fb", env)

        async def replaced() -> bool:
            now = _uids(await live_pods(kube, namespace, "fb"))
            return len(now) == 2 and not set(now.values()) & set(uids.values())

        await eventually(replaced, timeout=180, description="fb recreated")
        await _wait_condition(kube, namespace, "fb", "RolloutComplete")
        await _wait_events(kube, namespace, "InPlaceUpdateFallback", "container engine: env changed")


async def test_never_ready_on_the_new_image_is_handled_by_recovery_policy(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        doc = _in_place("dl", 2, [role("decode")], maxUnavailable=1)
        doc["spec"]["rolloutStrategy"]["progressDeadlineSeconds"] = 60
        doc["spec"]["recoveryPolicy"] = "ServingGroupRecreate"
        await kube.create(MODELSERVINGS, doc, namespace)
        await wait_available(kube, namespace, "dl", 2)
        uids = _uids(await live_pods(kube, namespace, "dl"))
        await _edit_roles(kube, namespace, "dl", _image_setter(BAD))
        verifying = await _wait_condition(
            kube, namespace, "dl", "InPlaceVerifying", timeout=60, mentioning="ImagePullBackOff"
        )
        assert "dl-1" in verifying["message"], verifying["message"]
        live = await live_pods(kube, namespace, "dl")
        assert _uids(live) == uids  # patched in place, not recreated
        assert live["dl-1-decode-0-0"]["spec"]["containers"][0]["image"] == BAD
        assert live["dl-0-decode-0-0"]["spec"]["containers"][0]["image"] == "nginx:1.27"  # budget: one at a time

        async def exceeded() -> list[KubeObject]:
            return [e for e in await _events(kube, namespace) if e["reason"] == "ProgressDeadlineExceeded"]

        events = await eventually(exceeded, timeout=150, description="progressDeadlineSeconds passed")
        assert "dl-1" in events[0]["message"] and "ServingGroupRecreate" in events[0]["message"]

        async def recreated() -> bool:
            now = _uids(await live_pods(kube, namespace, "dl"))
            return "dl-1-decode-0-0" in now and now["dl-1-decode-0-0"] != uids["dl-1-decode-0-0"]

        await eventually(recreated, timeout=60, description="dl-1 recreated by recoveryPolicy")
        await _wait_events(kube, namespace, "ServingGroupRecreating", "dl-1")
        live = await live_pods(kube, namespace, "dl")
        assert live["dl-0-decode-0-0"]["metadata"]["uid"] == uids["dl-0-decode-0-0"]  # never more than one down
        # Fixing the image finishes the rollout (the untouched group in place).
        await _edit_roles(kube, namespace, "dl", _image_setter("nginx:1.28"))
        await _wait_condition(kube, namespace, "dl", "RolloutComplete")
        live = await live_pods(kube, namespace, "dl")
        assert {p["spec"]["containers"][0]["image"] for p in live.values()} == {"nginx:1.28"}
        assert live["dl-0-decode-0-0"]["metadata"]["uid"] == uids["dl-0-decode-0-0"]


async def _start_manager(kubeconfig: Path, namespace: str) -> asyncio.subprocess.Process:
    return await start_manager_process(kubeconfig, namespace)


async def test_manager_killed_mid_in_place_update_resumes_without_double_patch(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    proc = await _start_manager(kubeconfig, namespace)
    try:
        await kube.create(MODELSERVINGS, _in_place("kl", 4, [role("decode", workers=1)], maxUnavailable=1), namespace)
        await wait_available(kube, namespace, "kl", 4)
        uids = _uids(await live_pods(kube, namespace, "kl"))
        lowest = [4]

        async def probe() -> None:
            by_group: dict[str, list[KubeObject]] = {}
            for pod in await pods(kube, namespace, "kl"):
                by_group.setdefault(pod["metadata"]["labels"]["modelserving.volcano.sh/group-name"], []).append(pod)
            ready = sum(1 for g in by_group.values() if len(g) == 2 and all(is_ready(p) for p in g))
            lowest[0] = min(lowest[0], ready)

        async with _sampling(probe):
            await _edit_roles(kube, namespace, "kl", _image_setter("nginx:1.28"))
            for delay in (0.5, 1.5, 2.5):
                await asyncio.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
                proc = await _start_manager(kubeconfig, namespace)
            await _wait_condition(kube, namespace, "kl", "RolloutComplete", timeout=240)
        live = await live_pods(kube, namespace, "kl")
        assert _uids(live) == uids
        for pod in live.values():
            record = json.loads(pod["metadata"]["annotations"][STATE])
            # patched once: a second patch would have recorded the restart of the first as its baseline
            assert record["baselineRestarts"] == {"worker" if pod["metadata"]["name"].endswith("-1") else "engine": 0}
            assert record["phase"] == "Done" and _restarts(pod) == 1
        assert lowest[0] >= 3, lowest
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()


# --- coordinated role rollouts ------------------------------------------------------------------------------------


def _coordinated(name: str, deps: bool, in_place: bool = False) -> KubeObject:
    prefill = role("prefill", replicas=4) | {"maxUnavailable": 2}
    decode = role("decode", replicas=8) | {"maxUnavailable": 4}
    doc = modelserving(name, replicas=1, roles=[prefill, decode])
    coordination: dict[str, Any] = {"maxSkew": "25%"}
    if deps:
        coordination["dependencies"] = [{"role": "decode", "dependsOn": ["prefill"]}]
    doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate", "roleCoordination": coordination}
    if in_place:
        doc["spec"]["rolloutStrategy"]["updateMethod"] = "InPlace"
    return doc


class _RatioSampler:
    """Per role, target-version instances that are Ready on their spec image, from the pods alone."""

    def __init__(self, kube: KubeClient, namespace: str, name: str) -> None:
        self.kube, self.namespace, self.name = kube, namespace, name
        self.hashes: dict[str, str] = {}
        self.samples: list[dict[str, tuple[int, int, int]]] = []
        """Per role: (target-version Ready, started towards the target, replicas)."""

    async def targets(self) -> None:
        ms = parse_ms(await self.kube.get(MODELSERVINGS, self.name, self.namespace))
        data = revision_data(ms.spec)
        self.hashes = {r.name: role_template_hash(data, r) for r in data.roles}
        self.replicas = {r.name: r.replicas for r in data.roles}

    async def probe(self) -> None:
        by_role: dict[str, list[KubeObject]] = {}
        for pod in await pods(self.kube, self.namespace, self.name):
            by_role.setdefault(pod["metadata"]["labels"]["modelserving.volcano.sh/role"], []).append(pod)
        sample: dict[str, tuple[int, int, int]] = {}
        for role_name, want in self.hashes.items():
            members = by_role.get(role_name, [])
            live = [p for p in members if not p["metadata"].get("deletionTimestamp")]
            on_target = [p for p in live if p["metadata"]["labels"][HASH_LABEL] == want]
            ready = [p for p in on_target if is_ready(p) and _status_image(p) == p["spec"]["containers"][0]["image"]]
            started = len(on_target) + (self.replicas[role_name] - len(live))
            sample[role_name] = (len(ready), started, self.replicas[role_name])
        self.samples.append(sample)

    def max_skew(self) -> float:
        worst = 0.0
        for sample in self.samples:
            ratios = [ready / n for ready, _, n in sample.values()]
            worst = max(worst, max(ratios) - min(ratios))
        return worst


async def test_coordinated_pd_rollout_within_max_skew_and_dependency_order(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _coordinated("pd", deps=True), namespace)
        await wait_available(kube, namespace, "pd", 1, timeout=180)
        await _edit_roles(kube, namespace, "pd", _image_setter("nginx:1.28"))
        sampler = _RatioSampler(kube, namespace, "pd")
        await sampler.targets()
        async with _sampling(sampler.probe, interval=0.05):
            await _wait_condition(kube, namespace, "pd", "RolloutComplete", timeout=300)
            await sampler.probe()
        # intermediate states were observed (not just before and after)
        assert sum(1 for s in sampler.samples if 0 < s["decode"][0] < 8) >= 3, sampler.samples
        assert sampler.max_skew() <= 0.25 + 1e-9, sampler.max_skew()
        assert sampler.max_skew() > 0  # the roles did move apart, within the bound
        # decode (the caller) started only once prefill had target-version Ready capacity
        first = next(i for i, s in enumerate(sampler.samples) if s["decode"][1] > 0)
        assert sampler.samples[first]["prefill"][0] >= 1, sampler.samples[: first + 1]
        assert sampler.samples[-1] == {"prefill": (4, 4, 4), "decode": (8, 8, 8)}
        blocked = await _condition(kube, namespace, "pd", "CoordinatedRoleRolloutBlocked")
        assert (blocked["status"], blocked["reason"]) == ("False", "RolloutComplete")


async def test_stalled_role_blocks_the_others_until_it_recovers(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, _coordinated("st", deps=False, in_place=True), namespace)
        await wait_available(kube, namespace, "st", 1, timeout=180)

        def bad_prefill(roles: list[Any]) -> None:
            roles[0]["entryTemplate"]["spec"]["containers"][0]["image"] = BAD
            roles[1]["entryTemplate"]["spec"]["containers"][0]["image"] = "nginx:1.28"

        await _edit_roles(kube, namespace, "st", bad_prefill)
        sampler = _RatioSampler(kube, namespace, "st")
        await sampler.targets()
        async with _sampling(sampler.probe):
            blocked = await _wait_condition(kube, namespace, "st", "SkewLimit", "CoordinatedRoleRolloutBlocked")
            assert blocked["status"] == "True" and "role decode waits" in blocked["message"], blocked
            await asyncio.sleep(5)  # it stays blocked: decode holds at maxSkew above prefill's 0%
            await sampler.probe()
            assert sampler.samples[-1]["decode"][0] == 2 and sampler.samples[-1]["prefill"][0] == 0
            assert (await _condition(kube, namespace, "st", "CoordinatedRoleRolloutBlocked"))["status"] == "True"
            # recovery: a good prefill image lets both roles finish and clears the condition
            await _edit_roles(kube, namespace, "st", _image_setter("nginx:1.29", role_index=0))
            await sampler.targets()
            await _wait_condition(kube, namespace, "st", "RolloutComplete", timeout=300)
        assert sampler.max_skew() <= 0.25 + 1e-9, sampler.max_skew()
        blocked = await _condition(kube, namespace, "st", "CoordinatedRoleRolloutBlocked")
        assert (blocked["status"], blocked["reason"]) == ("False", "RolloutComplete")
        images = {n: p["spec"]["containers"][0]["image"] for n, p in (await live_pods(kube, namespace, "st")).items()}
        assert {i for n, i in images.items() if "prefill" in n} == {"nginx:1.29"}
        assert {i for n, i in images.items() if "decode" in n} == {"nginx:1.28"}


async def test_manager_killed_mid_coordinated_rollout_resumes_within_max_skew(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    proc = await _start_manager(kubeconfig, namespace)
    try:
        await kube.create(MODELSERVINGS, _coordinated("kc", deps=True, in_place=True), namespace)
        await wait_available(kube, namespace, "kc", 1, timeout=180)
        uids = _uids(await live_pods(kube, namespace, "kc"))
        await _edit_roles(kube, namespace, "kc", _image_setter("nginx:1.28"))
        sampler = _RatioSampler(kube, namespace, "kc")
        await sampler.targets()
        async with _sampling(sampler.probe, interval=0.05):
            for delay in (0.5, 1.0, 1.5):
                await asyncio.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
                proc = await _start_manager(kubeconfig, namespace)
            await _wait_condition(kube, namespace, "kc", "RolloutComplete", timeout=240)
            await sampler.probe()
        assert sampler.max_skew() <= 0.25 + 1e-9, sampler.max_skew()
        assert sampler.samples[-1] == {"prefill": (4, 4, 4), "decode": (8, 8, 8)}
        live = await live_pods(kube, namespace, "kc")
        assert _uids(live) == uids
        for pod in live.values():
            assert json.loads(pod["metadata"]["annotations"][STATE])["baselineRestarts"] == {"engine": 0}
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
