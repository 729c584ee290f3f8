"""The expansion of Kthena's convert cases (modelbooster.md section 10), written from the behaviour notes.

Two golden files pin whole objects (reviewed by hand against the notes); the table tests below pin each rule
separately, so a golden diff can be traced to the rule it breaks.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kthena_py.api import ModelServing
from kthena_py.api.validation import validate_modelserving
from kthena_py.plan.modelbooster import ExpandError, Images, expand, unsupported_backend_type
from kthena_py.plan.modelbooster.storage import EMPTY_CACHE_PATH, cache_of, cache_path, model_path

from .builders import UID, assert_golden, booster_doc, container, env_names, parse, pod_spec, worker

S3_MODEL = "s3://aios_models/deepseek-ai/DeepSeek-V3-W8A8/vllm-ascend"
MOONCAKE_P = '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}'
MOONCAKE_D = '{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}'
NIXL_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
NIXL_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def aggregated_golden_doc() -> dict[str, Any]:
    return booster_doc(
        worker(
            replicas=1,
            pods=2,
            resources={"limits": {"huawei.com/ascend-1980": "1"}},
            config={"served-model-name": "deepseek-v3", "tensor-parallel-size": 1, "max-model-len": 32768},
        ),
        name="deepseek",
        model_uri=S3_MODEL,
        cache_uri="hostpath://tmp/test",
        env=[{"name": "RUNTIME_PORT", "value": "8900"}, {"name": "ENDPOINT", "value": "https://obs.example"}],
        envFrom=[{"secretRef": {"name": "obs-credentials"}}],
    )


def pd_doc(prefill: dict[str, Any], decode: dict[str, Any], **backend: Any) -> dict[str, Any]:
    return booster_doc(
        worker("prefill", replicas=1, **prefill),
        worker("decode", replicas=2, **decode),
        type_="vLLMDisaggregated",
        name="deepseek",
        backend="pd",
        model_uri=S3_MODEL,
        cache_uri="hostpath://tmp/test",
        **backend,
    )


def npu(n: int = 1) -> dict[str, Any]:
    return {"limits": {"huawei.com/ascend-1980": str(n)}}


def gpu(n: int = 1) -> dict[str, Any]:
    return {"limits": {"nvidia.com/gpu": str(n)}}


def engine_command(ms: dict[str, Any], role: int = 0) -> list[str]:
    spec = pod_spec(ms, role)
    name = "engine" if ms["spec"]["template"]["roles"][role]["name"] == "leader" else "vllm"
    command: list[str] = container(spec, name)["command"]
    return command


# -- golden files ----------------------------------------------------------------------------------------


def test_aggregated_golden() -> None:
    children = expand(parse(aggregated_golden_doc()))
    assert_golden("aggregated", children.all())
    ms = children.modelserving
    leader = ms["spec"]["template"]["roles"][0]
    assert leader["workerReplicas"] == 1
    script = engine_command(ms)[2]
    assert "leader --ray_cluster_size=2 --num-gpus=1 && python3 -m vllm.entrypoints.openai.api_server" in script
    assert {v["name"] for v in pod_spec(ms)["volumes"]} == {"backend1-weights", "dshm"}
    runtime = container(pod_spec(ms), "runtime")
    assert runtime["ports"] == [{"containerPort": 8900}] and runtime["args"][:2] == ["--port", "8900"]


def test_pd_golden_on_npu_with_mooncake() -> None:
    doc = pd_doc(
        {"resources": npu(), "config": {"kv-transfer-config": MOONCAKE_P}},
        {"resources": npu(), "config": {"kv-transfer-config": MOONCAKE_D, "served-model-name": "deepseek-v3"}},
    )
    children = expand(parse(doc))
    assert_golden("pd-npu-mooncake", children.all())
    for role in (0, 1):
        assert engine_command(children.modelserving, role)[:3] == [
            "python3",
            "-m",
            "vllm.entrypoints.openai.api_server",
        ]
    assert children.modelserver["spec"]["kvConnector"] == {"type": "mooncake"}


# -- the expanded objects are valid ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        aggregated_golden_doc(),
        pd_doc({"config": {"kv-transfer-config": MOONCAKE_P}}, {"config": {"kv-transfer-config": MOONCAKE_D}}),
        booster_doc(worker(replicas=2), cache_uri=None),
    ],
    ids=["aggregated", "pd", "empty-cache"],
)
def test_expanded_modelserving_is_a_valid_modelserving(doc: dict[str, Any]) -> None:
    ms = ModelServing.model_validate(expand(parse(doc)).modelserving)
    assert validate_modelserving(ms) == []


# -- commands and wrappers ---------------------------------------------------------------------------------


def test_pd_on_nvidia_gpu_installs_the_connector_first() -> None:
    doc = pd_doc(
        {"resources": gpu(), "config": {"kv-transfer-config": MOONCAKE_P}},
        {"resources": gpu(), "config": {"kv-transfer-config": MOONCAKE_D}},
    )
    for role in (0, 1):
        command = engine_command(expand(parse(doc)).modelserving, role)
        assert command[:2] == ["bash", "-c"]
        assert command[2].startswith("pip install mooncake-transfer-engine && python3 -m vllm.entrypoints")


def test_nixl_on_gpu_installs_nixl_and_the_skip_knob_skips_both() -> None:
    nixl = pd_doc(
        {"resources": gpu(), "config": {"kv-transfer-config": NIXL_P}},
        {"resources": gpu(), "config": {"kv-transfer-config": NIXL_D}},
    )
    script = engine_command(expand(parse(nixl)).modelserving)[2]
    assert script.startswith("PIP_DISABLE_PIP_VERSION_CHECK=1 pip install -U --no-cache-dir nixl && python3 ")
    for connector in ((MOONCAKE_P, MOONCAKE_D), (NIXL_P, NIXL_D)):
        doc = pd_doc(
            {"resources": gpu(), "config": {"kv-transfer-config": connector[0]}},
            {"resources": gpu(), "config": {"kv-transfer-config": connector[1]}},
            env=[{"name": "KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL", "value": "1"}],
        )
        for role in (0, 1):
            command = engine_command(expand(parse(doc)).modelserving, role)
            assert command[0] == "python3" and not any("pip" in token for token in command)


def _fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, body in {
        "pip": "exit 0",
        "python3": f'for a in "$@"; do printf "%s\\n" "$a"; done > {tmp_path / "argv"}',
    }.items():
        path = bin_dir / tool
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_wrapped_command_reaches_vllm_with_the_json_flag_intact(tmp_path: Path) -> None:
    # Kthena joins the wrapped command unquoted, so bash brace-expands the JSON; run the real bash here.
    doc = pd_doc(
        {"resources": gpu(), "config": {"kv-transfer-config": MOONCAKE_P}},
        {"resources": gpu(), "config": {"kv-transfer-config": MOONCAKE_D}},
    )
    command = engine_command(expand(parse(doc)).modelserving)
    env = {**os.environ, "PATH": f"{_fake_bin(tmp_path)}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(command, check=True, env=env, timeout=30)
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[argv.index("--kv-transfer-config") + 1] == MOONCAKE_P
    assert argv == shlex.split(command[2].split(" && ", 1)[1])[1:]


@pytest.mark.parametrize(("pods", "workers"), [(None, 0), (0, 0), (1, 0), (3, 2)])
def test_pods_give_worker_replicas_and_ray_only_above_one(pods: int | None, workers: int) -> None:
    fields = {"replicas": 1, "resources": gpu(2)} | ({} if pods is None else {"pods": pods})
    ms = expand(parse(booster_doc(worker(**fields)))).modelserving
    leader = ms["spec"]["template"]["roles"][0]
    assert leader["workerReplicas"] == workers
    command = engine_command(ms)
    if workers:
        assert command[:2] == ["bash", "-c"]
        assert "multi-node-serving.sh leader --ray_cluster_size=3 --num-gpus=2 && " in command[2]
        assert command[2].endswith("--distributed_executor_backend ray")
        worker_spec = leader["workerTemplate"]["spec"]
        (ray,) = worker_spec["containers"]
        assert ray["name"] == "backend1-vllm-worker"
        assert ray["command"][2].endswith("multi-node-serving.sh worker --ray_address=$(ENTRY_ADDRESS)")
        assert "readinessProbe" not in ray and [i["name"] for i in worker_spec["initContainers"]] == [
            "mb-model-downloader"
        ]
    else:
        assert command[0] == "python3" and "ray" not in command
        assert "workerTemplate" not in leader


def test_device_count_sums_nvidia_and_ascend() -> None:
    resources = {"limits": {"nvidia.com/gpu": "2", "huawei.com/ascend-1980": "4", "cpu": "8"}}
    ms = expand(parse(booster_doc(worker(replicas=1, pods=2, resources=resources)))).modelserving
    assert "--num-gpus=6 " in engine_command(ms)[2]


def test_prestop_targets_the_engine_metrics() -> None:
    ms = expand(parse(booster_doc(worker(replicas=1, config={"port": 9000})))).modelserving
    prestop = container(pod_spec(ms), "engine")["lifecycle"]["preStop"]["exec"]["command"]
    assert prestop[:2] == ["/bin/sh", "-c"]
    assert '"http://localhost:9000/metrics"' in prestop[2]


# -- ports ------------------------------------------------------------------------------------------------


def test_custom_port_feeds_runtime_url_flag_probes_and_container_port() -> None:
    agg = expand(parse(booster_doc(worker(replicas=1, config={"port": 9000}))))
    spec = pod_spec(agg.modelserving)
    assert container(spec, "runtime")["args"][5] == "http://localhost:9000"
    engine = container(spec, "engine")
    assert engine["command"][engine["command"].index("--port") + 1] == "9000"
    assert engine["readinessProbe"]["httpGet"]["port"] == 9000
    assert "ports" not in engine
    assert agg.modelserver["spec"]["workloadPort"] == {"port": 9000}
    pd = expand(parse(pd_doc({"config": {"port": "9000"}}, {"config": {"port": 9000}}))).modelserving
    for role in (0, 1):
        vllm = container(pod_spec(pd, role), "vllm")
        assert vllm["ports"] == [{"containerPort": 9000}]
        assert vllm["readinessProbe"]["httpGet"]["port"] == vllm["livenessProbe"]["httpGet"]["port"] == 9000


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (({"port": None},), 'invalid port "<nil>" for worker server'),
        (({"port": "http"},), 'invalid port "http" for worker server'),
        (({"port": 70000},), 'invalid port "70000" for worker server'),
        (({"port": 9000}, {"port": 9001}), "workers use different engine ports: 9000 and 9001"),
    ],
)
def test_bad_ports_are_kthenas_errors(configs: tuple[dict[str, Any], ...], message: str) -> None:
    if len(configs) == 1:
        doc = booster_doc(worker(replicas=1, config=configs[0]))
    else:
        doc = pd_doc({"config": configs[0]}, {"config": configs[1]})
    with pytest.raises(ExpandError, match=f"^{re.escape(message)}$"):
        expand(parse(doc))


def test_default_port_is_8000() -> None:
    children = expand(parse(booster_doc()))
    assert children.modelserver["spec"]["workloadPort"] == {"port": 8000}
    assert container(pod_spec(children.modelserving), "runtime")["args"][5] == "http://localhost:8000"


# -- pod settings -----------------------------------------------------------------------------------------


def test_runtime_class_affinity_and_tolerations_are_copied_per_role() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    toleration = [{"key": "gpu", "operator": "Exists"}]
    doc = pd_doc({"affinity": affinity, "tolerations": toleration}, {}, runtimeClassName="nvidia")
    ms = expand(parse(doc)).modelserving
    prefill, decode = pod_spec(ms, 0), pod_spec(ms, 1)
    assert prefill["runtimeClassName"] == decode["runtimeClassName"] == "nvidia"
    assert prefill["affinity"] == affinity and prefill["tolerations"] == toleration
    assert decode["affinity"] == {} and "tolerations" not in decode


def test_scheduler_name_is_omitted_when_empty_and_kept_otherwise() -> None:
    assert "schedulerName" not in expand(parse(booster_doc())).modelserving["spec"]
    assert "schedulerName" not in expand(parse(booster_doc(schedulerName=""))).modelserving["spec"]
    kept = expand(parse(booster_doc(schedulerName="volcano"))).modelserving["spec"]
    assert kept["schedulerName"] == "volcano"


def test_pd_roles_gang_and_sidecars() -> None:
    ms = expand(parse(pd_doc({}, {}, envFrom=[{"secretRef": {"name": "s"}}]))).modelserving
    template = ms["spec"]["template"]
    assert template["gangPolicy"] == {"minRoleReplicas": {"prefill": 1, "decode": 2}}
    assert [(r["name"], r["replicas"], r["workerReplicas"]) for r in template["roles"]] == [
        ("prefill", 1, 0),
        ("decode", 2, 0),
    ]
    assert template["roles"][0]["workerTemplate"] == {"spec": {"containers": []}}
    prefill, decode = pod_spec(ms, 0), pod_spec(ms, 1)
    assert "envFrom" not in container(prefill, "runtime") and "envFrom" in container(decode, "runtime")
    assert all("readinessProbe" not in container(s, "runtime") for s in (prefill, decode))
    assert container(prefill, "runtime")["args"][3] == "vllmdisaggregated"
    assert env_names(container(prefill, "vllm"))[-2:] == ["HF_HUB_OFFLINE", "HCCL_IF_IP"]
    assert env_names(container(decode, "vllm"))[-4:] == [
        "HF_HUB_OFFLINE",
        "GLOO_SOCKET_IFNAME",
        "TP_SOCKET_IFNAME",
        "HCCL_SOCKET_IFNAME",
    ]
    assert [v["name"] for v in prefill["volumes"]] == ["pd-weights"]


@pytest.mark.parametrize("missing", ["prefill", "decode"])
def test_pd_needs_both_roles(missing: str) -> None:
    present = "decode" if missing == "prefill" else "prefill"
    doc = booster_doc(worker(present, replicas=1), type_="vLLMDisaggregated")
    with pytest.raises(ExpandError, match=f"^{missing} worker not found in backend$"):
        expand(parse(doc))


def test_unsupported_backend_types_are_kthenas_error() -> None:
    for kind in ("SGLang", "MindIE", "MindIEDisaggregated"):
        raw = booster_doc(type_=kind)
        assert unsupported_backend_type(raw) == f"not support model backend type: {kind}"
        booster = parse(booster_doc())
        backend = booster.spec.backend.model_copy(update={"type": kind})
        forged = booster.model_copy(update={"spec": booster.spec.model_copy(update={"backend": backend})})
        with pytest.raises(ExpandError, match=f"^not support model backend type: {kind}$"):
            expand(forged)
    assert unsupported_backend_type(booster_doc()) is None


# -- env ---------------------------------------------------------------------------------------------------


def test_engine_env_and_downloader_env() -> None:
    env = [
        {"name": "HF_ENDPOINT", "value": "https://hf-mirror"},
        {"name": "MS_TOKEN", "valueFrom": {"secretKeyRef": {"name": "ms", "key": "token"}}},
        {"name": "ENDPOINT", "value": ""},
        {"name": "EXTRA", "value": "1"},
        {"name": "VLLM_USE_V1", "value": "0"},
    ]
    ms = expand(parse(booster_doc(env=env))).modelserving
    spec = pod_spec(ms)
    (downloader,) = spec["initContainers"]
    assert downloader["env"] == [{"name": "HF_ENDPOINT", "value": "https://hf-mirror"}]
    names = env_names(container(spec, "engine"))
    assert names == [
        "HF_ENDPOINT",
        "MS_TOKEN",
        "ENDPOINT",
        "EXTRA",
        "VLLM_USE_V1",
        "POD_NAME",
        "NAMESPACE",
        "REDIS_HOST",
        "REDIS_PORT",
        "REDIS_PASSWORD",
    ]
    assert container(spec, "engine")["env"][4] == {"name": "VLLM_USE_V1", "value": "0"}
    assert env_names(container(spec, "runtime")) == names


@pytest.mark.parametrize(("value", "port"), [("8900", 8900), ("abc", 8100), ("", 8100), ("0", 8100), ("70000", 8100)])
def test_runtime_port_knob_falls_back_to_the_default(value: str, port: int) -> None:
    ms = expand(parse(booster_doc(env=[{"name": "RUNTIME_PORT", "value": value}]))).modelserving
    runtime = container(pod_spec(ms), "runtime")
    assert runtime["ports"] == [{"containerPort": port}]
    assert runtime["readinessProbe"]["httpGet"]["port"] == port


def test_runtime_url_and_metrics_path_knobs() -> None:
    env = [{"name": "RUNTIME_URL", "value": "http://127.0.0.1:1234"}, {"name": "RUNTIME_METRICS_PATH", "value": "/m"}]
    args = container(pod_spec(expand(parse(booster_doc(env=env))).modelserving), "runtime")["args"]
    assert args == [
        "--port",
        "8100",
        "--engine",
        "vllm",
        "--engine-base-url",
        "http://127.0.0.1:1234",
        "--engine-metrics-path",
        "/m",
        "--pod",
        "$(POD_NAME).$(NAMESPACE)",
        "--model",
        "mb",
    ]


def test_images_default_and_override() -> None:
    spec = pod_spec(expand(parse(booster_doc())).modelserving)
    assert spec["initContainers"][0]["image"] == "kthena/downloader:latest"
    assert container(spec, "runtime")["image"] == "kthena/runtime:latest"
    custom = pod_spec(expand(parse(booster_doc()), Images("d:1", "r:1")).modelserving)
    assert custom["initContainers"][0]["image"] == "d:1" and container(custom, "runtime")["image"] == "r:1"


# -- cache volume and paths --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("pvc://c", "/c"),
        ("pvc:///c", "/c"),
        ("pvc://c////", "/c"),
        ("hostpath://tmp/cache", "/tmp/cache"),
        ("hostpath:///tmp/cache", "/tmp/cache"),
        ("", ""),
    ],
)
def test_cache_path_vectors(uri: str, path: str) -> None:
    assert cache_path(uri) == path


def test_model_path_is_the_md5_of_the_model_uri() -> None:
    assert model_path("/tmp/test", S3_MODEL) == "/tmp/test/13a7c4d58031cdc502ca1bb4a592f2b9"
    assert model_path("/c", "") == "/c/d41d8cd98f00b204e9800998ecf8427e"
    assert hashlib.md5(b"").hexdigest() == "d41d8cd98f00b204e9800998ecf8427e"


@pytest.mark.parametrize(
    ("uri", "volume", "mount"),
    [
        (None, {"emptyDir": {}}, EMPTY_CACHE_PATH),
        ("pvc://models", {"persistentVolumeClaim": {"claimName": "models"}}, "/models"),
        ("pvc:///models/", {"persistentVolumeClaim": {"claimName": "models"}}, "/models"),
        ("hostpath://data/m", {"hostPath": {"path": "/data/m", "type": "DirectoryOrCreate"}}, "/data/m"),
    ],
)
def test_cache_volumes(uri: str | None, volume: dict[str, Any], mount: str) -> None:
    booster = parse(booster_doc(cache_uri=uri))
    cache = cache_of(booster.spec.backend)
    assert cache.volume == {"name": "backend1-weights", **volume} and cache.path == mount
    spec = pod_spec(expand(booster).modelserving)
    assert {"name": "backend1-weights", "mountPath": mount} in container(spec, "engine")["volumeMounts"]
    args = spec["initContainers"][0]["args"]
    assert args[:3] == ["--source", "hf://Qwen/Qwen2.5-0.5B-Instruct", "--output-dir"]
    assert args[3] == model_path(mount, "hf://Qwen/Qwen2.5-0.5B-Instruct")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("pvc:///", 'invalid cacheURI "pvc:///": must include a PVC claim name'),
        ("hostpath:///", 'invalid cacheURI "hostpath:///": must include a host path'),
        ("HostPath://x", "not support prefix in CacheURI: HostPath://x"),
    ],
)
def test_bad_cache_uris(uri: str, message: str) -> None:
    booster = parse(booster_doc())
    backend = booster.spec.backend.model_copy(update={"cache_uri": uri})
    with pytest.raises(ExpandError, match=f"^{re.escape(message)}$"):
        cache_of(backend)


# -- names, labels, owners ---------------------------------------------------------------------------------


def test_names_labels_and_owner_references() -> None:
    children = expand(parse(booster_doc(name="qwen", backend="b1")))
    owner = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "name": "qwen",
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    names = [c["metadata"]["name"] for c in children.all()]
    assert names == ["qwen-b1", "qwen-b1", "qwen"]
    for child, backend in zip(children.all(), ("b1", "b1", ""), strict=True):
        labels = child["metadata"]["labels"]
        assert labels["workload.serving.volcano.sh/model-name"] == "qwen"
        assert labels["workload.serving.volcano.sh/backend-name"] == backend
        assert labels["workload.serving.volcano.sh/managed-by"] == "workload.serving.volcano.sh"
        assert labels["workload.serving.volcano.sh/model-uid"] == UID
        assert len(labels["workload.serving.volcano.sh/revision"]) == 10
        assert child["metadata"]["ownerReferences"] == [owner] and child["metadata"]["namespace"] == "ns"
    template_labels = pod_spec_labels(children.modelserving)
    assert set(template_labels) == set(children.modelserving["metadata"]["labels"])


def pod_spec_labels(ms: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = ms["spec"]["template"]["roles"][0]["entryTemplate"]["metadata"]["labels"]
    return labels


def test_replica_changes_do_not_change_the_pod_templates() -> None:
    base = expand(parse(booster_doc(worker(replicas=1), replicas=1))).modelserving
    scaled = expand(parse(booster_doc(worker(replicas=3), replicas=4))).modelserving
    assert (
        base["spec"]["template"]["roles"][0]["entryTemplate"] == scaled["spec"]["template"]["roles"][0]["entryTemplate"]
    )
    assert base["metadata"]["labels"] != scaled["metadata"]["labels"]  # the object's revision tracks the backend
    image = expand(parse(booster_doc(worker(replicas=1, image="vllm/vllm-openai:v0.11.0")))).modelserving
    assert pod_spec_labels(image) != pod_spec_labels(base)
