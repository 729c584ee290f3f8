"""The Kubernetes access layer: the only package that talks to kubernetes-asyncio.

The client and the seam's Protocols (which name the client's types) load on first use, so what needs only the
errors, objects, resource types or the in-memory store (:mod:`.memory`) never imports the HTTP libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    AlreadyExists,
    ApiError,
    ApiUnavailable,
    Cause,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
)
from .objects import KubeObject
from .resources import ResourceType

if TYPE_CHECKING:
    from .api import KubeApi, WatchApi
    from .client import ConfigError, KubeClient, ObjectList, PatchType, WatchEvent

_LATE = {
    "KubeApi": "api",
    "WatchApi": "api",
    "ConfigError": "client",
    "KubeClient": "client",
    "ObjectList": "client",
    "PatchType": "client",
    "WatchEvent": "client",
}


def __getattr__(name: str) -> Any:
    module = _LATE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = [
    "AlreadyExists",
    "ApiError",
    "ApiUnavailable",
    "Cause",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeApi",
    "KubeClient",
    "KubeObject",
    "NotFound",
    "ObjectList",
    "PatchType",
    "ResourceType",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "WatchApi",
    "WatchEvent",
]
