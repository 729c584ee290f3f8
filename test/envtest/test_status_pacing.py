"""Progress-only status changes against a real apiserver: a group ready alone is reported a moment later, and
groups that follow it within that moment are reported in one write with ``Available``.

No kubelet runs in this tier: the test makes pods Running and Ready through their ``status`` subresource, as a
kubelet would. A watch on the ModelServing records every status the API server stored, whoever wrote it.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.kube.resources import PODS
from kthena_py.testing.wait import eventually

from .test_faults import GOOD, manager_with, modelserving

pytestmark = pytest.mark.envtest

NAME = "paced"


async def _ready(kube: KubeClient, namespace: str, pod: str) -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await kube.patch(
        PODS, pod, {"status": {"phase": "Running", "conditions": [ready]}}, namespace, subresource="status"
    )


async def _stored(kube: KubeClient, namespace: str, since: str, seen: list[dict[str, Any]]) -> None:
    """Append every status of the ModelServing the API server stores after ``since``."""
    async for event in kube.watch(
        MODELSERVINGS, namespace, resource_version=since, field_selector=f"metadata.name={NAME}"
    ):
        if event.type == "MODIFIED":
            seen.append(event.object.get("status") or {})


def _available(status: dict[str, Any]) -> str | None:
    return next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Available"), None)


async def test_a_lone_ready_group_is_reported_later_and_the_groups_that_follow_join_available(
    kubeconfig: Path, kube: KubeClient, namespace: str
) -> None:
    client = await KubeClient.from_kubeconfig(str(kubeconfig))
    try:
        async with manager_with(client, namespace):
            doc = modelserving(NAME, GOOD)
            doc["spec"]["replicas"] = 3
            await kube.create(MODELSERVINGS, doc, namespace)

            async def reported() -> dict[str, Any] | None:
                status = (await kube.get(MODELSERVINGS, NAME, namespace)).get("status") or {}
                return status if status.get("replicas") == 3 else None

            await eventually(reported, timeout=60, description="three live groups reported")
            since = (await kube.get(MODELSERVINGS, NAME, namespace))["metadata"]["resourceVersion"]
            seen: list[dict[str, Any]] = []
            watching = asyncio.create_task(_stored(kube, namespace, since, seen))
            try:
                # One group ready, nothing after it: its progress is written once its wait is over.
                await _ready(kube, namespace, f"{NAME}-0-prefill-0-0")

                async def one_available() -> bool:
                    return any(s.get("availableReplicas") == 1 for s in seen)

                await eventually(one_available, timeout=30, description="availableReplicas 1 written")
                # Two more, a little apart but within the wait: the second joins the first in one write.
                await _ready(kube, namespace, f"{NAME}-1-prefill-0-0")
                await asyncio.sleep(0.3)  # the reconcile of the second group's pod runs (and waits)
                await _ready(kube, namespace, f"{NAME}-2-prefill-0-0")

                async def all_available() -> bool:
                    return any(_available(s) == "True" for s in seen)

                await eventually(all_available, timeout=30, description="Available written")
                await asyncio.sleep(1.5)  # past the wait: a write it had left pending would land now
            finally:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
            counts = [s.get("availableReplicas") for s in seen]
            assert 2 not in counts, f"the second group's progress was written on its own: {counts}"
            final = next(s for s in seen if _available(s) == "True")
            assert final["availableReplicas"] == 3
    finally:
        await client.close()
