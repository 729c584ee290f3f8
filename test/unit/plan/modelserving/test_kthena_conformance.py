"""Conformance with the strings Kthena writes, where dashboards, scripts and Kthena's own tools look (issue 16).

Each test pins one string or counter exactly as Kthena writes it, or as ``docs/compatibility.md`` says kthena_py
deliberately differs. The last tests keep the tables of ``docs/compatibility.md`` in step with the reasons, condition
types and status fields the code writes.
"""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path
from typing import Any

import pytest

from kthena_py.api.autoscaling import AutoscalingPolicyStatus
from kthena_py.api.modelserving import ModelServingSpec, ModelServingStatus, Role
from kthena_py.controllers import register_all
from kthena_py.controllers.autoscaling import status as asp_status
from kthena_py.controllers.autoscaling.base import reconciled, target_found
from kthena_py.controllers.components import AUTOSCALER, COMPONENTS, MODELBOOSTER, MODELSERVING
from kthena_py.controllers.modelserving.apply import PlanApplier
from kthena_py.controllers.modelserving.notify import RunningNotifier
from kthena_py.controllers.resources import MODELSERVINGS
from kthena_py.kube.resources import EVENTS, PODS
from kthena_py.plan.modelserving.core import naming
from kthena_py.plan.modelserving.core.revision import revision_data
from kthena_py.plan.modelserving.core.types import MSRef, Plan
from kthena_py.plan.modelserving.groups import status as ms_status
from kthena_py.plan.modelserving.groups.events import KTHENA_ROLE_REASONS
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.render.pods import RenderContext, build_pod
from kthena_py.runtime.cache import SharedCache
from kthena_py.runtime.events import EventRecorder
from kthena_py.runtime.manager import Manager
from kthena_py.testing.fake import FakeKube
from kthena_py.vocab import conditions as vocab_conditions

from .builders import NO_VOLCANO, NOW, Cluster, ms_doc, parse, ref_of, role_doc

REPO = Path(__file__).resolve().parents[4]
COMPATIBILITY = REPO / "docs" / "compatibility.md"
TABLES_HEADING = "## Status, conditions and events, string by string"


def _status(cluster: Cluster, doc: dict[str, Any]) -> dict[str, Any]:
    ms = parse(doc)
    status = plan_servinggroups(ms, ref_of(ms), cluster.observed(), NO_VOLCANO, NOW).status
    assert status is not None
    return status


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


# --- status.labelSelector ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["prefill", "a", "decode-x", "z9"])
def test_label_selector_is_kthenas_string(role: str) -> None:
    # Kthena renders a label set: `key=value` terms sorted as strings, so `role-id=` sorts before `role=`.
    doc = ms_doc(role_doc(role), role_doc("other"), name="llm")
    assert _status(Cluster(), doc)["labelSelector"] == (
        "modelserving.volcano.sh/entry=true,modelserving.volcano.sh/name=llm,"
        f"modelserving.volcano.sh/role-id={role}-0,modelserving.volcano.sh/role={role}"
    )


# --- conditions -------------------------------------------------------------------------------------------------


def test_available_condition_is_kthenas() -> None:
    cluster = Cluster()
    doc = ms_doc(role_doc("prefill", workers=1), replicas=2)
    cluster.converge(parse(doc))
    available = _conditions(_status(cluster, doc))["Available"]
    assert (available["status"], available["reason"], available["message"]) == (
        "True",
        "AllGroupsReady",
        "All Serving groups are ready",
    )


def test_progressing_condition_has_kthenas_reason_and_message_prefix() -> None:
    progressing = _conditions(_status(Cluster(), ms_doc(replicas=2)))["Progressing"]
    assert (progressing["status"], progressing["reason"]) == ("True", "GroupProgressing")
    assert progressing["message"] == "Some groups is progressing: [0 1]; llama-0 (creating), llama-1 (creating)"
    assert progressing["message"].startswith("Some groups is progressing: [0 1]")


# --- counters ---------------------------------------------------------------------------------------------------


def _counters(status: dict[str, Any]) -> tuple[int, int, int, int]:
    return status["replicas"], status["updatedReplicas"], status["availableReplicas"], status["currentReplicas"]


def test_current_replicas_stays_zero_until_available() -> None:
    cluster = Cluster(ready=False)
    doc = ms_doc(role_doc("prefill", workers=1), replicas=2)
    cluster.converge(parse(doc))
    assert _counters(_status(cluster, doc)) == (2, 2, 0, 0)
    cluster.set_status("llama-0-prefill-0-0", **_ready())
    cluster.set_status("llama-0-prefill-0-1", **_ready())
    assert _counters(_status(cluster, doc)) == (2, 2, 1, 0)
    for name in cluster.pods():
        cluster.set_status(name, **_ready())
    assert _counters(_status(cluster, doc)) == (2, 2, 2, 2)


def test_current_replicas_with_a_partition_counts_only_outdated_groups() -> None:
    cluster = Cluster()
    doc = ms_doc(replicas=2)
    doc["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"partition": 0}}
    cluster.converge(parse(doc))
    assert _counters(_status(cluster, doc)) == (2, 2, 2, 0)


def test_current_replicas_counts_every_outdated_revision() -> None:
    cluster = Cluster()
    v1 = ms_doc(role_doc("prefill", image="img:1"), replicas=1)
    cluster.converge(parse(v1))
    v2 = ms_doc(role_doc("prefill", image="img:2"), replicas=2)
    cluster.converge(parse(v2))
    v3 = ms_doc(role_doc("prefill", image="img:3"), replicas=3)
    cluster.converge(parse(v3))
    status = _status(cluster, v3)
    assert _counters(status) == (3, 1, 3, 2)  # groups 0 and 1 are on two different older revisions


def _ready() -> dict[str, Any]:
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "x"}]}


# --- events -----------------------------------------------------------------------------------------------------


def created(kube: FakeKube) -> list[dict[str, Any]]:
    """The Events created on the API server, in order."""
    return [obj for kind, obj in kube.changes(EVENTS) if kind == "ADDED"]


def _ms_object() -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "llama", "namespace": "ns", "uid": "ms-uid-1"},
    }


async def test_role_events_are_one_event_per_role_instance_with_kthenas_message() -> None:
    doc = ms_doc(role_doc("prefill", replicas=2), role_doc("decode", workers=1), replicas=2)
    ms = parse(doc)
    plan = plan_servinggroups(ms, ref_of(ms), Cluster().observed(), NO_VOLCANO, NOW)
    kube = FakeKube()
    recorder = EventRecorder(kube, MODELSERVING, coalesce_seconds=60.0)
    await PlanApplier(kube, recorder, "test").apply(Plan(events=plan.events), _ms_object())
    await recorder.flush()
    role_events = sorted(e["message"] for e in created(kube) if e["reason"] == "RoleCreating")
    assert role_events == sorted(
        f"Role {role}/{role}-{r} in ServingGroup llama-{g} is now Creating"
        for g in (0, 1)
        for role, replicas in (("prefill", 2), ("decode", 1))
        for r in range(replicas)
    )
    assert all(e["source"] == {"component": "modelserving-controller"} for e in created(kube))
    assert all(e["reportingComponent"] == "modelserving-controller" for e in created(kube))
    # kthena_py's own reasons stay joined: one ServingGroupCreating Event naming both groups.
    groups = [e["message"] for e in created(kube) if e["reason"] == "ServingGroupCreating"]
    assert groups == ["ServingGroup llama-0 is now Creating; ServingGroup llama-1 is now Creating"]


async def test_role_running_is_one_event_per_role_instance() -> None:
    kube = FakeKube()
    recorder = EventRecorder(kube, MODELSERVING, coalesce_seconds=60.0)
    doc = ms_doc(role_doc("decode", replicas=2))
    kube.put(MODELSERVINGS, {**_ms_object(), "spec": copy.deepcopy(doc["spec"])})
    pods = [
        kube.put(PODS, _pod("llama-0-decode-0-0", "decode-0")),
        kube.put(PODS, _pod("llama-0-decode-1-0", "decode-1")),
    ]
    cache = SharedCache(kube)
    cache.informer(MODELSERVINGS)
    cache.informer(PODS)
    kube.attach(cache)
    asked: list[str] = []

    def responsible(namespace: str) -> bool:
        asked.append(namespace)
        return True

    notifier = RunningNotifier(cache, recorder, responsible)
    for pod in pods:
        old = copy.deepcopy(pod)
        old["status"]["conditions"][0]["status"] = "False"
        notifier.on_update(old, pod)
    await recorder.flush()
    assert sorted(e["message"] for e in created(kube) if e["reason"] == "RoleRunning") == [
        "Role decode/decode-0 in ServingGroup llama-0 is now Running",
        "Role decode/decode-1 in ServingGroup llama-0 is now Running",
    ]
    assert asked == ["ns", "ns"]
    # another replica (not the leader, or not the owner of the namespace's shard) records nothing
    elsewhere = EventRecorder(kube, MODELSERVING, coalesce_seconds=60.0)
    silent = RunningNotifier(cache, elsewhere, lambda namespace: False)
    before = len(created(kube))
    for pod in pods:
        old = copy.deepcopy(pod)
        old["status"]["conditions"][0]["status"] = "False"
        silent.on_update(old, pod)
    await elsewhere.flush()
    assert len(created(kube)) == before


def _pod(name: str, role_id: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {
                naming.LABEL_NAME: "llama",
                naming.LABEL_GROUP_NAME: "llama-0",
                naming.LABEL_ROLE: "decode",
                naming.LABEL_ROLE_ID: role_id,
            },
        },
        "status": _ready(),
    }


def test_kthenas_role_reasons() -> None:
    assert {"RoleCreating", "RoleRunning", "RoleDeleting"} == KTHENA_ROLE_REASONS


async def test_each_controller_records_with_its_source_component() -> None:
    assert (MODELSERVING, AUTOSCALER, MODELBOOSTER) == (
        "modelserving-controller",
        "autoscaler-controller",
        "modelbooster-controller",
    )
    manager = Manager(FakeKube())  # the manager and controllers are only constructed here
    register_all(manager)
    by_name: dict[str, Any] = {c.name: c.reconciler for c in manager.controllers}
    assert by_name["modelserving"].recorder.component == "modelserving-controller"
    assert by_name["modelserving-gang"].applier.recorder.component == "modelserving-controller"
    assert by_name["modelserving-scheduling"].scheduling.recorder.component == "modelserving-controller"
    assert by_name["autoscaling"].deps.recorder.component == "autoscaler-controller"
    assert by_name["autoscaling-heterogeneous"].deps.recorder.component == "autoscaler-controller"
    handlers = manager.cache.informer(PODS)._handlers  # the handlers registered on the shared Pod informer
    (notifier,) = [h for h in handlers if isinstance(h, RunningNotifier)]
    assert notifier.recorder.component == "modelserving-controller"
    assert manager.recorder_for(MODELSERVING) is notifier.recorder  # one recorder per component


# --- AutoscalingPolicy condition strings --------------------------------------------------------------------------


def test_autoscaling_condition_strings_kthena_writes() -> None:
    ready = reconciled("disaggregated")
    assert (ready.type, ready.status, ready.reason, ready.message) == (
        "Ready",
        "True",
        "Reconciled",
        "disaggregated autoscaling policy reconciled",
    )
    found = target_found()
    assert (found.type, found.status, found.reason, found.message) == (
        "TargetFound",
        "True",
        "TargetFound",
        "target model serving and roles found",
    )


# --- pods: env order and controller labels ------------------------------------------------------------------------


def _expand(env: list[dict[str, Any]]) -> dict[str, str]:
    """Kubernetes' `$(VAR)` expansion: only variables defined earlier in the list expand."""
    seen: dict[str, str] = {}
    for item in env:
        value = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: seen.get(m[1], m[0]), item.get("value", ""))
        seen[item["name"]] = value
    return seen


ENTRY_CONTAINERS = [{"name": "m", "image": "i", "env": [{"name": "A", "value": "1"}]}]


def test_plugin_env_follows_the_controller_env_and_expands() -> None:
    role = Role.model_validate(
        {
            "name": "decode",
            "workerReplicas": 1,
            "entryTemplate": {
                "spec": {"containers": [{"name": "m", "image": "i", "env": [{"name": "A", "value": "1"}]}]}
            },
            "workerTemplate": {"spec": {"containers": [{"name": "m", "image": "i"}]}},
        }
    )
    plugins = [{"name": "demo-pod-tweaks", "config": {"env": [{"name": "PEER", "value": "$(ENTRY_ADDRESS):8000"}]}}]
    spec = ModelServingSpec.model_validate(
        {"template": {"roles": [role.model_dump(by_alias=True, exclude_none=True)]}, "plugins": plugins}
    )
    ctx = RenderContext(MSRef("llm", "ns", "uid"), "rev", revision_data(spec), gang=False)
    for index, names in ((0, ["A"]), (1, [])):
        env = build_pod(ctx, role, 0, 0, index, "h")["spec"]["containers"][0]["env"]
        assert [e["name"] for e in env] == [*names, "GROUP_SIZE", "ENTRY_ADDRESS", "WORKER_INDEX", "PEER"]
        assert _expand(env)["PEER"] == "llm-0-decode-0-0.ns:8000"


def test_template_cannot_override_controller_labels() -> None:
    # A deliberate difference (docs/compatibility.md): Kthena lets the template win.
    role = Role.model_validate(
        {
            "name": "decode",
            "workerReplicas": 1,
            "entryTemplate": {
                "metadata": {"labels": {naming.LABEL_ROLE: "x", naming.LABEL_ROLE_ID: "x-9", "app": "a"}},
                "spec": {"containers": [{"name": "m", "image": "i"}]},
            },
            "workerTemplate": {
                "metadata": {"labels": {naming.LABEL_ENTRY: "true"}},
                "spec": {"containers": [{"name": "m", "image": "i"}]},
            },
        }
    )
    spec = ModelServingSpec.model_validate({"template": {"roles": [role.model_dump(by_alias=True, exclude_none=True)]}})
    ctx = RenderContext(MSRef("llm", "ns", "uid"), "rev", revision_data(spec), gang=False)
    entry = build_pod(ctx, role, 0, 0, 0, "h")["metadata"]["labels"]
    worker = build_pod(ctx, role, 0, 0, 1, "h")["metadata"]["labels"]
    assert (entry[naming.LABEL_ROLE], entry[naming.LABEL_ROLE_ID], entry["app"]) == ("decode", "decode-0", "a")
    assert naming.LABEL_ENTRY not in worker


# --- docs/compatibility.md is in step with the code ---------------------------------------------------------------


def _tables() -> str:
    text = COMPATIBILITY.read_text()
    start = text.index(TABLES_HEADING)
    end = text.find("\n## ", start + len(TABLES_HEADING))
    return text[start : end if end >= 0 else len(text)]


def _literal(node: ast.expr) -> str | None:
    """A string literal, or a reason named from the vocabulary (``REASON_IDLE`` is ``"Idle"``)."""
    if isinstance(node, ast.Name) and isinstance(vars(vocab_conditions).get(node.id), str):
        return str(vars(vocab_conditions)[node.id])
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _reasons_in_code() -> set[str]:
    """String-literal reasons of every Event and condition the controllers and planners write."""
    # recorder.event(obj, type, reason, message), PlannedEvent(type, reason, message), ...
    positions = {"PlannedEvent": 1, "event": 2, "ConditionUpdate": 2, "set_condition": 3}
    found: set[str] = set()
    for root in ("kthena_py/plan", "kthena_py/controllers"):
        for path in (REPO / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                at = positions.get(name)
                if name == "event" and len(node.args) == 3:
                    at = 1  # the planner's builder: event(type, reason, message)
                if at is not None and len(node.args) > at:
                    reason = _literal(node.args[at])
                    if reason is not None:
                        found.add(reason)
    return found


def test_every_reason_the_code_writes_is_in_the_tables() -> None:
    reasons = _reasons_in_code()
    # the scan must see the code at all: a few from every writer
    assert {"RoleRecreating", "InvalidSpec", "AllGroupsReady", "GroupProgressing", "Idle"} <= reasons
    assert KTHENA_ROLE_REASONS | {"ServingGroupCreating", "ServingGroupRunning", "ServingGroupDeleting"} <= reasons
    assert {"SuccessfulRescale", "Reconciled", "NoMetrics", "ScaleFailed", "RatioUnsatisfiable"} <= reasons
    tables = _tables()
    missing = sorted(r for r in reasons if f"`{r}`" not in tables)
    assert missing == [], f"reasons missing from docs/compatibility.md: {missing}"


def test_every_condition_type_and_status_field_is_in_the_tables() -> None:
    tables = _tables()
    types = [ms_status.AVAILABLE, ms_status.PROGRESSING]
    types += [asp_status.READY, asp_status.TARGET_FOUND, asp_status.METRICS_AVAILABLE, asp_status.RATIO_VIOLATED]
    assert [t for t in types if f"| `{t}` |" not in tables] == []
    fields = [f.alias for f in ModelServingStatus.model_fields.values()]
    fields += [f.alias for f in AutoscalingPolicyStatus.model_fields.values()]
    assert len(fields) > 10 and all(fields)
    assert [f for f in fields if not re.search(rf"\| `{f}(\[\])?` \|", tables)] == []
    assert [c for c in COMPONENTS.values() if f"`{c}`" not in tables] == []


def test_the_tables_quote_the_pinned_strings() -> None:
    tables = _tables()
    for text in (
        "modelserving.volcano.sh/entry=true,modelserving.volcano.sh/name=<ms>,"
        "modelserving.volcano.sh/role-id=<role0>-0,modelserving.volcano.sh/role=<role0>",
        "`All Serving groups are ready`",
        "`GroupProgressing`: `Some groups is progressing: [<",
        "`Role <role>/<role>-<r> in ServingGroup <group> is now Creating`",
        "`disaggregated autoscaling policy reconciled`",
        "`modelserving-controller`",
    ):
        assert text in tables, text
