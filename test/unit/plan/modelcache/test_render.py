"""The download and cleanup Jobs, PodGroups and the claim a ModelCache creates."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.api.modelcache import model_dir
from kthena_py.plan.modelcache import JobSettings, cache_path, claim, cleanup_job, download_job, podgroup
from kthena_py.vocab.labels import MODEL_CACHE_FINGERPRINT, MODEL_CACHE_NAME, MODEL_CACHE_NODE, VOLCANO_PODGROUP

from .builders import NODE_LOCAL, SHA_A, TEMPLATE, cache, node

DIR = model_dir("hf://org/llama")


def _pod(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def test_a_download_job_runs_the_downloader_once_into_the_claim() -> None:
    mc = cache(
        revision="main",
        files=["a.safetensors", "config.json"],
        fileSHA256={"a.safetensors": SHA_A},
        sourceSecretRef={"name": "hf-token"},
        maxWorkers=4,
        placement={"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
    )
    job = download_job(mc, "llama-01234567", "0123456789abcdef", JobSettings(image="img:1"))
    assert job["spec"]["backoffLimit"] == 1
    assert job["metadata"]["ownerReferences"][0]["uid"] == "cache-uid"
    assert job["metadata"]["labels"][MODEL_CACHE_NAME] == "llama"
    assert job["metadata"]["labels"][MODEL_CACHE_FINGERPRINT] == "0123456789abcdef"
    pod = _pod(job)
    (container,) = pod["containers"]
    out = f"/kthena-cache/{model_dir('hf://org/llama', 'main')}"
    assert container["args"] == [
        "download", "-s", "hf://org/llama", "-o", out, "-w", "4", "--revision", "main",
        "--files", "a.safetensors", "--files", "config.json", "--file-sha256", f"a.safetensors={SHA_A}",
        "--result-file", "/dev/termination-log", "--progress-address", "$(POD_IP):8090",
    ]  # fmt: skip
    assert container["image"] == "img:1" and container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert pod["restartPolicy"] == "Never" and pod["schedulerName"] == "volcano"
    assert pod["automountServiceAccountToken"] is False
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert pod["volumes"] == [{"name": "cache", "persistentVolumeClaim": {"claimName": "models"}}]
    assert pod["nodeSelector"] == {"zone": "a"} and pod["tolerations"][0]["key"] == "gpu"
    assert job["spec"]["template"]["metadata"]["annotations"] == {VOLCANO_PODGROUP: "llama-01234567"}
    group = podgroup(mc, job)
    assert (group["metadata"]["name"], group["spec"]) == ("llama-01234567", {"minMember": 1})


def test_no_podgroup_annotation_for_another_scheduler_and_no_secret_without_a_ref() -> None:
    job = download_job(cache(sha256=SHA_A), "j", "f" * 16, JobSettings(scheduler_name="default-scheduler"))
    assert "annotations" not in job["spec"]["template"]["metadata"]
    (container,) = _pod(job)["containers"]
    assert "envFrom" not in container and container["args"][7:9] == ["--sha256", SHA_A]


def test_a_node_local_job_is_pinned_to_its_node_with_a_host_path() -> None:
    mc = cache(storage=NODE_LOCAL, placement={"nodeSelector": {"kubernetes.io/hostname": "elsewhere", "zone": "a"}})
    target = node("gpu-1", gpu="true")
    job = download_job(mc, "j", "f" * 16, JobSettings(), target, attempt=3)
    pod = _pod(job)
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "gpu-1", "zone": "a"}
    assert pod["volumes"] == [{"name": "cache", "hostPath": {"path": "/var/lib/models", "type": "DirectoryOrCreate"}}]
    assert job["metadata"]["annotations"] == {MODEL_CACHE_NODE: "gpu-1"}
    assert cache_path(mc) == f"/var/lib/models/{DIR}"


def test_a_template_cache_creates_its_own_claim() -> None:
    mc = cache(storage=TEMPLATE)
    body = claim(mc)
    assert body["metadata"]["name"] == "llama-cache"
    assert body["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "10Gi"}},
        "storageClassName": "fast",
    }
    assert body["metadata"]["ownerReferences"][0]["kind"] == "ModelCache"
    job = download_job(mc, "j", "f" * 16, JobSettings())
    assert _pod(job)["volumes"][0]["persistentVolumeClaim"] == {"claimName": "llama-cache"}
    assert cache_path(mc) == f"pvc://llama-cache/{DIR}"


@pytest.mark.parametrize("storage", [None, TEMPLATE, NODE_LOCAL])
def test_a_cleanup_job_removes_the_model_directory(storage: dict[str, Any] | None) -> None:
    mc = cache(storage=storage) if storage else cache()
    job = cleanup_job(mc, "llama-rm-ffffffff", "f" * 16, JobSettings(), node("n") if storage == NODE_LOCAL else None)
    (container,) = _pod(job)["containers"]
    assert container["args"] == ["download", "--remove", "-o", f"/kthena-cache/{DIR}"]
    assert "ports" not in container
