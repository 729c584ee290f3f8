"""Properties of in-place rollouts under random readiness schedules (hypothesis).

* No pod is ever patched twice for one revision, and every pod keeps its UID, even when a step is cut short (a
  manager killed after some of its patches reached the API server).
* The rollout never takes ready units below ``replicas - maxUnavailable`` on its own.
* Whenever pods become ready the rollout finishes: every pod on the new image, the rollout complete.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelserving.rollout.rollout import plan_rollout

from .builders import VOLCANO, ms_doc, parse, ref_of, role_doc
from .fleet import Fleet

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def _docs(draw: st.DrawFn) -> dict[str, Any]:
    replicas = draw(st.integers(1, 4))
    unavailable = draw(st.integers(1, 3))
    workers = draw(st.integers(0, 2))
    role_level = draw(st.booleans())
    if role_level:
        doc = ms_doc(
            role_doc("prefill", replicas=draw(st.integers(1, 3))) | {"maxUnavailable": unavailable},
            role_doc("decode", workers=workers),
            replicas=1,
        )
        doc["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate", "updateMethod": "InPlace"}
    else:
        doc = ms_doc(role_doc("decode", workers=workers), replicas=replicas)
        doc["spec"]["rolloutStrategy"] = {
            "type": "ServingGroupRollingUpdate",
            "updateMethod": "InPlace",
            "rollingUpdateConfiguration": {"maxUnavailable": unavailable},
        }
    return doc


@SETTINGS
@given(
    doc=_docs(),
    schedule=st.lists(st.tuples(st.lists(st.booleans(), max_size=12), st.integers(0, 3)), max_size=25),
    images=st.integers(1, 2),
)
def test_in_place_rollouts_patch_once_keep_the_budget_and_converge(
    doc: dict[str, Any], schedule: list[tuple[list[bool], int]], images: int
) -> None:
    fleet = Fleet(doc)
    fleet.settle()
    uids = fleet.uids()
    strategy = doc["spec"]["rolloutStrategy"]
    group_level = strategy["type"] == "ServingGroupRollingUpdate"
    replicas = doc["spec"]["replicas"]
    floor = replicas - strategy.get("rollingUpdateConfiguration", {}).get("maxUnavailable", 1)
    for version in range(2, 2 + images):  # a second image change may land mid-rollout
        fleet.set_image(f"img:{version}", role=None if group_level else 0)
        for chosen, cut in schedule:
            ms = parse(fleet.doc)
            before = fleet.ready_groups()
            plan = plan_rollout(ms, ref_of(ms), fleet.cluster.observed(), VOLCANO, fleet.now)
            if cut and len(plan.updates) > 1:  # killed after the first `cut` patches
                plan = replace(plan, updates=plan.updates[:cut], status=None)
            fleet._run(plan)  # writes the status share when the plan neither creates nor deletes
            if group_level:
                assert fleet.ready_groups() >= min(before, floor)
            fleet.reconcile(rollout=False)
            pods = sorted(fleet.cluster.pods())
            fleet.tick(only={name for name, ok in zip(pods, chosen, strict=False) if ok})
            fleet.advance(1)
    fleet.settle()
    assert fleet.uids() == uids
    assert set(fleet.patches.values()) <= {1}, fleet.patches
    last = f"img:{1 + images}"
    images_now = fleet.images()
    if group_level:
        assert set(images_now.values()) == {last}
    else:
        assert {i for n, i in images_now.items() if "-prefill-" in n} == {last}
    status = fleet.doc["status"]
    assert status["currentRevision"] == status["updateRevision"]
    assert fleet.condition()["reason"] == "RolloutComplete"  # type: ignore[index]
