"""``kthena-py status`` on a healthy P/D ModelServing mid-rollout, in the cluster tier (issue 25).

Three ServingGroups of a prefill role and a decode role (an entry and a worker), a ServingGroup rolling update with
partition 1, then an image change: groups 1 and 2 roll to the new revision, group 0 is held by the partition. The
rollout stops there on its own (UpdateInProgress=PartitionReached) and the test waits for every group to be Ready
again, so the tree it prints is the same every run: compared with ``golden/status/pd-mid-rollout.txt`` (see
:mod:`.statusgolden`), and ``-o json`` names the same groups.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kthena_py.cli.status import status_text
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube import KubeClient
from kthena_py.testing.wait import eventually

from .msutil import live_pods, modelserving, role, running_manager, wait_available
from .statusgolden import assert_status_golden

pytestmark = pytest.mark.cluster

OLD, NEW = "nginx:1.27", "nginx:1.28"
GROUP_LINE = re.compile(r"^[├└]─ (\S+)", re.MULTILINE)


async def update_condition(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    ms = await kube.get(MODELSERVINGS, name, namespace)
    for c in (ms.get("status") or {}).get("conditions") or []:
        if c["type"] == "UpdateInProgress":
            return dict(c)
    return {}


async def test_a_pd_modelserving_held_by_its_partition_mid_rollout(
    kube: KubeClient, namespace: str, kubeconfig: Path
) -> None:
    doc = modelserving("pd", replicas=3, roles=[role("prefill"), role("decode", workers=1)])
    doc["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "rollingUpdateConfiguration": {"partition": 1},
    }
    async with running_manager(str(kubeconfig), namespace):
        await kube.create(MODELSERVINGS, doc, namespace)
        old = (await wait_available(kube, namespace, "pd", 3))["status"]["currentRevision"]

        ms = await kube.get(MODELSERVINGS, "pd", namespace)
        roles = ms["spec"]["template"]["roles"]
        for r in roles:
            for template in ("entryTemplate", "workerTemplate"):
                if r.get(template):
                    r[template]["spec"]["containers"][0]["image"] = NEW
        await kube.patch(MODELSERVINGS, "pd", {"spec": {"template": {"roles": roles}}}, namespace)

        async def partition_reached() -> dict[str, Any] | None:
            c = await update_condition(kube, namespace, "pd")
            return c if c.get("reason") == "PartitionReached" else None

        await eventually(partition_reached, timeout=180, description="pd UpdateInProgress=PartitionReached")
        want = {
            f"pd-{g}-{pod}": OLD if g == 0 else NEW
            for g in range(3)
            for pod in ("prefill-0-0", "decode-0-0", "decode-0-1")
        }

        async def images() -> bool:
            live = await live_pods(kube, namespace, "pd")
            have = {n: p["spec"]["containers"][0]["image"] for n, p in live.items()}
            assert have == want, have
            return True

        await eventually(images, timeout=120, description="pd-0 on the old image, pd-1 and pd-2 on the new")
        status = (await wait_available(kube, namespace, "pd", 3))["status"]
        assert status["currentRevision"] == old != status["updateRevision"]

        text = await assert_status_golden(kube, namespace, "pd", "pd-mid-rollout")
        document = json.loads(await status_text(kube, "pd", namespace, output="json"))
        names = [g["name"] for g in document["groups"]]
        assert names == GROUP_LINE.findall(text) == ["pd-0", "pd-1", "pd-2"]
        assert [g["revisionState"] for g in document["groups"]] == ["current", "updated", "updated"]
        assert (document["currentRevision"], document["updateRevision"]) == (old, status["updateRevision"])
        assert document["desired"] == document["ready"] == 3
