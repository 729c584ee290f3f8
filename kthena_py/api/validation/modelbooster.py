"""Semantic validation of a ModelBooster (Kthena's validating webhook, modelbooster.md §7).

Guarantees: pure; rules and detail strings are Kthena's: container images, worker types per backend type,
engine ports, PVC reachability between ``modelURI`` and ``cacheURI``, and the prefill/decode KV connector
configuration. ``replicas`` above 1000000 is already a schema error, so the webhook's own copy of that rule
never fires here. The deprecation notice is a warning, not an error: see
:data:`kthena_py.api.MODEL_BOOSTER_DEPRECATION_WARNING`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kthena_py.api.modelbooster import ModelBackend, ModelBooster, ModelWorker
from kthena_py.api.validation.common import image_error
from kthena_py.api.validation.errors import FieldError, invalid

__all__ = ["engine_port", "kv_connector_type", "validate_modelbooster"]

_BACKEND = "spec.backend"
_DEFAULT_PORT = 8000
_ENGINE_WORKERS = ("server", "prefill", "decode")
_CONNECTORS = {
    "LMCacheConnectorV1": "lmcache",
    "MooncakeConnector": "mooncake",
    "MooncakeConnectorV1": "mooncake",
    "NixlConnector": "nixl",
}
_KV_ROLES = {"prefill": ("kv_producer", "kv_both"), "decode": ("kv_consumer", "kv_both")}
_KV_PREFIX = "invalid kv connector configuration: "
_PVC_CACHE_REQUIRED = (
    "when modelURI uses pvc://, cacheURI must also use pvc://. The downloader only has access to the volume "
    "mounted via cacheURI. Set cacheURI to the PVC that holds the model (e.g. pvc://<claimName>) and set "
    "modelURI to the path within that PVC (e.g. pvc:///<claimName>/<path-to-model>)"
)
_PVC_SINGLE_CLAIM = (
    "pvc:// cacheURI must contain a single PVC claim name with no path separator (e.g. pvc://<claimName>); "
    "claim names cannot contain '/'"
)


def _config(worker: ModelWorker) -> dict[str, Any]:
    return worker.config if isinstance(worker.config, dict) else {}


def _go_value(value: Any) -> str:
    if value is None:
        return "<nil>"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def _port(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and 1 <= value <= 65535 else None


def _worker_types(backend: ModelBackend) -> list[FieldError]:
    errors: list[FieldError] = []
    workers = backend.workers
    if backend.type == "vLLM":
        if len(workers) != 1:
            message = "If backend type is 'vLLM', there must be exactly one worker"
            errors.append(invalid(f"{_BACKEND}.workers", len(workers), message))
        if workers and workers[0].type != "server":
            message = "If backend type is 'vLLM', the worker type must be 'server'"
            errors.append(invalid(f"{_BACKEND}.workers[0].type", workers[0].type, message))
    else:
        for index, worker in enumerate(workers):
            if worker.type not in ("prefill", "decode"):
                message = "If backend type is 'vLLMDisaggregated', all workers must be type 'prefill' or 'decode'"
                errors.append(invalid(f"{_BACKEND}.workers[{index}].type", worker.type, message))
    return errors


def _ports(backend: ModelBackend) -> list[FieldError]:
    errors: list[FieldError] = []
    first: int | None = None
    for index, worker in enumerate(backend.workers):
        if worker.type not in _ENGINE_WORKERS:
            continue
        config = _config(worker)
        raw = config.get("port", _DEFAULT_PORT)
        path = f"{_BACKEND}.workers[{index}].config.port"
        port = _port(raw)
        if port is None:
            errors.append(invalid(path, raw, f'invalid port "{_go_value(raw)}" for worker {worker.type}'))
        elif first is None:
            first = port
        elif port != first:
            errors.append(invalid(path, raw, f"workers use different engine ports: {first} and {port}"))
    return errors


def _segments(rest: str) -> list[str]:
    return [segment for segment in rest.split("/") if segment not in ("", ".")]


def _pvc(backend: ModelBackend) -> list[FieldError]:
    if not backend.model_uri.startswith("pvc://"):
        return []
    cache = backend.cache_uri or ""
    if not cache.startswith("pvc://"):
        return [invalid(f"{_BACKEND}.cacheURI", cache, _PVC_CACHE_REQUIRED)]
    source = _segments(backend.model_uri[len("pvc://") :])
    if ".." in source:
        message = "pvc:// modelURI must not contain '..' path segments"
        return [invalid(f"{_BACKEND}.modelURI", backend.model_uri, message)]
    claim = _segments(cache[len("pvc://") :])
    if len(claim) != 1:
        return [invalid(f"{_BACKEND}.cacheURI", cache, _PVC_SINGLE_CLAIM)]
    source_path, mount = "/" + "/".join(source), "/" + claim[0]
    if source_path != mount and not source_path.startswith(mount + "/"):
        message = (
            f'PVC source path "{source_path}" is not reachable via cacheURI mount "{mount}". The downloader only '
            "has access to PVCs mounted via cacheURI. If the source model and the cache are on the same PVC, set "
            "cacheURI to the PVC name and include that name as the first path segment of modelURI. Example: "
            "cacheURI: pvc://<claimName>, modelURI: pvc:///<claimName>/<path-to-model>"
        )
        return [invalid(f"{_BACKEND}.modelURI", backend.model_uri, message)]
    return []


def _go_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "float64"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return "[]interface {}" if isinstance(value, list) else type(value).__name__


def _kv_connector(worker: ModelWorker) -> tuple[str | None, str | None]:
    """Return (connector, problem) for one prefill/decode worker's ``kv-transfer-config``."""
    config = _config(worker)
    raw = config.get("kv-transfer-config", config.get("kv_transfer_config"))
    if raw is None:
        return None, None
    prefix = f"worker {worker.type}: "
    if not isinstance(raw, str):
        return None, f"{prefix}kv-transfer-config must be a JSON string, got {_go_type(raw)}"
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"{prefix}kv-transfer-config is not valid JSON: {exc.msg}"
    parsed = parsed if isinstance(parsed, dict) else {}
    connector, role = parsed.get("kv_connector"), parsed.get("kv_role")
    if not connector:
        return None, f"{prefix}kv-transfer-config is set but kv_connector is missing"
    if not role:
        return None, f"{prefix}kv-transfer-config is set but kv_role is missing"
    if connector not in _CONNECTORS:
        supported = ", ".join(sorted(_CONNECTORS))
        return None, f'{prefix}unsupported kv_connector "{connector}" (supported: {supported})'
    allowed = _KV_ROLES[worker.type]
    if role not in allowed:
        return None, f'{prefix}invalid kv_role "{role}", expected one of [{", ".join(allowed)}]'
    return str(connector), None


def _kv(backend: ModelBackend) -> list[FieldError]:
    path = f"{_BACKEND}.workers"
    errors: list[FieldError] = []
    connectors: dict[str, list[str | None]] = {"prefill": [], "decode": []}
    for index, worker in enumerate(backend.workers):
        if worker.type not in connectors:
            continue
        connector, problem = _kv_connector(worker)
        if problem is not None:
            errors.append(invalid(f"{path}[{index}].config", "object", _KV_PREFIX + problem))
        connectors[worker.type].append(connector)
    for kind, found in connectors.items():
        if len(found) > 1:
            message = (
                f"found {len(found)} {kind} workers, expected at most 1; duplicate {kind} workers are not supported"
            )
            errors.append(invalid(path, len(found), _KV_PREFIX + message))
    if errors or len(connectors["prefill"]) != 1 or len(connectors["decode"]) != 1:
        return errors
    prefill, decode = connectors["prefill"][0], connectors["decode"][0]
    same = "prefill and decode must configure the same kv connector"
    if (prefill is None) != (decode is None):
        kind, other = ("decode", "prefill") if prefill is None else ("prefill", "decode")
        message = (
            f'{kind} worker specifies kv_connector "{decode or prefill}" but the {other} worker has no '
            f"kv-transfer-config; {same}"
        )
        errors.append(invalid(path, "array", _KV_PREFIX + message))
    elif prefill is not None and decode is not None and _CONNECTORS[prefill] != _CONNECTORS[decode]:
        message = (
            f'kv_connector mismatch between prefill ("{prefill}") and decode ("{decode}") workers; '
            "prefill and decode must use the same kv connector"
        )
        errors.append(invalid(path, "array", _KV_PREFIX + message))
    return errors


def engine_port(workers: Sequence[ModelWorker]) -> int:
    """Return the engine port the server/prefill/decode workers agree on (``config.port``, default 8000).

    Raises:
        ValueError: Kthena's ``invalid port "<v>" for worker <type>`` or
            ``workers use different engine ports: <a> and <b>``.
    """
    first: int | None = None
    for worker in workers:
        if worker.type not in _ENGINE_WORKERS:
            continue
        raw = _config(worker).get("port", _DEFAULT_PORT)
        port = _port(raw)
        if port is None:
            raise ValueError(f'invalid port "{_go_value(raw)}" for worker {worker.type}')
        if first is None:
            first = port
        elif port != first:
            raise ValueError(f"workers use different engine ports: {first} and {port}")
    return _DEFAULT_PORT if first is None else first


def kv_connector_type(backend: ModelBackend) -> str | None:
    """Return the ModelServer ``kvConnector.type`` of a backend (``mooncake``, ``nixl``, ``lmcache``) or ``None``.

    ``None`` when neither the prefill nor the decode worker has a ``kv-transfer-config``.

    Raises:
        ValueError: The first problem the webhook reports (section 5 of the behaviour notes), prefixed
            ``backend <name>: ``.
    """
    errors = _kv(backend)
    if errors:
        raise ValueError(f"backend {backend.name}: {errors[0].message.removeprefix(_KV_PREFIX)}")
    for worker in backend.workers:
        if worker.type in _KV_ROLES:
            connector, _ = _kv_connector(worker)
            if connector is not None:
                return _CONNECTORS[connector]
    return None


def validate_modelbooster(booster: ModelBooster, old: ModelBooster | None = None) -> list[FieldError]:
    """Validate a ModelBooster as Kthena's admission webhook would.

    Args:
        booster: The new object, schema-valid and with CRD defaults applied.
        old: The stored object for an UPDATE (no rule depends on it).

    Returns:
        All field errors, empty when the booster is acceptable.
    """
    backend = booster.spec.backend
    errors: list[FieldError] = []
    for index, worker in enumerate(backend.workers):
        problem = image_error(worker.image or "")
        if problem is not None:
            errors.append(invalid(f"{_BACKEND}.workers[{index}].image", worker.image, problem))
    errors.extend(_worker_types(backend))
    errors.extend(_ports(backend))
    errors.extend(_pvc(backend))
    errors.extend(_kv(backend))
    return errors
