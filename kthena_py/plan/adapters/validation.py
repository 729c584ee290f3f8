"""Admission rules of the LoRA annotations of a ModelServing, as field errors with paths.

Guarantees (pure):

* Every problem :func:`~.desired.parse_adapters` finds in ``serving.kthena-py.io/lora-adapters`` is an error at
  ``metadata.annotations[serving.kthena-py.io/lora-adapters]`` followed by the entry's path (``[1].name``).
* ``serving.kthena-py.io/lora-endpoint`` must be ``sidecar`` or ``engine``; ``serving.kthena-py.io/lora-port`` a
  port number; each is reported at its own annotation path.
* With the ``engine`` endpoint every source must be an absolute path (:func:`~.endpoint.source_problem`), reported
  at the entry's ``.source``.
* A ModelServing without these annotations gets no error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kthena_py.api.validation.errors import ErrorType, FieldError, invalid, not_supported
from kthena_py.vocab.labels import LORA_ADAPTERS, LORA_ENDPOINT, LORA_PORT

from .desired import parse_adapters
from .endpoint import ENGINE, SIDECAR, endpoint_of, source_problem

__all__ = ["lora_annotation_errors", "lora_annotations_of"]


def _path(annotation: str) -> str:
    return f"metadata.annotations[{annotation}]"


def lora_annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """The LoRA annotations of an object (to tell whether an update changed them)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return {}
    return {k: str(v) for k, v in annotations.items() if k in (LORA_ADAPTERS, LORA_ENDPOINT, LORA_PORT)}


def lora_annotation_errors(ms: Mapping[str, Any]) -> list[FieldError]:
    """The field errors of a ModelServing's LoRA annotations (see the module docstring)."""
    annotations = lora_annotations_of(ms)
    if not annotations:
        return []
    errors: list[FieldError] = []
    endpoint, problems = endpoint_of(ms, engine_port=1)
    for problem in problems:
        value = annotations.get(problem.path, "")
        if problem.path == LORA_ENDPOINT:
            errors.append(not_supported(_path(LORA_ENDPOINT), value, [SIDECAR, ENGINE]))
        else:
            errors.append(invalid(_path(problem.path), value, problem.message))
    text = annotations.get(LORA_ADAPTERS)
    adapters, adapter_problems = parse_adapters(text)
    base = _path(LORA_ADAPTERS)
    for problem in adapter_problems:
        errors.append(FieldError(f"{base}{problem.path}", ErrorType.INVALID, problem.message))
    if endpoint.kind == ENGINE and adapters and text is not None:
        raw = json.loads(text)
        index = {entry.get("name"): i for i, entry in enumerate(raw) if isinstance(entry, Mapping)}
        for adapter in adapters:
            why = source_problem(adapter.source, ENGINE)
            if why is not None:
                errors.append(invalid(f"{base}[{index.get(adapter.name, 0)}].source", adapter.source, why))
    return errors
