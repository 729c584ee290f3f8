"""The vLLM engine of a booster's pods: its port, env knobs, environment and command line.

Guarantees (modelbooster.md sections 4.1 and 4.3-4.6, with the fixes section 11 asks for):

* The engine port is the one ``config.port`` the server/prefill/decode workers agree on (default 8000).
* ``backend.env`` knobs: ``RUNTIME_PORT`` (8100), ``RUNTIME_URL`` (``http://localhost:<port>``),
  ``RUNTIME_METRICS_PATH`` (``/metrics``), ``KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL`` (Go ``ParseBool``, false);
  a value that does not parse falls back to the default.
* Engine env is ``backend.env`` plus Kthena's injected variables; a name the user already sets is not
  injected again (a duplicate name is invalid in a pod template).
* ``worker.config`` becomes engine flags in sorted key order, ``_`` turned into ``-``. Fixed against Kthena:
  ``true`` is the bare flag and ``false`` is ``--no-<flag>`` (vLLM's boolean flags), integral numbers print
  as integers (never ``1e+06``), objects and arrays as compact JSON, ``null`` drops the flag. The empty
  string still means the bare flag. ``--served-model-name`` is added when the config lacks it, with the
  name the ModelServer rewrites requests to.
* Wrapped commands (Ray leader, connector ``pip install``) are ``bash -c`` scripts whose engine command is
  shell-quoted, so a JSON flag value reaches vLLM intact. Unwrapped commands are exec form.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kthena_py.api.modelbooster import ModelBackend, ModelWorker
from kthena_py.api.quantity import QuantityError, parse_quantity
from kthena_py.api.validation.modelbooster import engine_port as _engine_port

from .errors import ExpandError
from .storage import env_literal

__all__ = [
    "RAY_SCRIPT",
    "Knobs",
    "config_flags",
    "config_of",
    "config_value",
    "device_count",
    "engine_command",
    "engine_env",
    "engine_port",
    "has_gpu",
    "knobs_of",
    "kv_connector_name",
    "wrap",
]

RAY_SCRIPT = "examples/online_serving/multi-node-serving.sh"
GPU = "nvidia.com/gpu"
ASCEND = "huawei.com/ascend-1980"
_VLLM = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_CONNECTOR_INSTALL = {
    "MooncakeConnector": "pip install mooncake-transfer-engine",
    "NixlConnector": "PIP_DISABLE_PIP_VERSION_CHECK=1 pip install -U --no-cache-dir nixl",
}


def engine_port(backend: ModelBackend) -> int:
    """The engine port of ``backend``.

    Raises:
        ExpandError: A worker's port is not a number in 1..65535, or two workers disagree.
    """
    try:
        return _engine_port(backend.workers)
    except ValueError as exc:
        raise ExpandError(str(exc)) from exc


@dataclass(frozen=True)
class Knobs:
    """The runtime sidecar settings and the dependency-install switch read from ``backend.env``."""

    runtime_port: int
    runtime_url: str
    metrics_path: str
    skip_dependency_install: bool


def knobs_of(backend: ModelBackend, port: int) -> Knobs:
    """Read the ``backend.env`` knobs (literal values only; unparsable ones fall back to the default)."""
    env = backend.env
    raw_port = (env_literal(env, "RUNTIME_PORT") or "").strip()
    runtime_port = int(raw_port) if raw_port.isascii() and raw_port.isdigit() and 0 < int(raw_port) < 65536 else 8100
    skip = env_literal(env, "KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL") or ""
    return Knobs(
        runtime_port=runtime_port,
        runtime_url=env_literal(env, "RUNTIME_URL") or f"http://localhost:{port}",
        metrics_path=env_literal(env, "RUNTIME_METRICS_PATH") or "/metrics",
        skip_dependency_install=skip in _GO_TRUE,
    )


def config_of(worker: ModelWorker) -> dict[str, Any]:
    """A worker's ``config`` as a JSON object (``{}`` when unset).

    Raises:
        ExpandError: The config is not a JSON object.
    """
    if worker.config is None:
        return {}
    if not isinstance(worker.config, dict):
        raise ExpandError(f"failed to parse worker {worker.type} config: expected a JSON object")
    return worker.config


def config_value(config: Mapping[str, Any], key: str) -> Any:
    """``config[key]`` under either spelling (``served-model-name`` or ``served_model_name``)."""
    return config.get(key, config.get(key.replace("-", "_")))


def _flag_value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def config_flags(config: Mapping[str, Any]) -> list[str]:
    """Turn an engine config into CLI tokens, keys sorted (see the module docstring for each value type)."""
    tokens: list[str] = []
    for key in sorted(config):
        value = config[key]
        flag = key.replace("_", "-")
        if value is None:
            continue
        if value is True or value == "":
            tokens.append(f"--{flag}")
        elif value is False:
            tokens.append(f"--no-{flag}")
        else:
            tokens.extend([f"--{flag}", _flag_value(value)])
    return tokens


def _limits(worker: ModelWorker) -> Mapping[str, Any]:
    limits = (worker.resources or {}).get("limits")
    return limits if isinstance(limits, Mapping) else {}


def _count(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return Decimal(0)
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)


def device_count(worker: ModelWorker) -> int:
    """Accelerators a worker's limits ask for: ``nvidia.com/gpu`` plus ``huawei.com/ascend-1980``."""
    limits = _limits(worker)
    return int(_count(limits.get(GPU)) + _count(limits.get(ASCEND)))


def has_gpu(backend: ModelBackend) -> bool:
    """Whether any worker has a ``nvidia.com/gpu`` limit above zero."""
    return any(_count(_limits(worker).get(GPU)) > 0 for worker in backend.workers)


def kv_connector_name(config: Mapping[str, Any]) -> str | None:
    """The ``kv_connector`` of a ``kv-transfer-config`` JSON string (``None`` when absent or unreadable)."""
    raw = config_value(config, "kv-transfer-config")
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return None
        raw = parsed
    if isinstance(raw, dict) and isinstance(raw.get("kv_connector"), str):
        return str(raw["kv_connector"])
    return None


def wrap(steps: Sequence[str], command: Sequence[str]) -> list[str]:
    """``command`` as exec form, or, after shell ``steps``, as ``bash -c "<steps> && <quoted command>"``."""
    if not steps:
        return list(command)
    return ["bash", "-c", " && ".join([*steps, shlex.join(command)])]


def engine_command(
    backend: ModelBackend,
    worker: ModelWorker,
    model: str,
    served_model_name: str,
    knobs: Knobs,
) -> list[str]:
    """The engine container's command for ``worker`` (aggregated ``server`` or a PD role).

    Args:
        backend: The booster's backend.
        worker: The worker whose config shapes the flags.
        model: The model path inside the pod.
        served_model_name: Added as ``--served-model-name`` when the config has none.
        knobs: The ``backend.env`` knobs.
    """
    config = config_of(worker)
    command = [*_VLLM, "--model", model, *config_flags(config)]
    if config_value(config, "served-model-name") is None:
        command += ["--served-model-name", served_model_name]
    steps: list[str] = []
    connector = kv_connector_name(config)
    if connector in _CONNECTOR_INSTALL and has_gpu(backend) and not knobs.skip_dependency_install:
        steps.append(_CONNECTOR_INSTALL[str(connector)])
    pods = worker.pods or 0
    if worker.type == "server" and pods > 1:
        command += ["--distributed_executor_backend", "ray"]
        steps.append(
            f"chmod u+x {RAY_SCRIPT} && {RAY_SCRIPT} leader --ray_cluster_size={pods} --num-gpus={device_count(worker)}"
        )
    return wrap(steps, command)


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _injected(role: str) -> list[dict[str, Any]]:
    env = [
        _field_env("POD_NAME", "metadata.name"),
        _field_env("NAMESPACE", "metadata.namespace"),
        {"name": "VLLM_USE_V1", "value": "1"},
        *(
            {"name": key, "valueFrom": {"configMapKeyRef": {"name": "redis-config", "key": key, "optional": True}}}
            for key in ("REDIS_HOST", "REDIS_PORT")
        ),
        {
            "name": "REDIS_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "redis-secret", "key": "REDIS_PASSWORD", "optional": True}},
        },
    ]
    if role == "prefill":
        env += [{"name": "HF_HUB_OFFLINE", "value": "1"}, _field_env("HCCL_IF_IP", "status.podIP")]
    elif role == "decode":
        env += [{"name": "HF_HUB_OFFLINE", "value": "1"}]
        env += [{"name": n, "value": "eth0"} for n in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")]
    return env


def engine_env(backend: ModelBackend, role: str) -> list[dict[str, Any]]:
    """``backend.env`` then Kthena's injected variables for ``role`` (``server``, ``prefill`` or ``decode``)."""
    user = [dict(entry) for entry in backend.env or []]
    taken = {entry.get("name") for entry in user}
    return user + [entry for entry in _injected(role) if entry["name"] not in taken]
