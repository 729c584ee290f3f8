"""The ``autoscaling`` reconciler's disaggregated pass through FakeKube: per-role decisions, the ratio, one patch."""

from __future__ import annotations

from kthena_py.controllers.autoscaling.disaggregated import role_patch
from kthena_py.controllers.autoscaling.history import HISTORY_ANNOTATION
from kthena_py.controllers.autoscaling.homogeneous import FIELD_MANAGER, TargetReconciler
from kthena_py.controllers.resources import AUTOSCALINGPOLICIES, MODELSERVINGS
from kthena_py.kube.resources import PODS
from kthena_py.runtime.reconcile import Request
from kthena_py.testing.fake import Call

from .conftest import IPS, Scene, disaggregated_spec, gauge, modelserving, pod, policy

REQUEST = Request("ns", "p")


def prefill_and_decode(scene: Scene) -> None:
    """``ns/pd``: one prefill replica reporting 6, two decode replicas reporting 1 each; the policy ``p``."""
    scene.put(MODELSERVINGS, modelserving("pd", 1, roles=[("prefill", None), ("decode", 2)]))
    scene.put(
        PODS,
        pod("pf", IPS[0], ms="pd", role="prefill", role_id="prefill-0"),
        pod("d0", IPS[1], ms="pd", role="decode", role_id="decode-0"),
        pod("d1", IPS[2], ms="pd", role="decode", role_id="decode-1"),
    )
    scene.put(AUTOSCALINGPOLICIES, policy("p", disaggregated_spec(scene.port)))
    scene.servers.bodies.update(
        {IPS[0]: gauge("prefill_load", 6), IPS[1]: gauge("decode_load", 1), IPS[2]: gauge("decode_load", 1)}
    )


def role_writes(scene: Scene) -> list[Call]:
    return [c for c in scene.kube.calls_of("patch", MODELSERVINGS) if c.options["patch_type"] == "json"]


def role_counts(scene: Scene, name: str = "pd") -> dict[str, int | None]:
    return {r["name"]: r.get("replicas") for r in scene.get(MODELSERVINGS, name)["spec"]["template"]["roles"]}


async def test_the_ratio_raises_decode(scene: Scene) -> None:
    # Kthena's TestDoDisaggregatedScale_RatioRaisesDecode.
    prefill_and_decode(scene)
    await TargetReconciler(scene.deps).reconcile(REQUEST)
    [call] = role_writes(scene)
    assert call.options["field_manager"] == FIELD_MANAGER
    uid = scene.get(MODELSERVINGS, "pd")["metadata"]["uid"]
    assert call.body == [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/spec/template/roles/0/name", "value": "prefill"},
        {"op": "add", "path": "/spec/template/roles/0/replicas", "value": 6},
        {"op": "test", "path": "/spec/template/roles/1/name", "value": "decode"},
        {"op": "add", "path": "/spec/template/roles/1/replicas", "value": 6},
    ]
    assert role_counts(scene) == {"prefill": 6, "decode": 6}
    status = scene.status()["disaggregatedStatus"]
    assert status["ratioAdjusted"] is True
    assert status["ratioStatus"] == {"numeratorRole": "prefill", "denominatorRole": "decode", "currentRatio": "1"}
    roles = {r["name"]: (r["currentReplicas"], r["desiredReplicas"]) for r in status["roles"]}
    assert roles == {"decode": (2, 2), "prefill": (1, 6)}
    assert scene.condition("RatioConstraintViolated") == ("False", "RatioSatisfied")
    assert "prefill 1->6" in scene.recorded()[-1][2] and "decode 2->6" in scene.recorded()[-1][2]
    assert not [e for e in scene.recorded() if e[0] == "Warning"]


async def test_a_missing_role_is_an_invalid_target(scene: Scene) -> None:
    scene.put(MODELSERVINGS, modelserving("pd", 1, roles=[("prefill", 1)]))
    scene.put(AUTOSCALINGPOLICIES, policy("p", disaggregated_spec(scene.port)))
    await TargetReconciler(scene.deps).reconcile(REQUEST)
    assert scene.condition("TargetFound") == ("False", "TargetInvalid")
    assert scene.message("TargetFound") == "role decode not found in model serving ns/pd"
    assert scene.writes() == [c for c in scene.writes() if c.rt == AUTOSCALINGPOLICIES]


def test_role_patch_vector() -> None:
    ms = modelserving("pd", 1, roles=[("prefill", None), ("decode", 2)])
    ops = role_patch(ms, {"prefill": 3, "decode": 4})
    assert len(ops) == 5 and ops[0] == {"op": "test", "path": "/metadata/uid", "value": "uid-pd"}
    assert role_patch(ms, {"prefill": 1, "decode": 2}) == []


async def test_roles_reordered_meanwhile_fail_the_patch_as_a_whole_and_the_next_pass_recomputes(scene: Scene) -> None:
    """The cache has not seen the reorder yet (its watch lags): the patch's name tests fail (422), nothing moves."""
    prefill_and_decode(scene)
    reconciler = TargetReconciler(scene.deps)
    scene.kube.hold()
    reordered = scene.get(MODELSERVINGS, "pd")
    reordered["spec"]["template"]["roles"].reverse()
    scene.put(MODELSERVINGS, reordered)
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after  # the next period, not a tight loop
    assert len(role_writes(scene)) == 1
    assert role_counts(scene) == {"decode": 2, "prefill": None}
    assert scene.condition("Ready") == ("False", "ScaleFailed")
    [(kind, reason, message)] = [e for e in scene.recorded() if e[0] == "Warning"]
    assert (kind, reason) == ("Warning", "FailedRescale")
    assert message == (
        "cannot scale ns/pd (decode 2->6, prefill 1->6): 422 Invalid: "
        "jsonpatch: test operation for path '/spec/template/roles/0/name' failed"
    )
    assert HISTORY_ANNOTATION not in (scene.get(AUTOSCALINGPOLICIES, "p")["metadata"].get("annotations") or {})
    scene.kube.release()
    scene.tick()
    await reconciler.reconcile(REQUEST)
    assert role_writes(scene)[-1].body[1] == {"op": "test", "path": "/spec/template/roles/0/name", "value": "decode"}
    assert role_counts(scene) == {"decode": 6, "prefill": 6}
    assert scene.condition("Ready") == ("True", "Reconciled")


async def test_a_replacement_modelserving_of_the_same_name_is_never_patched(scene: Scene) -> None:
    """Deleted and created again before the cache saw it: the patch's UID test fails; the newcomer is untouched."""
    prefill_and_decode(scene)
    reconciler = TargetReconciler(scene.deps)
    scene.kube.hold()
    await scene.kube.delete(MODELSERVINGS, "pd", "ns")
    newcomer = modelserving("pd", 1, roles=[("prefill", None), ("decode", 2)])
    del newcomer["metadata"]["uid"]
    await scene.kube.create(MODELSERVINGS, newcomer)
    await reconciler.reconcile(REQUEST)
    assert len(role_writes(scene)) == 1
    assert role_counts(scene) == {"prefill": None, "decode": 2}
    assert scene.condition("Ready") == ("False", "ScaleFailed")


async def test_a_target_deleted_before_the_patch_is_reported_missing(scene: Scene) -> None:
    prefill_and_decode(scene)
    reconciler = TargetReconciler(scene.deps)
    scene.kube.hold()
    await scene.kube.delete(MODELSERVINGS, "pd", "ns")
    result = await reconciler.reconcile(REQUEST)
    assert result is not None and result.requeue_after
    assert len(role_writes(scene)) == 1
    assert scene.condition("TargetFound") == ("False", "TargetNotFound")
    assert scene.message("TargetFound") == "model serving ns/pd not found"
    assert [e for e in scene.recorded() if e[1] in ("FailedRescale", "SuccessfulRescale")] == []
