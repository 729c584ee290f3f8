"""What ``kthena-py status`` shows of a ModelServing, as pure functions: build the tree, render it.

:mod:`.model` is the typed tree (ModelServing -> ServingGroups -> role instances -> pods, each with the reason it is
not running); :mod:`.build` builds it from the objects a client read (no I/O, no clock: ``now`` is passed in);
:mod:`.render` writes it as a text tree (colour optional) or JSON. The command line only reads and prints.
"""

from .build import build_view, queue_position, scheduling_kind
from .model import ConditionView, GroupView, InstanceView, PodView, StatusView, Why
from .render import format_age, not_resident_words, render_json, render_text, status_document

__all__ = [
    "ConditionView",
    "GroupView",
    "InstanceView",
    "PodView",
    "StatusView",
    "Why",
    "build_view",
    "format_age",
    "not_resident_words",
    "queue_position",
    "render_json",
    "render_text",
    "scheduling_kind",
    "status_document",
]
