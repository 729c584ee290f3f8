"""The Kubernetes access layer: the only package that talks to kubernetes-asyncio."""

from .api import KubeApi, WatchApi
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
