"""Which controllers a manager runs: the ``--controllers`` list, read as Kthena reads it.

Guarantees (Kthena's ``kthena-controller-manager --controllers``, a string list, default ``["*"]``):

* The known names are :data:`CONTROLLERS`: ``modelserving`` (with the eviction budget reconciler),
  ``modelbooster``, ``autoscaler``, ``modelcache`` and ``modelpool`` (ours: Kthena has no such controllers).
* ``foo`` or ``+foo`` enables ``foo``, ``-foo`` disables it, ``*`` enables every controller the list does not
  disable. A name listed both ways is enabled (Kthena's documented rule; its code lets the first mention
  win). Entries are trimmed; empty entries are ignored.
* An empty list enables every controller. A list that enables none (``-autoscaler`` alone, say) enables
  every controller too, with :attr:`Selection.none_enabled` set so that the caller warns, as Kthena does.
* An unknown name is an error (:class:`ValueError` naming it; Kthena ignores it): a typo must not silently
  leave a controller off.

Pure: no I/O, no imports of the controllers themselves, so the CLI can check the flag before loading them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MODELSERVING = "modelserving"
MODELBOOSTER = "modelbooster"
AUTOSCALER = "autoscaler"
MODELCACHE = "modelcache"
MODELPOOL = "modelpool"
CONTROLLERS: tuple[str, ...] = (MODELSERVING, MODELBOOSTER, AUTOSCALER, MODELCACHE, MODELPOOL)
"""Every controller name ``--controllers`` knows, in registration order."""
ALL = "*"


@dataclass(frozen=True)
class Selection:
    """The outcome of :func:`parse_controllers`.

    Attributes:
        enabled: The controllers to run, in :data:`CONTROLLERS` order (never empty).
        disabled: The controllers the list leaves off, in the same order.
        none_enabled: The list enabled no controller, so every controller is enabled (warn about it).
    """

    enabled: tuple[str, ...]
    disabled: tuple[str, ...]
    none_enabled: bool = False


def parse_controllers(entries: Iterable[str]) -> Selection:
    """Read a ``--controllers`` list (already split at commas).

    Raises:
        ValueError: An entry names no known controller (one line, naming it and the known names).
    """
    items = [e.strip() for e in entries]
    items = [e for e in items if e]
    for item in items:
        name = item[1:] if item[0] in "+-" else item
        if item != ALL and name not in CONTROLLERS:
            known = ", ".join(CONTROLLERS)
            raise ValueError(f"unknown controller {item!r} in --controllers (known: {known}, or '*' for all)")
    if not items:
        return Selection(enabled=CONTROLLERS, disabled=())
    star = ALL in items
    enabled = tuple(
        name for name in CONTROLLERS if name in items or f"+{name}" in items or (star and f"-{name}" not in items)
    )
    if not enabled:
        return Selection(enabled=CONTROLLERS, disabled=(), none_enabled=True)
    return Selection(enabled=enabled, disabled=tuple(n for n in CONTROLLERS if n not in enabled))
