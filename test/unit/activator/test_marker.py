"""The activator's state annotation writer over FakeKube: one apply per change, none when converged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kthena_py.activator import Activator, ActivatorOptions
from kthena_py.activator.resources import AUTOSCALINGPOLICIES, MODELPOOLS, MODELSERVINGS
from kthena_py.kube.errors import ServerError
from kthena_py.plan.activator.state import SCALED_TO_ZERO
from kthena_py.testing.fake import FakeKube
from kthena_py.testing.fake.calls import Call
from kthena_py.testing.fake.faults import refuse
from kthena_py.testing.wait import eventually
from kthena_py.vocab.labels import ACTIVATOR_FIELD_MANAGER, ACTIVATOR_SCALE_FROM_ZERO, ACTIVATOR_STATE

NS = "ns"
SETTLE = 0.3
"""How long a test lets the activator run to show that it writes nothing (no write can happen after)."""


def modelserving(name: str = "llm", replicas: int = 0, *, opted_in: bool = True, **annotations: str) -> dict[str, Any]:
    if opted_in:
        annotations[ACTIVATOR_SCALE_FROM_ZERO] = "true"
    return {
        "apiVersion": MODELSERVINGS.api_version,
        "kind": "ModelServing",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": {"replicas": replicas, "template": {"roles": []}},
    }


def applies(kube: FakeKube) -> list[Call]:
    return [c for c in kube.calls_of("patch", MODELSERVINGS) if c.options["patch_type"] == "apply"]


def state(kube: FakeKube, name: str = "llm") -> str | None:
    ms = kube.peek(MODELSERVINGS, name, NS)
    assert ms is not None
    return (ms["metadata"].get("annotations") or {}).get(ACTIVATOR_STATE)


def activator(kube: FakeKube) -> Activator:
    options = ActivatorOptions(listen="127.0.0.1:0", metrics_bind_address="0", health_probe_bind_address="0")
    return Activator(options, client=kube)


@asynccontextmanager
async def running(kube: FakeKube) -> AsyncIterator[Activator]:
    instance = activator(kube)
    await instance.start()
    assert await instance.wait_for_sync(5)
    try:
        yield instance
    finally:
        await instance.stop()


async def until(predicate: Any, timeout: float = 5.0) -> None:
    await eventually(lambda: predicate() or None, timeout=timeout, interval=0.01)


async def scale(kube: FakeKube, replicas: int, name: str = "llm") -> None:
    await kube.patch(MODELSERVINGS, name, {"spec": {"replicas": replicas}}, NS, subresource="scale")


async def test_one_apply_per_change_and_none_when_converged() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, modelserving())
    kube.put(MODELSERVINGS, modelserving("awake", replicas=2))
    kube.put(MODELSERVINGS, modelserving("plain", opted_in=False))
    async with running(kube):
        await until(lambda: state(kube) == SCALED_TO_ZERO)
        await asyncio.sleep(SETTLE)
        (write,) = applies(kube)
        assert write.name == "llm" and write.options["field_manager"] == ACTIVATOR_FIELD_MANAGER
        assert write.body["metadata"]["annotations"] == {ACTIVATOR_STATE: SCALED_TO_ZERO}
        assert write.body["metadata"]["resourceVersion"]
        assert "spec" not in write.body
        assert state(kube, "awake") is None and state(kube, "plain") is None

        await scale(kube, 1)  # woken (by anyone): the words go
        await until(lambda: state(kube) is None)
        await scale(kube, 0)  # back at zero: they come back
        await until(lambda: state(kube) == SCALED_TO_ZERO)
        await asyncio.sleep(SETTLE)
        assert [c.name for c in applies(kube)] == ["llm"] * 3
        assert "annotations" not in applies(kube)[1].body["metadata"]
        ms = kube.peek(MODELSERVINGS, "llm", NS)
        assert ms is not None and ms["spec"]["replicas"] == 0  # the annotation write never touched replicas


async def test_a_restart_and_a_second_replica_write_nothing_on_a_converged_cluster() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, modelserving())
    async with running(kube):
        await until(lambda: state(kube) == SCALED_TO_ZERO)
        async with running(kube):  # a second replica starts while the first runs
            await asyncio.sleep(SETTLE)
        assert len(applies(kube)) == 1
    async with running(kube):  # a restart
        await asyncio.sleep(SETTLE)
    assert len(applies(kube)) == 1
    assert state(kube) == SCALED_TO_ZERO


async def test_two_replicas_converge_on_one_value() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, modelserving(replicas=1))
    async with running(kube), running(kube):
        await scale(kube, 0)
        await until(lambda: state(kube) == SCALED_TO_ZERO)
        await scale(kube, 1)
        await until(lambda: state(kube) is None)
        await asyncio.sleep(SETTLE)
        writes = applies(kube)
        # Each change is written by one replica or both; a second write is refused by its resourceVersion.
        assert 2 <= len(writes) <= 4
        assert state(kube) is None


async def test_an_autoscaling_policy_with_min_zero_opts_in() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, modelserving(opted_in=False))
    async with running(kube):
        await asyncio.sleep(SETTLE)
        assert applies(kube) == [] and state(kube) is None
        kube.put(
            AUTOSCALINGPOLICIES,
            {
                "apiVersion": AUTOSCALINGPOLICIES.api_version,
                "kind": "AutoscalingPolicy",
                "metadata": {"name": "p", "namespace": NS},
                "spec": {"homogeneousTarget": {"target": {"targetRef": {"name": "llm"}}, "minReplicas": 0}},
            },
        )
        await until(lambda: state(kube) == SCALED_TO_ZERO)


async def test_a_failed_write_is_retried_with_backoff() -> None:
    kube = FakeKube()
    refusal = refuse(ServerError(500, "InternalError", "boom"), "patch", MODELSERVINGS, subresource=None, times=2)
    kube.intercept(refusal)
    kube.put(MODELSERVINGS, modelserving())
    async with running(kube):
        await until(lambda: state(kube) == SCALED_TO_ZERO)
        assert len(refusal.refused) == 2
        assert len(applies(kube)) == 3


async def test_an_annotation_owned_by_someone_else_is_not_rewritten_in_a_loop() -> None:
    kube = FakeKube()
    # A user applied the words to a ModelServing that is up: the activator's removal cannot take them away.
    kube.put(MODELSERVINGS, modelserving(replicas=1))
    await kube.apply(
        MODELSERVINGS,
        {
            "apiVersion": MODELSERVINGS.api_version,
            "kind": "ModelServing",
            "metadata": {"name": "llm", "namespace": NS, "annotations": {ACTIVATOR_STATE: SCALED_TO_ZERO}},
        },
        field_manager="someone",
    )
    async with running(kube):
        await asyncio.sleep(SETTLE)
        assert len(applies(kube)) == 2  # the user's, then one attempt that changed nothing (and raised no event)
        assert state(kube) == SCALED_TO_ZERO


async def test_a_pool_member_loses_the_state_annotation_and_never_gets_it() -> None:
    kube = FakeKube()
    kube.put(MODELSERVINGS, modelserving("llm"))
    kube.put(MODELSERVINGS, modelserving("member"))
    async with running(kube):
        await eventually(lambda: (state(kube) == SCALED_TO_ZERO and state(kube, "member") == SCALED_TO_ZERO) or None)
        # The ModelServing joins a pool: the pool controller, not the activator, brings it back from zero.
        kube.put(
            MODELPOOLS,
            {
                "apiVersion": MODELPOOLS.api_version,
                "kind": MODELPOOLS.kind,
                "metadata": {"name": "pool", "namespace": NS},
                "spec": {"members": [{"modelServingRef": {"name": "member"}}]},
            },
        )
        await eventually(lambda: state(kube, "member") is None or None)
        await asyncio.sleep(SETTLE)
        assert state(kube, "member") is None and state(kube) == SCALED_TO_ZERO
