"""An in-memory cluster: objects with the API server's write semantics, synchronous and without I/O.

Guarantees: :class:`MemoryStore` is the one in-memory object store of the project (the semantics its module
lists); :mod:`.patches` and :mod:`.ssa` are the one merge, JSON and strategic merge patch and the one server-side
apply; :mod:`.selectors` the one label and field selector evaluation. The async test API server
(:mod:`kthena_py.testing.fake`) and the offline rollout simulation (:mod:`kthena_py.simulation`) both drive it.
Nothing here imports the Kubernetes client.
"""

from .store import Change, ChangeType, Listener, MemoryStore, PatchKind

__all__ = ["Change", "ChangeType", "Listener", "MemoryStore", "PatchKind"]
