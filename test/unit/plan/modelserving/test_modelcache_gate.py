"""The serving gate, pure: decisions, the rendered mount, the revision, and the planners while it is closed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api.modelcache import (
    MODEL_CACHE_MOUNT_PATH,
    MODEL_CACHE_NAME_ENV,
    MODEL_CACHE_VOLUME,
    MODEL_PATH_ENV,
    ModelCache,
    model_dir,
)
from kthena_py.plan.modelserving.core.modelcache import CacheGate, CacheMount, decide_gate, format_bytes
from kthena_py.plan.modelserving.core.revision import (
    build_controller_revision,
    parse_controller_revision,
    revision_data,
    revision_hash,
    spec_revision_hash,
)
from kthena_py.plan.modelserving.core.types import Observed
from kthena_py.plan.modelserving.groups.modelcached import decide_model_cached
from kthena_py.plan.modelserving.groups.servinggroups import plan_servinggroups
from kthena_py.plan.modelserving.render.modelcache import HOSTNAME_LABEL, mount_model_cache
from kthena_py.plan.modelserving.render.podgroups import plan_podgroups
from kthena_py.plan.modelserving.rollout.rollout import plan_rollout
from kthena_py.vocab.labels import MODEL_CACHE

from .builders import NO_VOLCANO, NOW, VOLCANO, Cluster, created, parse, ref_of, role_doc

ANNOTATED = {MODEL_CACHE: "llama-3"}
SOURCE = "hf://meta/llama-3"


def cache_doc(
    phase: str | None = "Ready",
    *,
    storage: dict[str, Any] | None = None,
    nodes: list[str] | None = None,
    degraded: tuple[str, str] | None = None,
    progress: dict[str, Any] | None = None,
    generation: int = 1,
    observed: int | None = 1,
    source: str = SOURCE,
    name: str = "llama-3",
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if nodes is not None:
        status["nodes"] = nodes
    if observed is not None:
        status["observedGeneration"] = observed
    if progress is not None:
        status["progress"] = progress
    if degraded is not None:
        status["conditions"] = [
            {
                "type": "Degraded",
                "status": "True",
                "reason": degraded[0],
                "message": degraded[1],
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    return {
        "metadata": {"name": name, "namespace": "ns", "generation": generation},
        "spec": {"source": source, "storage": storage or {"persistentVolumeClaim": {"claimName": "models"}}},
        "status": status,
    }


def gate_of(doc: dict[str, Any] | None, templates: list[tuple[str, dict[str, Any]]] | None = None) -> CacheGate:
    cache = ModelCache.model_validate(doc) if doc is not None else None
    gate = decide_gate(ANNOTATED, templates or [], cache)
    assert gate is not None
    return gate


def ms_with(annotations: dict[str, str] | None = None, replicas: int = 2, **role: Any) -> Any:
    from .builders import ms_doc

    return parse(ms_doc(role_doc("prefill", **role), replicas=replicas, annotations=annotations))


# -- the decision ---------------------------------------------------------------------------------------------------


def test_no_annotation_means_no_gate() -> None:
    assert decide_gate({}, [], None) is None
    assert decide_gate({"other": "x"}, [], ModelCache.model_validate(cache_doc())) is None


@pytest.mark.parametrize(
    ("doc", "state", "reason", "message"),
    [
        (None, "waiting", "WaitingForModelCache", "ModelCache llama-3 not found"),
        (cache_doc(None), "waiting", "WaitingForModelCache", "ModelCache llama-3 is Pending"),
        (cache_doc("Pending"), "waiting", "WaitingForModelCache", "ModelCache llama-3 is Pending"),
        (
            cache_doc(
                "Downloading",
                progress={"bytesDone": 1288490189, "bytesTotal": 3113851290, "filesDone": 1, "percent": "42%"},
            ),
            "waiting",
            "WaitingForModelCache",
            "ModelCache llama-3 is Downloading (42%, 1.2 GiB of 2.9 GiB)",
        ),
        (
            cache_doc("Ready", generation=2, observed=1),
            "waiting",
            "WaitingForModelCache",
            "ModelCache llama-3 has not yet staged its latest spec (generation 2)",
        ),
        (cache_doc("Ready"), "open", "ModelCacheReady", "ModelCache llama-3 is Ready"),
        (cache_doc("Ready", observed=None), "open", "ModelCacheReady", "ModelCache llama-3 is Ready"),
        (
            cache_doc("Failed", degraded=("IntegrityCheckFailed", "config.json: sha256 abc, expected def")),
            "failed",
            "ModelCacheFailed",
            "ModelCache llama-3 failed (IntegrityCheckFailed): config.json: sha256 abc, expected def",
        ),
        (
            cache_doc("Ready", degraded=("StorageUnavailable", "claim models is gone")),
            "failed",
            "ModelCacheFailed",
            "ModelCache llama-3 failed (StorageUnavailable): claim models is gone",
        ),
        (cache_doc("Failed"), "failed", "ModelCacheFailed", "ModelCache llama-3 failed"),
        (
            cache_doc("Ready", storage={"nodeLocal": {"path": "/mnt/m", "nodeSelector": {"gpu": "a"}}}, nodes=[]),
            "waiting",
            "WaitingForModelCache",
            "ModelCache llama-3 is Ready on no node yet",
        ),
        (
            cache_doc(
                "Ready", storage={"nodeLocal": {"path": "/mnt/m", "nodeSelector": {"gpu": "a"}}}, nodes=["b", "a"]
            ),
            "open",
            "ModelCacheReady",
            "ModelCache llama-3 is Ready on 2 node(s)",
        ),
    ],
)
def test_the_gate_decision(doc: dict[str, Any] | None, state: str, reason: str, message: str) -> None:
    gate = gate_of(doc)
    assert (gate.state, gate.reason, gate.message) == (state, reason, message)
    assert gate.open == (state == "open")


NODE_LOCAL = {"nodeLocal": {"path": "/mnt/m", "nodeSelector": {"gpu": "a"}}}
ON_B = "the download failed on node b: unreachable"


@pytest.mark.parametrize(
    ("doc", "state", "message"),
    [
        # Ready on a, failed on b: pods go to a
        (
            cache_doc("Ready", storage=NODE_LOCAL, nodes=["a"], degraded=("DownloadFailed", ON_B)),
            "open",
            "ModelCache llama-3 is Ready on 1 node(s)",
        ),
        (
            cache_doc("Ready", storage=NODE_LOCAL, nodes=["a"], degraded=("IntegrityCheckFailed", ON_B)),
            "open",
            "ModelCache llama-3 is Ready on 1 node(s)",
        ),
        # Ready on no node, or a storage problem, or claim storage: the failure closes the gate
        (
            cache_doc("Ready", storage=NODE_LOCAL, nodes=[], degraded=("DownloadFailed", ON_B)),
            "failed",
            f"ModelCache llama-3 failed (DownloadFailed): {ON_B}",
        ),
        (
            cache_doc("Ready", storage=NODE_LOCAL, nodes=["a"], degraded=("StorageUnavailable", "no node")),
            "failed",
            "ModelCache llama-3 failed (StorageUnavailable): no node",
        ),
        (
            cache_doc("Failed", storage=NODE_LOCAL, nodes=["a"], degraded=("DownloadFailed", ON_B)),
            "failed",
            f"ModelCache llama-3 failed (DownloadFailed): {ON_B}",
        ),
        (
            cache_doc("Ready", degraded=("DownloadFailed", "unreachable")),
            "failed",
            "ModelCache llama-3 failed (DownloadFailed): unreachable",
        ),
    ],
)
def test_a_node_local_cache_failing_only_on_other_nodes_opens_on_its_ready_nodes(
    doc: dict[str, Any], state: str, message: str
) -> None:
    gate = gate_of(doc)
    assert (gate.state, gate.message) == (state, message)
    assert gate.reason == ("ModelCacheReady" if state == "open" else "ModelCacheFailed")
    if gate.open:
        assert gate.nodes == ("a",)  # the pods' affinity: exactly the nodes it is Ready on


def test_the_failed_gate_carries_the_cache_reason() -> None:
    gate = gate_of(cache_doc("Failed", degraded=("DownloadFailed", "404")))
    assert gate.cache_reason == "DownloadFailed"


def test_an_empty_annotation_names_no_cache() -> None:
    gate = decide_gate({MODEL_CACHE: " "}, [], None)
    assert gate is not None and not gate.open and "names no ModelCache" in gate.message


def test_a_user_volume_or_mount_of_the_same_name_or_path_is_a_conflict_not_an_override() -> None:
    volume = {"containers": [{"name": "main"}], "volumes": [{"name": MODEL_CACHE_VOLUME, "emptyDir": {}}]}
    mount = {"containers": [{"name": "main", "volumeMounts": [{"name": "w", "mountPath": MODEL_CACHE_MOUNT_PATH}]}]}
    for spec in (volume, mount):
        gate = gate_of(cache_doc("Ready"), [("role prefill entryTemplate", spec)])
        assert gate.state == "conflict" and gate.reason == "ModelCacheMountConflict" and not gate.open
        assert "role prefill entryTemplate" in gate.message


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ({"persistentVolumeClaim": {"claimName": "models"}}, CacheMount("llama-3", model_dir(SOURCE), "models")),
        ({"volumeClaimTemplate": {"size": "10Gi"}}, CacheMount("llama-3", model_dir(SOURCE), "llama-3-cache")),
        (
            {"nodeLocal": {"path": "/mnt/m", "nodeSelector": {"gpu": "a"}}},
            CacheMount("llama-3", model_dir(SOURCE), host_path="/mnt/m"),
        ),
    ],
)
def test_the_mount_comes_from_the_spec_whatever_the_phase(storage: dict[str, Any], expected: CacheMount) -> None:
    for phase in ("Pending", "Downloading", "Ready", "Failed"):
        assert gate_of(cache_doc(phase, storage=storage, nodes=["a"])).mount == expected


def test_bytes_read_as_people_read_them() -> None:
    assert [format_bytes(n) for n in (800, 2048, 5 * 2**20, 3 * 2**30)] == ["800 B", "2.0 KiB", "5.0 MiB", "3.0 GiB"]


# -- the render -----------------------------------------------------------------------------------------------------


def pod_with(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": spec}


def test_a_claim_is_mounted_read_only_into_every_container_with_the_env() -> None:
    pod = pod_with({"initContainers": [{"name": "init"}], "containers": [{"name": "a"}, {"name": "b", "env": []}]})
    mount_model_cache(pod, CacheMount("c", "abc", claim_name="models"), None)
    spec = pod["spec"]
    assert spec["volumes"] == [
        {"name": MODEL_CACHE_VOLUME, "persistentVolumeClaim": {"claimName": "models", "readOnly": True}}
    ]
    for container in [*spec["initContainers"], *spec["containers"]]:
        assert container["volumeMounts"] == [
            {"name": MODEL_CACHE_VOLUME, "mountPath": MODEL_CACHE_MOUNT_PATH, "subPath": "abc", "readOnly": True}
        ]
        assert container["env"] == [
            {"name": MODEL_PATH_ENV, "value": MODEL_CACHE_MOUNT_PATH},
            {"name": MODEL_CACHE_NAME_ENV, "value": "c"},
        ]
    assert "affinity" not in spec


def test_a_variable_the_user_set_is_kept_and_not_duplicated() -> None:
    pod = pod_with({"containers": [{"name": "a", "env": [{"name": MODEL_PATH_ENV, "value": "/mine"}]}]})
    mount_model_cache(pod, CacheMount("c", "abc", claim_name="models"), None)
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": MODEL_PATH_ENV, "value": "/mine"},
        {"name": MODEL_CACHE_NAME_ENV, "value": "c"},
    ]


def test_a_node_local_cache_is_a_host_path_with_affinity_anded_into_each_required_term() -> None:
    terms = [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad"]}]},
    ]
    preferred = [{"weight": 1, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
            "preferredDuringSchedulingIgnoredDuringExecution": preferred,
        }
    }
    pod = pod_with({"containers": [{"name": "a"}], "affinity": affinity})
    mount_model_cache(pod, CacheMount("c", "abc", host_path="/mnt/m"), ("n1", "n2"))
    spec = pod["spec"]
    assert spec["volumes"] == [{"name": MODEL_CACHE_VOLUME, "hostPath": {"path": "/mnt/m", "type": "Directory"}}]
    hostname = {"key": HOSTNAME_LABEL, "operator": "In", "values": ["n1", "n2"]}
    node_affinity = spec["affinity"]["nodeAffinity"]
    got = node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert got[0]["matchExpressions"] == [terms[0]["matchExpressions"][0], hostname]
    assert got[1] == {**terms[1], "matchExpressions": [hostname]}
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == terms


def test_without_affinity_a_node_local_cache_adds_the_one_term() -> None:
    pod = pod_with({"containers": [{"name": "a"}]})
    mount_model_cache(pod, CacheMount("c", "abc", host_path="/mnt/m"), ("n1",))
    required = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": ["n1"]}]}]
    }


# -- the revision ---------------------------------------------------------------------------------------------------


def test_without_a_cache_the_revision_and_its_record_are_unchanged() -> None:
    ms = ms_with()
    data = revision_data(ms.spec)
    assert data == revision_data(ms.spec, None)
    assert "modelCache" not in build_controller_revision(ref_of(ms), data, "r", ())["data"]
    # The payload is what it was before caches existed: roles, schedulerName, plugins (nothing else).
    from kthena_py.plan.modelserving.core.revision import _role_shape, encode_hash

    payload = {"roles": [_role_shape(r) for r in data.roles], "schedulerName": data.scheduler_name, "plugins": []}
    assert revision_hash(data) == encode_hash(payload) == spec_revision_hash(ms.spec)


def test_the_cache_name_and_path_enter_the_revision_and_are_read_back() -> None:
    ms = ms_with(ANNOTATED)
    plain = revision_hash(revision_data(ms.spec))
    a = CacheMount("a", model_dir(SOURCE), "models")
    b = CacheMount("b", model_dir(SOURCE), "models")
    other_model = CacheMount("a", model_dir("hf://meta/llama-4"), "models")
    hashes = {revision_hash(revision_data(ms.spec, m)) for m in (a, b, other_model)}
    assert len(hashes) == 3 and plain not in hashes
    assert spec_revision_hash(ms.spec, 0, a) == revision_hash(revision_data(ms.spec, a))
    record = build_controller_revision(ref_of(ms), revision_data(ms.spec, a), "r", ())
    back = parse_controller_revision(record, "default-scheduler")
    assert back is not None and back.model_cache == a
    assert revision_hash(back) == revision_hash(revision_data(ms.spec, a))


@settings(max_examples=60, deadline=None)
@given(
    name=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    sub=st.text("0123456789abcdef", min_size=32, max_size=32),
    claim=st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)),
)
def test_a_recorded_mount_always_reads_back_to_the_same_revision(name: str, sub: str, claim: str | None) -> None:
    ms = ms_with(ANNOTATED)
    mount = CacheMount(name, sub, claim) if claim else CacheMount(name, sub, host_path=f"/{name}")
    data = revision_data(ms.spec, mount)
    back = parse_controller_revision(build_controller_revision(ref_of(ms), data, "r", ()), "default-scheduler")
    assert back is not None and revision_hash(back) == revision_hash(data)
    assert CacheMount.from_shape(mount.shape()) == mount


# -- the planners ---------------------------------------------------------------------------------------------------


def observed_with(cluster: Cluster, gate: CacheGate | None) -> Observed:
    return dataclasses.replace(cluster.observed(), model_cache=gate)


def test_a_closed_gate_creates_no_pod_service_or_podgroup_and_says_why() -> None:
    ms = ms_with(ANNOTATED, workers=1)
    cluster = Cluster()
    for doc in (None, cache_doc("Downloading"), cache_doc("Failed")):
        gate = gate_of(doc)
        plan = plan_servinggroups(ms, ref_of(ms), observed_with(cluster, gate), VOLCANO, NOW)
        assert created(plan) == [] and created(plan, "Service") == []
        assert any("waiting for ModelCache llama-3" in r for r in plan.reasons)
        assert plan_podgroups(ms, ref_of(ms), observed_with(cluster, gate), VOLCANO).creates == ()


def test_an_open_gate_creates_pods_with_the_mount() -> None:
    ms = ms_with(ANNOTATED, workers=1)
    cluster = Cluster()
    plan = plan_servinggroups(ms, ref_of(ms), observed_with(cluster, gate_of(cache_doc())), NO_VOLCANO, NOW)
    pods = [o for o in plan.creates if o["kind"] == "Pod"]
    assert len(pods) == 4  # 2 groups x (entry + 1 worker)
    for pod in pods:
        (volume,) = [v for v in pod["spec"].get("volumes", []) if v["name"] == MODEL_CACHE_VOLUME]
        assert volume["persistentVolumeClaim"] == {"claimName": "models", "readOnly": True}
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env[MODEL_PATH_ENV] == MODEL_CACHE_MOUNT_PATH and env[MODEL_CACHE_NAME_ENV] == "llama-3"
    (record,) = [o for o in plan.creates if o["kind"] == "ControllerRevision"]
    assert record["data"]["modelCache"]["name"] == "llama-3"


def test_a_node_local_gate_sends_new_pods_to_exactly_the_ready_nodes() -> None:
    ms = ms_with(ANNOTATED)
    storage = {"nodeLocal": {"path": "/mnt/m", "nodeSelector": {"gpu": "a"}}}
    gate = gate_of(cache_doc("Ready", storage=storage, nodes=["n2", "n1"]))
    plan = plan_servinggroups(ms, ref_of(ms), observed_with(Cluster(), gate), NO_VOLCANO, NOW)
    pods = [o for o in plan.creates if o["kind"] == "Pod"]
    assert pods
    for pod in pods:
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [
            {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": ["n1", "n2"]}]}
        ]


def test_the_nodes_are_not_part_of_the_revision() -> None:
    ms = ms_with(ANNOTATED)
    storage = {"nodeLocal": {"path": "/mnt/m", "nodeSelector": {"gpu": "a"}}}
    revisions = set()
    for nodes in (["n1"], ["n1", "n2"]):
        observed = observed_with(Cluster(), gate_of(cache_doc("Ready", storage=storage, nodes=nodes)))
        plan = plan_servinggroups(ms, ref_of(ms), observed, NO_VOLCANO, NOW)
        revisions |= {
            o["metadata"]["labels"]["modelserving.volcano.sh/revision"] for o in plan.creates if o["kind"] == "Pod"
        }
    assert len(revisions) == 1


def converge(cluster: Cluster, ms: Any, gate: CacheGate | None, rounds: int = 10) -> None:
    for _ in range(rounds):
        observed = observed_with(cluster, gate)
        cluster.apply(plan_servinggroups(ms, ref_of(ms), observed, NO_VOLCANO, NOW), NOW)
        cluster.apply(plan_rollout(ms, ref_of(ms), observed_with(cluster, gate), NO_VOLCANO, NOW), NOW)
        cluster.finish_terminating()


def test_a_cache_going_bad_deletes_nothing_and_re_pointing_rolls_out_once_ready() -> None:
    ms = ms_with(ANNOTATED, replicas=2)
    cluster = Cluster()
    converge(cluster, ms, gate_of(cache_doc()))
    before = {p["metadata"]["uid"] for p in cluster.pods().values()}
    assert len(before) == 2
    for bad in (None, cache_doc("Failed"), cache_doc("Downloading")):
        gate = gate_of(bad)
        observed = observed_with(cluster, gate)
        assert plan_servinggroups(ms, ref_of(ms), observed, NO_VOLCANO, NOW).deletes == ()
        assert plan_rollout(ms, ref_of(ms), observed, NO_VOLCANO, NOW).deletes == ()
    # Re-pointed at another cache that is still downloading: the rollout waits, every pod stays.
    moved = ms_with({MODEL_CACHE: "llama-4"}, replicas=2)
    waiting = decide_gate(
        {MODEL_CACHE: "llama-4"}, [], ModelCache.model_validate(cache_doc("Downloading", name="llama-4"))
    )
    converge(cluster, moved, waiting, rounds=3)
    assert {p["metadata"]["uid"] for p in cluster.pods().values()} == before
    ready = decide_gate({MODEL_CACHE: "llama-4"}, [], ModelCache.model_validate(cache_doc("Ready", name="llama-4")))
    assert ready is not None
    converge(cluster, moved, ready)
    pods = cluster.pods().values()
    assert len(pods) == 2 and not before & {p["metadata"]["uid"] for p in pods}
    for pod in pods:
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env[MODEL_CACHE_NAME_ENV] == "llama-4"


# -- the condition --------------------------------------------------------------------------------------------------


def test_the_condition_and_its_events_follow_transitions_only() -> None:
    from kthena_py.api.common import Condition

    waiting = decide_model_cached(gate_of(None), None, 3, NOW)
    assert waiting.condition["status"] == "False" and waiting.condition["reason"] == "WaitingForModelCache"
    assert waiting.condition["observedGeneration"] == 3 and waiting.event is None
    failed = decide_model_cached(gate_of(cache_doc("Failed")), Condition.model_validate(waiting.condition), 3, NOW + 5)
    assert failed.event is not None and failed.event.type == "Warning" and failed.event.reason == "ModelCacheFailed"
    assert failed.condition["lastTransitionTime"] == waiting.condition["lastTransitionTime"]  # still False
    again = decide_model_cached(gate_of(cache_doc("Failed")), Condition.model_validate(failed.condition), 3, NOW + 9)
    assert again.event is None and again.condition == failed.condition
    ready = decide_model_cached(gate_of(cache_doc()), Condition.model_validate(again.condition), 3, NOW + 20)
    assert ready.condition["status"] == "True" and ready.event is not None and ready.event.type == "Normal"
    assert ready.condition["lastTransitionTime"] != failed.condition["lastTransitionTime"]


# -- kthena-py status -------------------------------------------------------------------------------------------------


def test_status_shows_the_cache_of_a_gated_modelserving_and_nothing_for_others() -> None:
    from kthena_py.plan.modelserving.view import build_view, render_text, status_document

    from .builders import ms_doc

    gated = ms_doc(role_doc("prefill"), annotations=ANNOTATED)
    progress = {"bytesDone": 1288490189, "bytesTotal": 3113851290, "filesDone": 1, "percent": "42%"}
    view = build_view(gated, [], now=NOW, model_cache=cache_doc("Downloading", progress=progress))
    text = render_text(view, ages=False)
    assert "ModelCache llama-3: Downloading (42%, 1.2 GiB of 2.9 GiB), WaitingForModelCache" in text
    doc = status_document(view)["modelCache"]
    assert doc["name"] == "llama-3" and doc["phase"] == "Downloading" and doc["ready"] is False
    assert doc["progress"] == "42%, 1.2 GiB of 2.9 GiB" and doc["reason"] == "WaitingForModelCache"
    missing = status_document(build_view(gated, [], now=NOW))["modelCache"]
    assert missing["phase"] == "NotFound" and missing["message"] == "ModelCache llama-3 not found"
    plain = build_view(ms_doc(role_doc("prefill")), [], now=NOW)
    assert "modelCache" not in status_document(plain) and "ModelCache" not in render_text(plain, ages=False)


# -- a re-staged copy (refreshPolicy OnChange) ----------------------------------------------------------------------


def _served(doc: dict[str, Any], directory: str, fp: str) -> dict[str, Any]:
    doc["status"]["servedDirectory"] = {"directory": directory, "fingerprint": fp}
    return doc


def test_a_verified_restaged_copy_of_the_current_spec_is_mounted_and_changes_the_revision() -> None:
    from kthena_py.plan.modelcache import fingerprint

    doc = cache_doc()
    fp = fingerprint(ModelCache.model_validate(doc).spec)
    copy = f"{model_dir(SOURCE)}-0123abcd"
    first, restaged = gate_of(cache_doc()).mount, gate_of(_served(cache_doc(), copy, fp)).mount
    assert first.sub_path == model_dir(SOURCE) and restaged.sub_path == copy
    assert first.shape() != restaged.shape()  # the pod template changes: gated ModelServings roll onto it
    # A copy recorded for another spec (the source changed since) is never mounted.
    stale = gate_of(_served(cache_doc(source="hf://meta/llama-4"), copy, fp)).mount
    assert stale.sub_path == model_dir("hf://meta/llama-4")
