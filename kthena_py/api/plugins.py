"""Names of the built-in ModelServing plugins, for validation.

Guarantees: :data:`BUILTIN_PLUGINS` equals the registry of the pod planner
(:data:`kthena_py.plan.modelserving.core.plugins.KNOWN_PLUGINS`; a unit test keeps the two equal), so
admission rejects exactly the plugins the controller could not run.
"""

from __future__ import annotations

BUILTIN_PLUGINS: frozenset[str] = frozenset(
    {"demo-pod-tweaks", "pod-tweaks", "host-network-ports", "lws-standard-labels"}
)
