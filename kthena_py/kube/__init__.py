"""The Kubernetes access layer: the only package that talks to kubernetes-asyncio."""

from .client import ConfigError, KubeClient, ObjectList, PatchType, WatchEvent
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
    "KubeClient",
    "KubeObject",
    "NotFound",
    "ObjectList",
    "PatchType",
    "ResourceType",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "WatchEvent",
]
