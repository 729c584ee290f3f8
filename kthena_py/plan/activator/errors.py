"""OpenAI-style error objects, and the reading of a request body into a model name.

Guarantees:

* Every error the activator answers is ``{"error": {"message", "type", "param", "code"}}`` as OpenAI's API
  answers errors; ``type`` is ``invalid_request_error`` for the client's mistakes (4xx) and
  ``service_unavailable`` for a target that cannot serve now (503).
* :func:`read_model` never raises: a body above the limit, a body that is not JSON or not an object, or an object
  without a non-empty string ``model`` is a :class:`RequestError` with its status (413 or 400).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["RequestError", "error_body", "read_model"]

INVALID_REQUEST = "invalid_request_error"
UNAVAILABLE = "service_unavailable"
NOT_FOUND = "not_found_error"


@dataclass(frozen=True)
class RequestError:
    """A request the activator answers itself, with an error."""

    status: int
    message: str
    code: str
    param: str | None = None
    type: str = INVALID_REQUEST

    def body(self) -> dict[str, Any]:
        """The OpenAI-style JSON body."""
        return error_body(self.message, self.type, self.code, self.param)


def error_body(message: str, type_: str, code: str, param: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` as OpenAI's API words errors."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def read_model(body: bytes, max_bytes: int) -> str | RequestError:
    """The ``model`` of a JSON request body, or why the request is refused."""
    if len(body) > max_bytes:
        return RequestError(413, f"request body is {len(body)} bytes; the limit is {max_bytes}", "body_too_large")
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return RequestError(400, "the request body is not valid JSON", "invalid_json")
    if not isinstance(parsed, dict):
        return RequestError(400, "the request body must be a JSON object", "invalid_json")
    model = parsed.get("model")
    if not isinstance(model, str) or not model.strip():
        return RequestError(400, "you must provide a model parameter", "missing_model", "model")
    return model.strip()
