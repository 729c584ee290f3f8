"""``kthena-py status`` for ModelPools over the in-memory API server: one pool, the list, ``-o json`` and ``-w``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kthena_py.cli import status
from kthena_py.cli.poolview import build_pool_view
from kthena_py.controllers.resources import MODELPOOLS, MODELSERVINGS
from kthena_py.kube.resources import PODS
from kthena_py.main import main
from kthena_py.plan.modelpool.demand import demand_annotation, format_demand_time
from kthena_py.testing.fake import FakeKube
from kthena_py.vocab.labels import ACTIVATOR_SCALE_FROM_ZERO

NS = "team"
NOW = 1_800_000_000.0


def _ms(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "template": {"roles": []}},
    }


def _pod(member: str, index: int, *, ready: bool, terminating: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": f"{member}-0-entry-{index}",
        "namespace": NS,
        "labels": {"modelserving.volcano.sh/name": member},
    }
    if terminating:
        metadata["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "status": {"conditions": [condition]}}


def _pool(name: str = "gpu0", **status_fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kthena-py.io/v1alpha1",
        "kind": "ModelPool",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {demand_annotation("qwen"): format_demand_time(NOW - 4.2)},
        },
        "spec": {
            "members": [{"modelServingRef": {"name": m}} for m in ("llama", "qwen", "gone")],
            "default": "llama",
            "slots": 1,
            "swapBudget": "120s",
        },
        "status": status_fields,
    }


SWAPPING = {
    "phase": "Swapping",
    "residentMember": "llama",
    "residentMembers": ["llama"],
    "pendingMember": "qwen",
    "evictingMember": "llama",
    "swap": {"from": "llama", "to": "qwen", "step": "Releasing", "started": "2027-01-15T07:59:50Z"},
    "lastSwap": {
        "from": "qwen",
        "to": "llama",
        "started": "2027-01-15T07:00:00Z",
        "drained": "2027-01-15T07:00:01.500Z",
        "released": "2027-01-15T07:00:11.500Z",
        "ready": "2027-01-15T07:00:31.500Z",
        "durationSeconds": 31.5,
    },
    "conditions": [
        {
            "type": "SwapDeferred",
            "status": "False",
            "reason": "NotDeferred",
            "message": "no swap is waiting",
            "lastTransitionTime": "2027-01-15T07:59:50Z",
        }
    ],
}


def _cluster(pool: dict[str, Any]) -> FakeKube:
    kube = FakeKube()
    kube.put(MODELPOOLS, pool)
    kube.put(MODELSERVINGS, _ms("llama", 0))
    kube.put(MODELSERVINGS, _ms("qwen", 0))
    kube.put(PODS, _pod("llama", 0, ready=False, terminating=True))
    return kube


async def test_one_pool_shows_its_swap_steps_and_each_members_live_state() -> None:
    text = await status.pool_status_text(_cluster(_pool(**SWAPPING)), "gpu0", NS, now=NOW)
    assert text.splitlines() == [
        "ModelPool team/gpu0: Swapping",
        "  slots 1, swapPolicy sticky, swapBudget 120s, default llama",
        "  resident: llama   pending: qwen   evicting: llama",
        "  swap in progress: llama -> qwen, step Releasing (started 10s ago)",
        "  last swap: qwen -> llama, took 31.5s (drain 1.5s, release 10.0s, load 20.0s), ready 59m ago",
        "",
        "  MEMBER  PHASE    RESIDENT  REPLICAS  PODS                 LAST REQUEST",
        "  llama   Scaling  yes       0         0/1 (1 terminating)  -",
        "  qwen    Stopped  no        0         0/0                  4s ago",
        "  gone    Missing  no        missing   0/0                  -",
        "",
        "  CONDITION     STATUS  REASON       MESSAGE",
        "  SwapDeferred  False   NotDeferred  no swap is waiting",
    ]


def _servable(name: str) -> dict[str, Any]:
    """A ModelServing at zero that ``kthena-py status`` can read, opted in to the activator's scale from zero."""
    role = {"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": {"spec": {"containers": [{"name": "e"}]}}}
    obj = _ms(name, 0)
    obj["metadata"]["annotations"] = {ACTIVATOR_SCALE_FROM_ZERO: "true"}
    obj["spec"]["template"]["roles"] = [role]
    return obj


async def test_a_member_at_zero_is_not_resident_in_its_pool_not_scaled_to_zero_by_the_activator() -> None:
    kube = _cluster(_pool())
    # qwen opted in to scale from zero: as a pool member the activator ignores that, and so does its status.
    kube.put(MODELSERVINGS, _servable("qwen"))
    kube.put(MODELSERVINGS, _servable("solo"))
    member = (await status.status_text(kube, "qwen", NS, now=NOW)).splitlines()[0]
    assert "not resident in ModelPool gpu0" in member and "activator" not in member
    assert json.loads(await status.status_text(kube, "qwen", NS, output="json", now=NOW))["modelPools"] == ["gpu0"]
    solo = (await status.status_text(kube, "solo", NS, now=NOW)).splitlines()[0]
    assert "scaled to zero (activator)" in solo and "ModelPool" not in solo
    assert "modelPools" not in json.loads(await status.status_text(kube, "solo", NS, output="json", now=NOW))


async def test_the_phase_the_controller_reports_for_a_member_wins_over_the_derived_one() -> None:
    pool = _pool(members=[{"name": "qwen", "phase": "Failed", "resident": False, "replicas": 0}])
    view = build_pool_view(pool, {"qwen": _ms("qwen", 0)}, {}, NOW)
    assert [(m.name, m.phase) for m in view.members] == [("llama", "Missing"), ("qwen", "Failed"), ("gone", "Missing")]
    ready = build_pool_view(pool, {"llama": _ms("llama", 1)}, {"llama": [_pod("llama", 0, ready=True)]}, NOW)
    assert ready.members[0].phase == "Ready"


async def test_the_list_has_one_line_per_pool_and_says_when_there_is_none() -> None:
    kube = _cluster(_pool(**SWAPPING))
    kube.put(MODELPOOLS, {**_pool("gpu1"), "status": {}})
    assert (await status.pool_list_text(kube, NS)).splitlines() == [
        "MODELPOOL  RESIDENT  PENDING  PHASE     SLOTS  MEMBERS          LAST SWAP",
        "gpu0       llama     qwen     Swapping  1      llama,qwen,gone  qwen->llama 31.5s",
        "gpu1       -         -        -         1      llama,qwen,gone  -",
    ]
    assert "No ModelPools in namespace other" in await status.pool_list_text(kube, "other")


@pytest.fixture
def command(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    kube = _cluster(_pool(**SWAPPING))

    class Closing:
        host = "https://fake"

        def __getattr__(self, name: str) -> Any:
            return getattr(kube, name)

        async def close(self) -> None:
            return None

    async def connect(kubeconfig: str | None, context: str | None) -> tuple[Any, str]:
        return Closing(), NS

    monkeypatch.setattr(status, "connect", connect)
    monkeypatch.setattr(status, "_clock", lambda: NOW)
    return kube


def test_the_command_falls_back_to_a_pool_and_lists_pools_without_a_name(
    command: FakeKube, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "gpu0"]) == 0
    assert capsys.readouterr().out.startswith("ModelPool team/gpu0: Swapping\n")
    assert main(["status"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("gpu0 ")
    assert main(["status", "mpool/gpu0", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["kind"], document["pendingMember"], document["lastSwap"]["durationSeconds"]) == (
        "ModelPool",
        "qwen",
        31.5,
    )
    assert document["members"][1] == {
        "name": "qwen",
        "phase": "Stopped",
        "resident": False,
        "replicas": 0,
        "podsReady": 0,
        "pods": 0,
        "terminating": 0,
        "lastRequestSecondsAgo": 4.2,
    }


def test_a_name_that_is_neither_is_one_line_and_exit_1(command: FakeKube, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "nope"]) == 1
    assert (
        capsys.readouterr().err == 'kthena-py: error: neither a modelserving nor a modelpool "nope" in namespace team\n'
    )
    assert main(["status", "modelpool/nope"]) == 1
    assert capsys.readouterr().err == 'kthena-py: error: modelpool "nope" not found in namespace team\n'


async def test_watch_prints_again_on_a_change_only_and_ends_when_the_pool_is_deleted() -> None:
    kube = _cluster(_pool(**SWAPPING))
    written: list[str] = []
    task = asyncio.create_task(status.follow_pool(kube, "gpu0", NS, written.append, interval=0.01))
    await asyncio.sleep(0.1)
    assert len(written) == 1 and "step Releasing" in written[0]
    kube.put(MODELPOOLS, _pool(**{**SWAPPING, "swap": {**SWAPPING["swap"], "step": "Loading"}}))
    await asyncio.sleep(0.1)
    assert (
        len(written) == 2 and written[1].startswith("\nModelPool team/gpu0: Swapping") and "step Loading" in written[1]
    )
    await kube.delete(MODELPOOLS, "gpu0", NS)
    assert await asyncio.wait_for(task, 5) == 0
    assert written[-1] == 'modelpool "gpu0" was deleted\n'
