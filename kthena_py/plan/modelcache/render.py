"""The objects a ModelCache creates: download and cleanup Jobs, their Volcano PodGroups, the claim (pure).

Guarantees:

* A download Job runs ``kthena-py download`` once (``restartPolicy: Never``, ``backoffLimit``
  :attr:`JobSettings.backoff_limit`) with the storage mounted at :data:`JOB_MOUNT_PATH` and ``-o`` pointing at
  ``<mount>/<model_dir(source, revision)>`` (Kthena's directory naming), the spec's revision, files and
  digests as flags, ``--result-file /dev/termination-log`` and ``--progress-address $(POD_IP):<port>``
  (``POD_IP`` from the downward API). ``terminationMessagePolicy: FallbackToLogsOnError``, so a process that
  dies before writing its result still leaves its last log lines where the controller reads them.
* Credentials come only from the Secret ``sourceSecretRef`` names, as ``envFrom``: nothing secret is rendered.
  The pod gets no service account token, no privilege escalation, no capabilities, the runtime's seccomp profile.
* The storage is the existing claim, the created claim :func:`~.naming.claim_name`, or ``hostPath`` (type
  ``DirectoryOrCreate``) on the one node the Job is pinned to by ``nodeSelector kubernetes.io/hostname``.
  ``placement`` adds its nodeSelector, tolerations and affinity (the node pin wins a conflicting key).
* With scheduler ``volcano`` (:attr:`JobSettings.scheduler_name`), the pod names its one-member PodGroup (same
  name as the Job) and the caller creates it first (:func:`podgroup`); with any other scheduler, no PodGroup.
* Every object carries the labels of :mod:`kthena_py.vocab.labels` (cache name, fingerprint, job kind, attempt,
  node) and a controller owner reference to the cache, so the garbage collector removes them with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kthena_py.api.common import to_dict
from kthena_py.api.modelcache import MODEL_CACHE_API_VERSION, MODEL_CACHE_KIND, ModelCache, model_dir
from kthena_py.vocab.labels import (
    MODEL_CACHE_ATTEMPT,
    MODEL_CACHE_CONTENT,
    MODEL_CACHE_FINGERPRINT,
    MODEL_CACHE_JOB_KIND,
    MODEL_CACHE_NAME,
    MODEL_CACHE_NODE,
    VOLCANO_PODGROUP,
)
from kthena_py.vocab.owners import controller_reference

from .naming import claim_name, label_value
from .views import CLEANUP, DOWNLOAD, HOSTNAME_LABEL, JobKind, NodeView

__all__ = [
    "CONTAINER",
    "JOB_MOUNT_PATH",
    "VOLCANO",
    "JobSettings",
    "Restage",
    "cache_path",
    "claim",
    "cleanup_job",
    "download_job",
    "job_labels",
    "podgroup",
    "uses_claim",
]

VOLCANO = "volcano"
JOB_MOUNT_PATH = "/kthena-cache"
"""Where a cache's Jobs mount its storage."""
CONTAINER = "download"
_VOLUME = "cache"
_TERMINATION_LOG = "/dev/termination-log"


@dataclass(frozen=True)
class JobSettings:
    """How the cache's Jobs are rendered (the controller's settings).

    Attributes:
        image: The image that runs ``kthena-py download``.
        scheduler_name: The pods' scheduler; ``volcano`` also gets a one-member PodGroup per Job.
        progress_port: The port the download pod serves ``/progress`` on.
        backoff_limit: Pod retries within one Job before it counts as failed.
        command: The image's command for the downloader.
    """

    image: str = "kthena-py-downloader:latest"
    scheduler_name: str = VOLCANO
    progress_port: int = 8090
    backoff_limit: int = 1
    command: tuple[str, ...] = ("kthena-py",)


def uses_claim(cache: ModelCache) -> str | None:
    """The claim the cache's storage is (an existing or a created one), ``None`` for node-local storage."""
    storage = cache.spec.storage
    if storage.persistent_volume_claim is not None:
        return storage.persistent_volume_claim.claim_name
    if storage.volume_claim_template is not None:
        return claim_name(cache.name)
    return None


def cache_path(cache: ModelCache) -> str:
    """Where the model is, for ``status.path``: ``pvc://<claim>/<dir>`` or ``<nodeLocal.path>/<dir>``."""
    directory = model_dir(cache.spec.source, cache.spec.revision)
    claim_of = uses_claim(cache)
    if claim_of is not None:
        return f"pvc://{claim_of}/{directory}"
    node_local = cache.spec.storage.node_local
    assert node_local is not None  # exactly one storage kind (the API guarantees it)
    return f"{node_local.path.rstrip('/')}/{directory}"


def _owner(cache: ModelCache) -> dict[str, Any]:
    return controller_reference(MODEL_CACHE_API_VERSION, MODEL_CACHE_KIND, cache.name, cache.uid)


def job_labels(cache: ModelCache, kind: JobKind, fp: str, node: NodeView | None, attempt: int = 0) -> dict[str, str]:
    """The labels of a Job of ``cache`` (and of its pods and PodGroup)."""
    labels = {
        MODEL_CACHE_NAME: label_value(cache.name),
        MODEL_CACHE_FINGERPRINT: fp,
        MODEL_CACHE_JOB_KIND: kind,
    }
    if kind == DOWNLOAD:
        labels[MODEL_CACHE_ATTEMPT] = str(attempt)
    if node is not None:
        labels[MODEL_CACHE_NODE] = label_value(node.name)
    return labels


def _volume(cache: ModelCache) -> dict[str, Any]:
    claim_of = uses_claim(cache)
    if claim_of is not None:
        return {"name": _VOLUME, "persistentVolumeClaim": {"claimName": claim_of}}
    node_local = cache.spec.storage.node_local
    assert node_local is not None
    return {"name": _VOLUME, "hostPath": {"path": node_local.path, "type": "DirectoryOrCreate"}}


def _download_args(cache: ModelCache, settings: JobSettings, restage: Restage | None = None) -> list[str]:
    spec = cache.spec
    directory = restage.directory if restage is not None else model_dir(spec.source, spec.revision)
    output = f"{JOB_MOUNT_PATH}/{directory}"
    args = ["download", "-s", spec.source, "-o", output, "-w", str(spec.max_workers)]
    revision = restage.revision if restage is not None and restage.revision is not None else spec.revision
    if revision is not None:
        args += ["--revision", revision]
    for name in spec.files or []:
        args += ["--files", name]
    if spec.sha256 is not None:
        args += ["--sha256", spec.sha256]
    for name, digest in sorted((spec.file_sha256 or {}).items()):
        args += ["--file-sha256", f"{name}={digest}"]
    args += ["--result-file", _TERMINATION_LOG, "--progress-address", f"$(POD_IP):{settings.progress_port}"]
    return args


def _job(
    cache: ModelCache,
    name: str,
    kind: JobKind,
    fp: str,
    node: NodeView | None,
    attempt: int,
    args: list[str],
    settings: JobSettings,
) -> dict[str, Any]:
    labels = job_labels(cache, kind, fp, node, attempt)
    annotations = {MODEL_CACHE_NODE: node.name} if node is not None else {}
    placement = cache.spec.placement
    node_selector = dict((placement.node_selector if placement else None) or {})
    if node is not None:
        node_selector[HOSTNAME_LABEL] = node.hostname
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": settings.image,
        "command": list(settings.command),
        "args": args,
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "volumeMounts": [{"name": _VOLUME, "mountPath": JOB_MOUNT_PATH}],
        "terminationMessagePath": _TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    if kind == DOWNLOAD:
        container["ports"] = [{"name": "progress", "containerPort": settings.progress_port, "protocol": "TCP"}]
    if cache.spec.source_secret_ref is not None:
        container["envFrom"] = [{"secretRef": {"name": cache.spec.source_secret_ref.name}}]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "schedulerName": settings.scheduler_name,
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [_volume(cache)],
    }
    if node_selector:
        pod_spec["nodeSelector"] = dict(sorted(node_selector.items()))
    if placement is not None and placement.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in placement.tolerations]
    if placement is not None and placement.affinity:
        pod_spec["affinity"] = dict(placement.affinity)
    pod_annotations = {VOLCANO_PODGROUP: name} if settings.scheduler_name == VOLCANO else {}
    template_meta: dict[str, Any] = {"labels": dict(labels)}
    if pod_annotations:
        template_meta["annotations"] = pod_annotations
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": cache.namespace,
        "labels": labels,
        "ownerReferences": [_owner(cache)],
    }
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": settings.backoff_limit,
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }


@dataclass(frozen=True)
class Restage:
    """A re-staging download (``refreshPolicy: OnChange``): its directory, content token and pinned revision."""

    directory: str
    content: str
    revision: str | None = None


def download_job(
    cache: ModelCache,
    name: str,
    fp: str,
    settings: JobSettings,
    node: NodeView | None = None,
    attempt: int = 0,
    restage: Restage | None = None,
) -> dict[str, Any]:
    """The download Job ``name`` of ``cache`` (on ``node`` for a node-local cache); see the module docstring.

    With ``restage``, the Job stages into ``restage.directory`` (pinning ``restage.revision`` when given) and
    carries the label :data:`~kthena_py.vocab.labels.MODEL_CACHE_CONTENT`.
    """
    job = _job(cache, name, DOWNLOAD, fp, node, attempt, _download_args(cache, settings, restage), settings)
    if restage is not None:
        for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
            labels[MODEL_CACHE_CONTENT] = restage.content
    return job


def cleanup_job(
    cache: ModelCache,
    name: str,
    fp: str,
    settings: JobSettings,
    node: NodeView | None = None,
    directory: str | None = None,
) -> dict[str, Any]:
    """The Job that removes the model directory (``kthena-py download --remove -o <dir>``).

    ``directory`` names another directory of the cache (a re-staged copy); default: the first staging's.
    """
    output = f"{JOB_MOUNT_PATH}/{directory or model_dir(cache.spec.source, cache.spec.revision)}"
    return _job(cache, name, CLEANUP, fp, node, 0, ["download", "--remove", "-o", output], settings)


def podgroup(cache: ModelCache, job: dict[str, Any]) -> dict[str, Any]:
    """The one-member Volcano PodGroup of ``job`` (same name, labels and owner)."""
    md = job["metadata"]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": md["name"],
            "namespace": md["namespace"],
            "labels": dict(md["labels"]),
            "ownerReferences": [_owner(cache)],
        },
        "spec": {"minMember": 1},
    }


def claim(cache: ModelCache) -> dict[str, Any]:
    """The claim a ``volumeClaimTemplate`` cache creates (owned by the cache)."""
    template = cache.spec.storage.volume_claim_template
    assert template is not None
    spec: dict[str, Any] = {
        "accessModes": list(template.access_modes),
        "resources": {"requests": {"storage": to_dict(template)["size"]}},
    }
    if template.storage_class_name is not None:
        spec["storageClassName"] = template.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": claim_name(cache.name),
            "namespace": cache.namespace,
            "labels": {MODEL_CACHE_NAME: label_value(cache.name)},
            "ownerReferences": [_owner(cache)],
        },
        "spec": spec,
    }
