"""The ModelServing a booster expands into, from Kthena's ``vLLM`` and ``vLLMDisaggregated`` templates.

Guarantees (modelbooster.md sections 4.4, 4.7 and 4.8):

* ``vLLM``: one role ``leader`` (``replicas`` = the server's, ``workerReplicas`` = ``max(pods - 1, 0)``), an
  entry pod with the runtime sidecar and the engine (probe, preStop drain, ``/dev/shm``), and Ray worker pods
  when ``pods > 1``; ``gangPolicy.minRoleReplicas {leader: server.replicas}``.
* ``vLLMDisaggregated``: roles ``prefill`` and ``decode`` with one pod each and
  ``gangPolicy.minRoleReplicas`` from their replicas.
* Every pod template carries the five booster labels. Their ``revision`` hashes the backend **without** its
  replica counts (Kthena hashes all of it), so changing ``backend.replicas`` or a worker's ``replicas``
  scales the ModelServing without changing its pod templates, and never rolls a ServingGroup.
* ``schedulerName`` and ``runtimeClassName`` are set only when given; ``affinity`` is always set (``{}`` when
  unset), ``tolerations`` only when given; the downloader runs first in every pod.
* Gated on a ModelCache (the booster's prefetch opt-in, :mod:`~.prefetch`): the ModelServing carries the
  :data:`~kthena_py.vocab.labels.MODEL_CACHE` annotation naming the cache, no pod has a downloader init
  container nor the ``cacheURI`` volume, and the engines read the model at
  :data:`~kthena_py.api.modelcache.MODEL_CACHE_MOUNT_PATH`, where the serving gate mounts the cache read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kthena_py.api.common import API_VERSION, MODEL_SERVING_KIND, to_dict
from kthena_py.api.modelbooster import ModelBackend, ModelBooster, ModelWorker
from kthena_py.api.modelcache import MODEL_CACHE_MOUNT_PATH
from kthena_py.vocab.labels import MODEL_CACHE

from . import naming
from .engine import RAY_SCRIPT, Knobs, engine_command, engine_env, engine_port, knobs_of
from .errors import ExpandError
from .storage import Cache, cache_of, downloader_container, model_path
from .types import Images

__all__ = ["build_modelserving", "prestop_script", "replica_counts", "template_revision"]

_DSHM = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
_DSHM_MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}


def prestop_script(port: int) -> str:
    """The engine's preStop drain: poll ``/metrics`` every 5 s until the engine is down or idle."""
    total = "awk '/^vllm:num_requests_{0}/ {{s += $NF; n++}} END {{if (n) print s}}'"
    return "\n".join(
        [
            "while true; do",
            f'  metrics=$(curl -s --max-time 2 "http://localhost:{port}/metrics")',
            f'  running=$(printf "%s\\n" "$metrics" | {total.format("running")})',
            f'  waiting=$(printf "%s\\n" "$metrics" | {total.format("waiting")})',
            '  if [ -z "$running" ]; then exit 0; fi',
            '  if [ "$running" = 0 ] && [ "${waiting:-0}" = 0 ]; then exit 0; fi',
            "  sleep 5",
            "done",
        ]
    )


def template_revision(backend: ModelBackend) -> str:
    """The ``revision`` label of the pod templates: the backend without ``replicas`` and workers' ``replicas``."""
    shape = to_dict(backend)
    shape.pop("replicas", None)
    for worker in shape.get("workers") or []:
        worker.pop("replicas", None)
    return naming.revision(shape)


def replica_counts(ms: dict[str, Any]) -> dict[str, Any]:
    """The replica counts of a rendered or live ModelServing: ``{"replicas": n, "roles": {role: n}}``.

    Absent counts are ``None`` (the CRD default applies).
    """
    spec = ms.get("spec") or {}
    roles = ((spec.get("template") or {}).get("roles")) or []
    return {
        "replicas": spec.get("replicas"),
        "roles": {str(role.get("name")): role.get("replicas") for role in roles if isinstance(role, dict)},
    }


def _pod_spec_base(worker: ModelWorker, backend: ModelBackend) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if backend.runtime_class_name:
        spec["runtimeClassName"] = backend.runtime_class_name
    spec["affinity"] = dict(worker.affinity or {})
    if worker.tolerations is not None:
        spec["tolerations"] = list(worker.tolerations)
    return spec


def _runtime(backend: ModelBackend, booster: ModelBooster, images: Images, knobs: Knobs, role: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "runtime",
        "image": images.runtime,
        "ports": [{"containerPort": knobs.runtime_port}],
        "args": [
            "--port",
            str(knobs.runtime_port),
            "--engine",
            backend.type.lower(),
            "--engine-base-url",
            knobs.runtime_url,
            "--engine-metrics-path",
            knobs.metrics_path,
            "--pod",
            "$(POD_NAME).$(NAMESPACE)",
            "--model",
            booster.name,
        ],
        "env": engine_env(backend, role),
    }
    if backend.env_from and role != "prefill":
        container["envFrom"] = list(backend.env_from)
    if role == "server":
        container["readinessProbe"] = {
            "httpGet": {"path": "/health", "port": knobs.runtime_port},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        }
    return container


@dataclass(frozen=True)
class _Weights:
    """How a pod gets the model: its volumes, mounts and init containers, and the engine's model path."""

    volumes: tuple[dict[str, Any], ...]
    mounts: tuple[dict[str, Any], ...]
    init: tuple[dict[str, Any], ...]
    model: str

    def pod(self, spec: dict[str, Any], volumes: list[dict[str, Any]]) -> None:
        """Add ``initContainers`` (when any) and ``volumes`` (the weights' first, when any) to a pod spec."""
        if self.init:
            spec["initContainers"] = [dict(c) for c in self.init]
        every = [*(dict(v) for v in self.volumes), *volumes]
        if every:
            spec["volumes"] = every


def _weights(booster: ModelBooster, images: Images, cache: Cache, gated: bool) -> _Weights:
    if gated:
        return _Weights((), (), (), MODEL_CACHE_MOUNT_PATH)
    uri = booster.spec.backend.model_uri
    downloader = downloader_container(booster, images.downloader, cache)
    return _Weights((cache.volume,), (cache.mount,), (downloader,), model_path(cache.path, uri))


def _template(labels: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def _aggregated(
    booster: ModelBooster, images: Images, labels: dict[str, str], weights: _Weights, port: int, served: str
) -> dict[str, Any]:
    backend = booster.spec.backend
    server = backend.workers[0]
    knobs = knobs_of(backend, port)
    engine: dict[str, Any] = {
        "name": "engine",
        "image": server.image,
        "command": engine_command(backend, server, weights.model, served, knobs),
        "env": engine_env(backend, "server"),
    }
    if server.resources is not None:
        engine["resources"] = dict(server.resources)
    engine["volumeMounts"] = [*(dict(m) for m in weights.mounts), dict(_DSHM_MOUNT)]
    engine["readinessProbe"] = {
        "httpGet": {"path": "/health", "port": port, "scheme": "HTTP"},
        "initialDelaySeconds": 180,
        "periodSeconds": 5,
        "failureThreshold": 3,
        "successThreshold": 1,
        "timeoutSeconds": 1,
    }
    engine["lifecycle"] = {"preStop": {"exec": {"command": ["/bin/sh", "-c", prestop_script(port)]}}}
    entry = _pod_spec_base(server, backend)
    weights.pod(entry, [dict(_DSHM)])
    entry["terminationGracePeriodSeconds"] = 300
    entry["containers"] = [_runtime(backend, booster, images, knobs, "server"), engine]
    workers = max((server.pods or 0) - 1, 0)
    role: dict[str, Any] = {
        "name": "leader",
        "replicas": server.replicas or 0,
        "workerReplicas": workers,
        "entryTemplate": _template(labels, entry),
    }
    if workers:
        worker_container: dict[str, Any] = {
            "name": f"{backend.name.lower()}-{backend.type.lower()}-worker",
            "image": server.image,
            "command": [
                "bash",
                "-c",
                f"chmod u+x {RAY_SCRIPT} && {RAY_SCRIPT} worker --ray_address=$(ENTRY_ADDRESS)",
            ],
        }
        if backend.env:
            worker_container["env"] = [dict(entry) for entry in backend.env]
        if server.resources is not None:
            worker_container["resources"] = dict(server.resources)
        worker_container["volumeMounts"] = [*(dict(m) for m in weights.mounts), dict(_DSHM_MOUNT)]
        worker_pod = _pod_spec_base(server, backend)
        weights.pod(worker_pod, [dict(_DSHM)])
        worker_pod["containers"] = [worker_container]
        role["workerTemplate"] = _template(labels, worker_pod)
    return {
        "restartGracePeriodSeconds": 60,
        "gangPolicy": {"minRoleReplicas": {"leader": server.replicas or 0}},
        "roles": [role],
    }


def _pd_role(
    booster: ModelBooster,
    images: Images,
    labels: dict[str, str],
    weights: _Weights,
    port: int,
    served: str,
    worker: ModelWorker,
) -> dict[str, Any]:
    backend = booster.spec.backend
    knobs = knobs_of(backend, port)
    probe = {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 5, "failureThreshold": 3}
    engine: dict[str, Any] = {
        "name": "vllm",
        "image": worker.image,
        "command": engine_command(backend, worker, weights.model, served, knobs),
        "env": engine_env(backend, worker.type),
    }
    if worker.resources is not None:
        engine["resources"] = dict(worker.resources)
    engine.update(
        {
            "ports": [{"containerPort": port}],
            "imagePullPolicy": "IfNotPresent",
            "readinessProbe": {**probe, "initialDelaySeconds": 5},
            "livenessProbe": {**probe, "initialDelaySeconds": 180},
        }
    )
    if weights.mounts:
        engine["volumeMounts"] = [dict(m) for m in weights.mounts]
    entry = _pod_spec_base(worker, backend)
    weights.pod(entry, [])
    entry["containers"] = [_runtime(backend, booster, images, knobs, worker.type), engine]
    return {
        "name": worker.type,
        "replicas": worker.replicas or 0,
        "workerReplicas": 0,
        "entryTemplate": _template(labels, entry),
        "workerTemplate": {"spec": {"containers": []}},
    }


def _disaggregated(
    booster: ModelBooster, images: Images, labels: dict[str, str], weights: _Weights, port: int, served: str
) -> dict[str, Any]:
    workers = booster.spec.backend.workers
    found: dict[str, ModelWorker] = {}
    for kind in ("prefill", "decode"):
        worker = next((w for w in workers if w.type == kind), None)
        if worker is None:
            raise ExpandError(f"{kind} worker not found in backend")
        found[kind] = worker
    return {
        "restartGracePeriodSeconds": 60,
        "gangPolicy": {"minRoleReplicas": {kind: w.replicas or 0 for kind, w in found.items()}},
        "roles": [_pd_role(booster, images, labels, weights, port, served, w) for w in found.values()],
    }


def build_modelserving(
    booster: ModelBooster, images: Images, served_model_name: str, model_cache: str | None = None
) -> dict[str, Any]:
    """The ModelServing ``<booster>-<backend>``.

    Args:
        booster: The booster (with name, namespace and uid).
        images: Downloader and runtime images.
        served_model_name: The model name the engines serve (the ModelServer's ``spec.model``).
        model_cache: The ModelCache to gate on (``None``: the per-pod downloader fills ``cacheURI``).

    Raises:
        ExpandError: An unsupported backend type, a bad port or cacheURI, a missing PD role.
    """
    backend = booster.spec.backend
    kind = str(backend.type)
    if kind not in ("vLLM", "vLLMDisaggregated"):
        raise ExpandError(f"not support model backend type: {kind}")
    port = engine_port(backend)
    cache = cache_of(backend)
    pod_labels = naming.booster_labels(booster, backend.name, template_revision(backend))
    build = _aggregated if kind == "vLLM" else _disaggregated
    weights = _weights(booster, images, cache, model_cache is not None)
    template = build(booster, images, pod_labels, weights, port, served_model_name)
    spec: dict[str, Any] = {}
    if backend.scheduler_name:
        spec["schedulerName"] = backend.scheduler_name
    spec["replicas"] = backend.replicas
    spec["template"] = template
    metadata: dict[str, Any] = {
        "name": naming.modelserving_name(booster),
        "namespace": booster.namespace,
        "labels": naming.booster_labels(booster, backend.name, naming.revision(to_dict(backend))),
    }
    if model_cache is not None:
        metadata["annotations"] = {MODEL_CACHE: model_cache}
    metadata["ownerReferences"] = [naming.owner_reference(booster)]
    return {"apiVersion": API_VERSION, "kind": MODEL_SERVING_KIND, "metadata": metadata, "spec": spec}
