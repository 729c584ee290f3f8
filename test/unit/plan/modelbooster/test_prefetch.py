"""The prefetch opt-in: which boosters get a child ModelCache, what it holds, and the ModelServing gated on it.

Also the default path: the downloader init container of every pod, in whatever image the operator names.
"""

from __future__ import annotations

import copy
import posixpath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_py.api import ModelServing
from kthena_py.api.modelcache import MODEL_CACHE_MOUNT_PATH, MODEL_CACHE_VOLUME, ModelCache, model_dir
from kthena_py.api.validation import validate_modelserving
from kthena_py.plan.modelbooster import ExpandError, Images, expand
from kthena_py.plan.modelbooster.prefetch import parse_node_selector
from kthena_py.plan.modelserving.core.modelcache import decide_gate, templates_of
from kthena_py.plan.modelserving.render.modelcache import mount_model_cache
from kthena_py.vocab.labels import BOOSTER_MODEL_UID, BOOSTER_PREFETCH, BOOSTER_PREFETCH_NODE_SELECTOR, MODEL_CACHE

from .builders import UID, booster_doc, parse, pod_spec, worker

SETTINGS = settings(max_examples=80, deadline=None, database=None)
SECRET = [{"secretRef": {"name": "hf-token"}}]


def opted_in(doc: dict[str, Any], value: str = "true", **annotations: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"]["annotations"] = {BOOSTER_PREFETCH: value, **annotations}
    return doc


def every_pod(ms: dict[str, Any]) -> list[dict[str, Any]]:
    pods = []
    for role in ms["spec"]["template"]["roles"]:
        for key in ("entryTemplate", "workerTemplate"):
            spec = (role.get(key) or {}).get("spec") or {}
            if spec.get("containers"):
                pods.append(spec)
    return pods


def engine_model(ms: dict[str, Any]) -> str:
    """The ``--model`` argument of the first engine (exec form or inside a ``bash -c`` script)."""
    for spec in every_pod(ms):
        for c in spec["containers"]:
            command = c.get("command") or []
            text = " ".join(command)
            if "--model" in text:
                return text.split("--model", 1)[1].split()[0].strip("'")
    raise AssertionError("no engine")


# -- the default path: Kthena's downloader, in the image the operator names ---------------------------------


@pytest.mark.parametrize(
    ("image", "cache_uri", "output_dir"),
    [
        ("kthena/downloader:latest", "hostpath://tmp/cache", "/tmp/cache"),
        ("registry.example/kthena-py-downloader:0.1.0", "pvc://models", "/models"),
        ("registry.example/kthena-py-downloader@sha256:" + "a" * 64, None, "/cache"),
    ],
)
@pytest.mark.parametrize("type_", ["vLLM", "vLLMDisaggregated"])
def test_every_pod_runs_the_configured_downloader_with_kthenas_flags(
    image: str, cache_uri: str | None, output_dir: str, type_: str
) -> None:
    workers = (worker(replicas=1, pods=2),) if type_ == "vLLM" else (worker("prefill"), worker("decode"))
    doc = booster_doc(*workers, type_=type_, cache_uri=cache_uri)
    ms = expand(parse(doc), Images(downloader=image)).modelserving
    uri = doc["spec"]["backend"]["modelURI"]
    pods = every_pod(ms)
    assert len(pods) == 2  # vLLM: entry + Ray worker; PD: prefill + decode
    for spec in pods:
        (init,) = spec["initContainers"]
        assert init["image"] == image
        assert init["args"] == ["--source", uri, "--output-dir", f"{output_dir}/{model_dir(uri)}"]
    assert MODEL_CACHE not in (ms["metadata"].get("annotations") or {})


# -- which boosters get a ModelCache ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "annotations", "storage", "secret"),
    [
        ({"cache_uri": "pvc://models"}, {}, {"persistentVolumeClaim": {"claimName": "models"}}, None),
        ({"cache_uri": "pvc://models/"}, {}, {"persistentVolumeClaim": {"claimName": "models"}}, None),
        (
            {"cache_uri": "hostpath://tmp/cache"},
            {},
            {"nodeLocal": {"path": "/tmp/cache", "nodeSelector": {"kubernetes.io/os": "linux"}}},
            None,
        ),
        (
            {"cache_uri": "hostpath:///var/lib/models"},
            {BOOSTER_PREFETCH_NODE_SELECTOR: "gpu=a100, zone=z1"},
            {"nodeLocal": {"path": "/var/lib/models", "nodeSelector": {"gpu": "a100", "zone": "z1"}}},
            None,
        ),
        (
            {"cache_uri": "pvc://models", "envFrom": SECRET},
            {},
            {"persistentVolumeClaim": {"claimName": "models"}},
            "hf-token",
        ),
        (
            {
                "cache_uri": "pvc://models",
                "env": [{"name": "HF_ENDPOINT", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            },
            {},
            {"persistentVolumeClaim": {"claimName": "models"}},
            None,
        ),
    ],
)
def test_a_mappable_booster_gets_a_cache_of_its_model_in_its_cache_storage(
    changes: dict[str, Any], annotations: dict[str, str], storage: dict[str, Any], secret: str | None
) -> None:
    doc = opted_in(booster_doc(**changes), **annotations)
    children = expand(parse(doc))
    cache = children.modelcache
    assert cache is not None and children.prefetch.problem is None
    uri = doc["spec"]["backend"]["modelURI"]
    assert cache["metadata"]["name"] == "mb-backend1" == children.prefetch.name
    assert cache["metadata"]["namespace"] == "ns"
    (owner,) = cache["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("ModelBooster", "mb", UID, True)
    assert cache["metadata"]["labels"][BOOSTER_MODEL_UID] == UID
    expected: dict[str, Any] = {"source": uri, "storage": storage, "prefetch": True}
    if secret is not None:
        expected["sourceSecretRef"] = {"name": secret}
    assert cache["spec"] == expected
    ModelCache.model_validate(cache)


@pytest.mark.parametrize(
    ("value", "changes", "annotations", "problem"),
    [
        ("false", {}, {}, None),
        ("TRUE", {}, {}, None),  # only the exact "true" opts in, as the annotation's docs say
        ("true", {"cache_uri": None}, {}, "cacheURI is empty"),
        ("true", {"model_uri": "pvc://models/qwen", "cache_uri": "pvc://models"}, {}, "is on a claim already"),
        ("true", {"env": [{"name": "HF_ENDPOINT", "value": "http://mirror"}]}, {}, "sets HF_ENDPOINT"),
        (
            "true",
            {"env": [{"name": "MS_TOKEN", "value": "t"}, {"name": "ENDPOINT", "value": "e"}]},
            {},
            "MS_TOKEN, ENDPOINT",
        ),
        ("true", {"envFrom": [{"configMapRef": {"name": "c"}}]}, {}, "exactly one secretRef"),
        ("true", {"envFrom": [*SECRET, {"secretRef": {"name": "other"}}]}, {}, "exactly one secretRef"),
        ("true", {"envFrom": [{"prefix": "X_", "secretRef": {"name": "s"}}]}, {}, "exactly one secretRef"),
        ("true", {}, {BOOSTER_PREFETCH_NODE_SELECTOR: "gpu"}, "'gpu' is not key=value"),
        ("true", {}, {BOOSTER_PREFETCH_NODE_SELECTOR: "=x"}, "is not key=value"),
    ],
)
def test_an_unmappable_booster_keeps_the_per_pod_downloader_and_says_why(
    value: str, changes: dict[str, Any], annotations: dict[str, str], problem: str | None
) -> None:
    doc = opted_in(booster_doc(**changes), value, **annotations)
    children = expand(parse(doc), Images(downloader="dl"))
    assert children.modelcache is None
    assert children.prefetch.requested is (value == "true")
    if problem is None:
        assert children.prefetch.problem is None
    else:
        assert problem in (children.prefetch.problem or "")
    ms = children.modelserving
    assert MODEL_CACHE not in (ms["metadata"].get("annotations") or {})
    assert all(spec["initContainers"][0]["image"] == "dl" for spec in every_pod(ms))


def test_without_the_modelcache_crd_an_opted_in_booster_keeps_the_downloader() -> None:
    doc = opted_in(booster_doc(), "true")
    served = expand(parse(doc), Images(downloader="dl"))
    assert served.modelcache is not None
    unserved = expand(parse(doc), Images(downloader="dl"), model_cache_served=False)
    assert unserved.modelcache is None and unserved.prefetch.requested
    assert "modelcaches.serving.kthena-py.io" in (unserved.prefetch.problem or "")
    assert all(spec["initContainers"][0]["image"] == "dl" for spec in every_pod(unserved.modelserving))
    # a booster that did not opt in expands the same either way
    plain = booster_doc()
    assert expand(parse(plain), model_cache_served=False) == expand(parse(plain))


def test_the_download_job_tolerates_what_the_workers_tolerate() -> None:
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    npu = {"key": "huawei.com/ascend", "operator": "Exists", "effect": "NoSchedule"}
    doc = booster_doc(
        worker("prefill", tolerations=[gpu]),
        worker("decode", tolerations=[gpu, npu]),
        type_="vLLMDisaggregated",
        cache_uri="hostpath://data/models",
    )
    cache = expand(parse(opted_in(doc))).modelcache
    assert cache is not None and cache["spec"]["placement"] == {"tolerations": [gpu, npu]}
    ModelCache.model_validate(cache)
    untolerated = expand(parse(opted_in(booster_doc()))).modelcache
    assert untolerated is not None and "placement" not in untolerated["spec"]


def test_node_selector_parsing() -> None:
    assert parse_node_selector("a=1") == {"a": "1"}
    assert parse_node_selector(" a = 1 ,b=") == {"a": "1", "b": ""}
    for bad in ("", "a", "a=1,,b=2", "=1"):
        with pytest.raises(ValueError, match="is not key=value"):
            parse_node_selector(bad)


# -- the gated ModelServing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "workers",
    [
        (worker(replicas=2),),
        (worker(replicas=1, pods=3),),
        (worker("prefill", replicas=1), worker("decode", replicas=2)),
    ],
    ids=["aggregated", "ray-workers", "disaggregated"],
)
@pytest.mark.parametrize("cache_uri", ["pvc://models", "hostpath://tmp/cache"])
def test_the_gated_modelserving_names_the_cache_and_no_pod_downloads(
    workers: tuple[dict[str, Any], ...], cache_uri: str
) -> None:
    type_ = "vLLMDisaggregated" if len(workers) == 2 else "vLLM"
    plain = booster_doc(*workers, type_=type_, cache_uri=cache_uri)
    gated = expand(parse(opted_in(plain))).modelserving
    per_pod = expand(parse(plain)).modelserving
    assert gated["metadata"]["annotations"] == {MODEL_CACHE: "mb-backend1"}
    assert engine_model(gated) == MODEL_CACHE_MOUNT_PATH
    assert engine_model(per_pod) != MODEL_CACHE_MOUNT_PATH
    for spec in every_pod(gated):
        assert "initContainers" not in spec
        assert all(not v["name"].endswith("-weights") for v in spec.get("volumes") or [])
        for c in spec["containers"]:
            assert all(not m["name"].endswith("-weights") for m in c.get("volumeMounts") or [])
    validate_modelserving(ModelServing.model_validate(gated))
    # Only the weights differ: same roles, replicas, labels and engine flags apart from --model.
    assert gated["spec"]["replicas"] == per_pod["spec"]["replicas"]
    assert gated["metadata"]["labels"] == per_pod["metadata"]["labels"]
    assert [r["name"] for r in gated["spec"]["template"]["roles"]] == [
        r["name"] for r in per_pod["spec"]["template"]["roles"]
    ]


def test_the_shared_memory_volume_stays_when_the_weights_volume_goes() -> None:
    gated = expand(parse(opted_in(booster_doc(worker(replicas=1))))).modelserving
    spec = pod_spec(gated)
    assert [v["name"] for v in spec["volumes"]] == ["dshm"]
    engine = next(c for c in spec["containers"] if c["name"] == "engine")
    assert engine["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]


# -- properties -----------------------------------------------------------------------------------------------

_cache_uris = st.sampled_from([None, "pvc://models", "pvc://m-2", "hostpath://tmp/c", "hostpath:///data/w", "pvc:///"])
_env_from = st.sampled_from([None, SECRET, [{"configMapRef": {"name": "c"}}], []])
_env = st.sampled_from([None, [{"name": "HF_ENDPOINT", "value": "http://m"}], [{"name": "OTHER", "value": "x"}]])
_model_uris = st.sampled_from(["hf://Qwen/Qwen2.5-0.5B-Instruct", "s3://bucket/llama", "pvc://models/qwen", "ms://a/b"])


@st.composite
def boosters(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, strategy in (("envFrom", _env_from), ("env", _env)):
        value = draw(strategy)
        if value is not None:
            fields[key] = value
    workers = draw(
        st.sampled_from([(worker(replicas=1),), (worker(replicas=1, pods=2),), (worker("prefill"), worker("decode"))])
    )
    doc = booster_doc(
        *workers,
        type_="vLLM" if len(workers) == 1 else "vLLMDisaggregated",
        model_uri=draw(_model_uris),
        cache_uri=draw(_cache_uris),
        **fields,
    )
    return opted_in(doc, draw(st.sampled_from(["true", "false"])))


@SETTINGS
@given(boosters())
def test_a_booster_either_gets_a_cache_and_a_gate_or_the_downloader_never_both(doc: dict[str, Any]) -> None:
    try:
        booster = parse(doc)
    except ValueError:
        return  # a booster the schema refuses never reaches the expander
    plain = {**doc, "metadata": {**doc["metadata"], "annotations": {}}}
    try:
        children = expand(booster, Images(downloader="dl"))
    except ExpandError:  # a cacheURI Kthena refuses is refused with or without the opt-in
        with pytest.raises(ExpandError):
            expand(parse(plain))
        return
    ms = children.modelserving
    pods = every_pod(ms)
    gate = (ms["metadata"].get("annotations") or {}).get(MODEL_CACHE)
    if children.modelcache is not None:
        assert children.prefetch.problem is None and gate == children.modelcache["metadata"]["name"]
        assert all("initContainers" not in spec for spec in pods)
        cache = ModelCache.model_validate(children.modelcache)
        # The cache stages the model where the per-pod downloader would have: <storage>/<md5 of modelURI>.
        per_pod = expand(parse(plain), Images(downloader="dl"))
        output = every_pod(per_pod.modelserving)[0]["initContainers"][0]["args"][-1]
        assert posixpath.basename(output) == model_dir(cache.spec.source, cache.spec.revision)
        storage = cache.spec.storage
        root = (
            f"/{storage.persistent_volume_claim.claim_name}"
            if storage.persistent_volume_claim is not None
            else storage.node_local.path  # type: ignore[union-attr]
        )
        assert posixpath.dirname(output) == root
    else:
        assert gate is None
        assert all(spec["initContainers"][0]["image"] == "dl" for spec in pods)
        opted = doc["metadata"]["annotations"][BOOSTER_PREFETCH] == "true"
        assert children.prefetch.requested is opted
        assert (children.prefetch.problem is not None) is opted


# -- contract with the serving gate ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cache_uri", "volume"),
    [
        ("pvc://models", {"persistentVolumeClaim": {"claimName": "models", "readOnly": True}}),
        ("hostpath://tmp/cache", {"hostPath": {"path": "/tmp/cache", "type": "Directory"}}),
    ],
)
@pytest.mark.parametrize("type_", ["vLLM", "vLLMDisaggregated"])
def test_the_gate_opens_on_the_ready_cache_and_mounts_the_model_where_the_engines_read_it(
    cache_uri: str, volume: dict[str, Any], type_: str
) -> None:
    workers = (worker(replicas=1, pods=2),) if type_ == "vLLM" else (worker("prefill"), worker("decode"))
    children = expand(parse(opted_in(booster_doc(*workers, type_=type_, cache_uri=cache_uri))))
    assert children.modelcache is not None
    ready = {
        **children.modelcache,
        "status": {"phase": "Ready", "observedGeneration": 1, "nodes": ["node-a"]},
    }
    ms = children.modelserving
    gate = decide_gate(
        ms["metadata"]["annotations"],
        templates_of(ModelServing.model_validate(ms)),
        ModelCache.model_validate(ready),
    )
    assert gate is not None and gate.open, gate
    uri = children.modelcache["spec"]["source"]
    assert gate.mount.sub_path == model_dir(uri)
    for spec in every_pod(ms):
        pod = {"spec": copy.deepcopy(spec)}
        mount_model_cache(pod, gate.mount, gate.nodes_for(gate.mount))
        terms = pod["spec"]["affinity"].get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        if "hostPath" in volume:  # a node-local cache: only the nodes it is Ready on
            assert terms == {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}
                ]
            }
        else:
            assert terms is None
        assert [v for v in pod["spec"]["volumes"] if v["name"] == MODEL_CACHE_VOLUME] == [
            {"name": MODEL_CACHE_VOLUME, **volume}
        ]
        for c in pod["spec"]["containers"]:
            mounts = [m for m in c["volumeMounts"] if m["mountPath"] == MODEL_CACHE_MOUNT_PATH]
            assert mounts == [
                {
                    "name": MODEL_CACHE_VOLUME,
                    "mountPath": MODEL_CACHE_MOUNT_PATH,
                    "subPath": model_dir(uri),
                    "readOnly": True,
                }
            ]
