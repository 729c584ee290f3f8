"""The ModelBooster expander: pure functions from a ModelBooster to its ModelServing, ModelServer and ModelRoute.

A thin expander, one concern per module:

* :mod:`~.naming`: names, the five ``workload.serving.volcano.sh/*`` labels, owner references, annotations;
* :mod:`~.storage`: the cache volume, model path and downloader init container;
* :mod:`~.engine`: engine port, ``backend.env`` knobs, engine env and command line;
* :mod:`~.modelserving`: the ``vLLM`` and ``vLLMDisaggregated`` ModelServing templates;
* :mod:`~.networking`: the ModelServer and ModelRoute;
* :mod:`~.expand`: :func:`expand`, used by the controller and by ``kthena-py render``;
* :mod:`~.children`: what to write so the cluster matches the expansion (the update policy);
* :mod:`~.status`: the booster's conditions.

Nothing here does I/O or reads a clock.
"""

from .children import ChildPlan, Observed, Remove, Write, plan_children
from .errors import ExpandError
from .expand import SUPPORTED_BACKEND_TYPES, Children, expand, unsupported_backend_type
from .status import booster_status
from .types import DEFAULT_DOWNLOADER_IMAGE, DEFAULT_RUNTIME_IMAGE, Images

__all__ = [
    "DEFAULT_DOWNLOADER_IMAGE",
    "DEFAULT_RUNTIME_IMAGE",
    "SUPPORTED_BACKEND_TYPES",
    "ChildPlan",
    "Children",
    "ExpandError",
    "Images",
    "Observed",
    "Remove",
    "Write",
    "booster_status",
    "expand",
    "plan_children",
    "unsupported_backend_type",
]
