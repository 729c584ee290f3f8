"""Model metadata in the download result: what the staged GGUF header and ``config.json`` say.

Guarantees of :func:`attach_metadata`:

* only a successful outcome is inspected (a fresh download or an already complete directory alike), under the
  run's directory lock, reading at most the header bytes :mod:`kthena_py.modelmeta` allows;
* it never raises and never turns a success into a failure: an unreadable header or config is logged as a
  warning and reported as a short ``metadataError`` (at most :data:`MAX_ERROR_CHARS` characters), nothing else;
* the metadata goes in :attr:`~.result.Outcome.metadata` as ``gguf`` / ``modelConfig`` objects (camelCase,
  ``None`` fields left out), the first thing :func:`~.result.render_result` drops when the result is too long.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import structlog

from kthena_py.modelmeta.inspect import ModelMetadata, inspect_model

from .result import Outcome

__all__ = ["MAX_ERROR_CHARS", "attach_metadata", "metadata_document"]

MAX_ERROR_CHARS = 200

log = structlog.get_logger("kthena_py.download")


def metadata_document(found: ModelMetadata) -> dict[str, Any]:
    """The result keys for what was found (pure)."""
    doc: dict[str, Any] = {}
    if found.gguf is not None:
        doc["gguf"] = found.gguf.to_json()
    if found.config is not None:
        doc["modelConfig"] = found.config.to_json()
    if found.errors:
        error = found.errors[0]
        doc["metadataError"] = error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 3] + "..."
    return doc


async def attach_metadata(outcome: Outcome, requested: Sequence[str] = ()) -> Outcome:
    """``outcome`` with the staged model's metadata (see the module docstring); never raises."""
    if not outcome.succeeded or not outcome.files:
        return outcome
    try:
        found = await asyncio.to_thread(inspect_model, outcome.path, [f.name for f in outcome.files], requested)
    except Exception as exc:  # a bug in the reader must not fail a verified download
        log.warning("model metadata not read", error=f"{type(exc).__name__}: {exc}")
        found = ModelMetadata(errors=(f"metadata not read: {type(exc).__name__}",))
    for error in found.errors:
        log.warning("model metadata unreadable", error=error)
    doc = metadata_document(found)
    if "gguf" in doc or "modelConfig" in doc:
        log.info("model metadata", **{k: v for k, v in doc.items() if k != "metadataError"})
    return dataclasses.replace(outcome, metadata=doc) if doc else outcome
