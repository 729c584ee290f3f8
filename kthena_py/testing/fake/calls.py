"""A call to FakeKube as interceptors see it and tests read it back.

Guarantees: every call FakeKube answers is one :class:`Call`, recorded in order before anything is decided; an
interceptor sees the same object, so a body it replaces is what the fake then acts on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from kthena_py.kube.resources import ResourceType

__all__ = ["Call", "Interceptor", "Verb"]

Verb = Literal["get", "list", "create", "replace", "patch", "delete", "watch"]


@dataclass
class Call:
    """One call to the fake, as the interceptors see it and :attr:`FakeKube.calls` records it.

    Attributes:
        verb: What was asked (``apply`` is a ``patch`` with ``patch_type == "apply"``).
        rt: The resource type.
        name: The object's name (``""`` for lists and watches).
        namespace: The namespace (``None``: cluster-scoped or all namespaces).
        subresource: ``status``, ``scale`` or ``None``.
        body: The request body; an interceptor may replace it.
        options: The call's other arguments (patch type, field manager, selectors, preconditions).
    """

    verb: Verb
    rt: ResourceType
    name: str = ""
    namespace: str | None = None
    subresource: str | None = None
    body: Any = None
    options: dict[str, Any] = field(default_factory=dict)


Interceptor = Callable[[Call], Any]
"""Called before each call: raise to fail it, change ``call.body``, or return an answer (not ``None``) to skip the
store. A coroutine function is awaited first (a slow or stuck API server: sleep, or wait on an event)."""
