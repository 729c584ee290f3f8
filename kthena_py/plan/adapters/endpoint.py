"""Where and how the adapter reconciler loads adapters into a ModelServing's pods, read from its annotations.

Guarantees:

* :func:`endpoint_of` reads ``serving.kthena-py.io/lora-endpoint`` (``sidecar``, the default, or ``engine``) and
  ``serving.kthena-py.io/lora-port`` (a port number 1-65535; default :data:`SIDECAR_PORT` for the sidecar, the
  engine port given for the engine). A value it cannot use is reported in ``problems`` with its annotation path
  and the default is used instead, so a reconcile never stops on it (admission refuses it first).
* Request bodies follow Kthena's runtime sidecar and vLLM: the sidecar gets ``{lora_name, source, output_dir}``
  and downloads the source itself into ``output_dir`` (:func:`output_dir_of`, a directory per name and source
  digest under :data:`ADAPTER_DIR`); the engine gets ``{lora_name, lora_path}`` with the source as the path.
* :func:`expected_root` is the path the engine reports for a loaded adapter (the ``root`` of its ``/v1/models``
  entry): the output directory for the sidecar, the source for the engine, so a listed adapter with that root is
  the one wanted (same name, same source).
* :func:`source_problem` says why a source cannot be loaded through an endpoint: the engine reads a path, so its
  sources must be absolute paths the pod can read (a ModelCache's mount, say); ``None`` when it can.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kthena_py.vocab.labels import LORA_ENDPOINT, LORA_PORT

from .desired import Adapter, AdapterProblem

__all__ = [
    "ADAPTER_DIR",
    "ENGINE",
    "SIDECAR",
    "SIDECAR_PORT",
    "LoadEndpoint",
    "endpoint_of",
    "expected_root",
    "load_body",
    "output_dir_of",
    "source_problem",
    "unload_body",
]

SIDECAR: Literal["sidecar"] = "sidecar"
ENGINE: Literal["engine"] = "engine"
SIDECAR_PORT = 8100
"""Kthena's runtime sidecar port (``RUNTIME_PORT``)."""
ADAPTER_DIR = "/adapters"
"""Where the sidecar is asked to put downloaded adapters (one directory per name and source digest)."""
LOAD_PATH = "/v1/load_lora_adapter"
UNLOAD_PATH = "/v1/unload_lora_adapter"
MODELS_PATH = "/v1/models"


@dataclass(frozen=True)
class LoadEndpoint:
    """The endpoint that loads adapters into a pod: ``kind`` (sidecar or engine) on ``port`` of the pod's IP."""

    kind: Literal["sidecar", "engine"]
    port: int


def _annotations(ms: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = ms.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def endpoint_of(ms: Mapping[str, Any], engine_port: int) -> tuple[LoadEndpoint, tuple[AdapterProblem, ...]]:
    """The load endpoint of a ModelServing and the problems of its annotations (see the module docstring)."""
    annotations = _annotations(ms)
    problems: list[AdapterProblem] = []
    raw_kind = annotations.get(LORA_ENDPOINT)
    kind: Literal["sidecar", "engine"] = SIDECAR
    if raw_kind is not None:
        text = str(raw_kind).strip()
        if text == ENGINE:
            kind = ENGINE
        elif text not in (SIDECAR, ""):
            problems.append(AdapterProblem(LORA_ENDPOINT, f"{text!r} is not one of: {SIDECAR}, {ENGINE}"))
    port = SIDECAR_PORT if kind == SIDECAR else engine_port
    raw_port = annotations.get(LORA_PORT)
    if raw_port is not None:
        text = str(raw_port).strip()
        if text.isdigit() and 0 < int(text) < 65536:
            port = int(text)
        else:
            problems.append(AdapterProblem(LORA_PORT, f"{text!r} is not a port number (1-65535)"))
    return LoadEndpoint(kind, port), tuple(problems)


def output_dir_of(adapter: Adapter) -> str:
    """The directory the sidecar downloads ``adapter`` into: ``/adapters/<name>-<source digest>``."""
    return f"{ADAPTER_DIR}/{adapter.name}-{adapter.digest}"


def expected_root(adapter: Adapter, endpoint: LoadEndpoint) -> str:
    """The path the engine lists for ``adapter`` once loaded through ``endpoint``."""
    return output_dir_of(adapter) if endpoint.kind == SIDECAR else adapter.source


def load_body(adapter: Adapter, endpoint: LoadEndpoint) -> dict[str, str]:
    """The JSON body of a load request."""
    if endpoint.kind == SIDECAR:
        return {"lora_name": adapter.name, "source": adapter.source, "output_dir": output_dir_of(adapter)}
    return {"lora_name": adapter.name, "lora_path": adapter.source}


def unload_body(name: str) -> dict[str, str]:
    """The JSON body of an unload request (the same for both endpoints)."""
    return {"lora_name": name}


def source_problem(source: str, kind: str) -> str | None:
    """Why ``source`` cannot be loaded through a ``kind`` endpoint, or ``None``."""
    if kind == ENGINE and not source.startswith("/"):
        return (
            "the engine loads an adapter from a path it can read: give an absolute path (a ModelCache's mount, "
            "staged and verified by kthena-py download), or use the sidecar endpoint to download a URL"
        )
    return None
