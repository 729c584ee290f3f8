"""API errors mapped to a small exception hierarchy.

Guarantees: every non-2xx answer of the API server reaching callers of :mod:`kthena_py.kube` is
an :class:`ApiError` (or a subclass chosen by HTTP status and ``reason``), carrying the server's
``Status`` message and, for ``Invalid``, the field causes. Transport failures are :class:`ApiUnavailable`.
No other exception type from the HTTP stack leaks out of the client layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One field-level cause of an ``Invalid`` answer (``details.causes[]`` of a Status)."""

    field: str
    reason: str
    message: str


class ApiError(Exception):
    """An error answer from the API server."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: create of an object whose name is taken."""


class Conflict(ApiError):
    """409 Conflict: a resourceVersion or UID precondition failed."""


class Gone(ApiError):
    """410: the requested resourceVersion is too old (compacted)."""


class Invalid(ApiError):
    """422: the object failed validation; :attr:`causes` names the fields."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(status, reason, message, body)
        details = (body or {}).get("details") or {}
        self.causes: list[Cause] = [
            Cause(str(c.get("field", "")), str(c.get("reason", "")), str(c.get("message", "")))
            for c in details.get("causes") or []
        ]


class Forbidden(ApiError):
    """403: RBAC or an admission plugin refused the request."""


class Unauthorized(ApiError):
    """401: the credentials were not accepted."""


class TooManyRequests(ApiError):
    """429: the server asks us to back off."""


class ServerError(ApiError):
    """5xx: the server failed; usually worth retrying."""


class ApiUnavailable(ApiError):
    """The API server could not be reached (connection refused, TLS failure, timeout)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Unavailable", message)


def error_from_response(status: int, text: str) -> ApiError:
    """Build the most specific :class:`ApiError` for an HTTP status and body text.

    Args:
        status: HTTP status code.
        text: The response body; a Kubernetes ``Status`` object when the server produced it.

    Returns:
        The exception to raise.
    """
    body: dict[str, Any] = {}
    try:
        parsed = json.loads(text) if text else {}
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or text or "")
    cls: type[ApiError]
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status == 410:
        cls = Gone
    elif status == 422:
        cls = Invalid
    elif status == 403:
        cls = Forbidden
    elif status == 401:
        cls = Unauthorized
    elif status == 429:
        cls = TooManyRequests
    elif status >= 500:
        cls = ServerError
    else:
        cls = ApiError
    return cls(status, reason or cls.__name__, message, body)
