"""Hypothesis properties of the ModelServing planners on random specs and perturbed cluster states."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.state import build_state
from kthena_py.plan.modelserving.core.types import PodGroupSupport
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups

from .builders import NO_VOLCANO, NOW, VOLCANO, VOLCANO_OLD, Cluster, is_noop, ms_doc, parse, ref_of, role_doc

SETTINGS = settings(max_examples=120, deadline=None, database=None)

_ROLE_NAMES = ("prefill", "decode")


@st.composite
def _specs(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 2))
    roles = [
        role_doc(
            _ROLE_NAMES[i],
            replicas=draw(st.integers(0, 3)),
            workers=draw(st.integers(0, 2)),
            image=draw(st.sampled_from(["img:1", "img:2"])),
        )
        for i in range(count)
    ]
    return ms_doc(
        *roles,
        replicas=draw(st.integers(0, 4)),
        policy=draw(st.sampled_from(["RoleRecreate", "ServingGroupRecreate", "None"])),
        grace=draw(st.sampled_from([0, 30])),
        scheduler=draw(st.sampled_from(["volcano", "default-scheduler"])),
        gang=draw(st.sampled_from([None, {"prefill": 1}])),
    )


_SUPPORT = st.sampled_from([VOLCANO, VOLCANO_OLD, NO_VOLCANO])
_OPS = st.lists(
    st.tuples(st.sampled_from(["remove", "fail", "terminate", "not_ready", "restart", "cost"]), st.integers(0, 99)),
    max_size=6,
)


def _perturb(cluster: Cluster, ops: list[tuple[str, int]]) -> None:
    for op, index in ops:
        pods = sorted(cluster.pods())
        if not pods:
            return
        name = pods[index % len(pods)]
        if op == "remove":
            cluster.remove(name)
        elif op == "fail":
            cluster.fail(name, NOW - 1000)
        elif op == "terminate":
            cluster.terminate(name)
        elif op == "not_ready":
            cluster.not_ready(name, NOW - 1000)
        elif op == "restart":
            cluster.restart(name, NOW - 1000)
        else:
            cluster.set_cost(name, str(index - 50))


def _cluster(before: dict[str, Any], support: PodGroupSupport, ops: list[tuple[str, int]]) -> Cluster:
    cluster = Cluster()
    cluster.converge(parse(before), support)
    _perturb(cluster, ops)
    return cluster


@SETTINGS
@given(before=_specs(), after=_specs(), support=_SUPPORT, ops=_OPS)
def test_plans_only_touch_observed_objects_and_name_pods_uniquely(
    before: dict[str, Any], after: dict[str, Any], support: PodGroupSupport, ops: list[tuple[str, int]]
) -> None:
    cluster = _cluster(before, support, ops)
    ms = parse(after)
    observed = cluster.observed()
    known = cluster.all_uids()
    for plan in (
        plan_podgroups(ms, ref_of(ms), observed, support),
        plan_servinggroups(ms, ref_of(ms), observed, support, NOW),
    ):
        # a plan never deletes (or updates) an object whose UID it did not observe
        for delete in plan.deletes:
            assert (delete.kind, delete.name, delete.uid) in known
        for update in plan.updates:
            assert (update.kind, update.name, update.uid) in known
        # nothing already observed is created again, and created names are unique
        names = [(o["kind"], o["metadata"]["name"]) for o in plan.creates]
        assert len(names) == len(set(names))
        for kind, name in names:
            assert name not in cluster.objects(kind)
        # pod names follow the naming scheme and match their labels
        for obj in plan.creates:
            if obj["kind"] == "Pod":
                labels = obj["metadata"]["labels"]
                group = naming.parse_group_name("llama", labels[naming.LABEL_GROUP_NAME])
                ordinal = naming.parse_role_id(labels[naming.LABEL_ROLE], labels[naming.LABEL_ROLE_ID])
                assert group is not None and ordinal is not None
                index = naming.parse_ordinal(obj["metadata"]["name"])
                assert index is not None
                assert obj["metadata"]["name"] == naming.pod_name(
                    "llama", group, labels[naming.LABEL_ROLE], ordinal, index[1]
                )
                assert (labels.get(naming.LABEL_ENTRY) == "true") == (index[1] == 0)
    # stable: the same inputs give the same plan
    assert plan_servinggroups(ms, ref_of(ms), observed, support, NOW) == plan_servinggroups(
        ms, ref_of(ms), cluster.observed(), support, NOW
    )


@SETTINGS
@given(before=_specs(), after=_specs(), support=_SUPPORT, ops=_OPS)
def test_scale_down_never_removes_a_ready_group_while_a_not_ready_one_is_kept(
    before: dict[str, Any], after: dict[str, Any], support: PodGroupSupport, ops: list[tuple[str, int]]
) -> None:
    cluster = _cluster(before, support, ops)
    ms = parse(after)
    state = build_state(ms, ref_of(ms), cluster.observed(), support)
    ready = {g.ordinal: state.group_ready(g) for g in state.groups.sorted() if g.live}
    plan = state.targets.plan
    if any(ready[o] for o in plan.remove):
        assert all(ready[o] for o in plan.keep)
    assert len(plan.desired) == ms.spec.replicas
    assert set(plan.keep) | set(plan.remove) == set(ready)
    sg_plan = plan_servinggroups(ms, ref_of(ms), cluster.observed(), support, NOW)
    deleting = {e.message.split()[1] for e in sg_plan.events if e.reason == "ServingGroupDeleting"}
    assert deleting == {naming.group_name("llama", o) for o in plan.remove}


@SETTINGS
@given(spec=_specs(), support=_SUPPORT)
def test_one_pass_from_an_empty_cluster_reaches_a_fixed_point(spec: dict[str, Any], support: PodGroupSupport) -> None:
    cluster = Cluster()
    ms = parse(spec)
    cluster.reconcile(ms, support)
    pg_plan, sg_plan = cluster.reconcile(ms, support)
    assert is_noop(pg_plan) and is_noop(sg_plan)
    assert sg_plan.requeue_after is None


@SETTINGS
@given(before=_specs(), after=_specs(), support=_SUPPORT, ops=_OPS)
def test_applying_plans_converges_to_the_spec(
    before: dict[str, Any], after: dict[str, Any], support: PodGroupSupport, ops: list[tuple[str, int]]
) -> None:
    cluster = _cluster(before, support, ops)
    cluster.finish_terminating()
    ms = parse(after)
    passes = cluster.converge(ms, support, rounds=6)
    assert passes <= 4
    # at the fixed point, re-planning yields no creates, deletes or updates
    pg_plan, sg_plan = cluster.reconcile(ms, support)
    assert is_noop(pg_plan) and is_noop(sg_plan)
    # the desired number of groups exists; groups on the update revision have exactly the spec's instances
    # (groups left on an older revision keep that revision's roles: rolling updates are out of scope)
    state = build_state(ms, ref_of(ms), cluster.observed(), support)
    pods = [p["metadata"] for p in cluster.pods().values()]
    groups = {m["labels"][naming.LABEL_GROUP_NAME] for m in pods}
    if any(r.replicas > 0 for r in ms.spec.template.roles):
        assert len(groups) == ms.spec.replicas
    assert len(groups) <= ms.spec.replicas
    for group in groups:
        members = [m for m in pods if m["labels"][naming.LABEL_GROUP_NAME] == group]
        if any(m["labels"][naming.LABEL_REVISION] != state.revision for m in members):
            continue
        ordinal = naming.parse_group_name("llama", group) or 0
        for role in ms.spec.template.roles:
            ids = sorted(
                {m["labels"][naming.LABEL_ROLE_ID] for m in members if m["labels"][naming.LABEL_ROLE] == role.name}
            )
            assert len(ids) == role.replicas  # instance ordinals are kept, never renumbered
            for role_id in ids:
                r = naming.parse_role_id(role.name, role_id) or 0
                expected = {naming.pod_name("llama", ordinal, role.name, r, i) for i in range(role.worker_replicas + 1)}
                assert {m["name"] for m in members if m["labels"][naming.LABEL_ROLE_ID] == role_id} == expected
    if naming.gang_applies(ms.spec.scheduler_name, support):
        assert sorted(cluster.objects("PodGroup")) == sorted(
            naming.group_name("llama", o)
            for o in build_state(ms, ref_of(ms), cluster.observed(), support).targets.plan.desired
        )
    else:
        assert not cluster.objects("PodGroup")
