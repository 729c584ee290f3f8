"""The ``AdaptersLoaded`` condition of a ModelServing: on how many Ready entry pods its adapter set is loaded.

Guarantees (pure: the clock is an argument):

* ``True``/``AllLoaded`` when every Ready entry pod has every adapter loaded (and there is at least one such pod);
  ``False``/``AdapterLoadFailed`` when a load failed on a pod and is waiting for its retry (the message names the
  pods, adapters and the engine's message, the first few of each); ``False``/``NoReadyPods`` when no entry pod is
  Ready; ``False``/``Loading`` otherwise.
* The message always starts with ``adapters loaded on N/M pods`` (M = Ready entry pods).
* ``lastTransitionTime`` moves only when the status changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kthena_py.vocab.conditions import (
    ADAPTERS_LOADED,
    REASON_ADAPTER_LOAD_FAILED,
    REASON_ADAPTERS_LOADED,
    REASON_ADAPTERS_LOADING,
    REASON_NO_READY_PODS,
)
from kthena_py.vocab.times import format_time

__all__ = ["PodOutcome", "adapters_condition", "summary_message"]

_NAMED = 3
"""How many failing pods the message names (then ``and N more``)."""


@dataclass(frozen=True)
class PodOutcome:
    """One entry pod after a pass: Ready or not, the adapters it still misses, and the failures it holds."""

    pod: str
    ready: bool
    missing: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    """Adapter name -> the engine's (or the connection's) message of its last failed load."""


def summary_message(outcomes: Sequence[PodOutcome]) -> tuple[bool, str, str]:
    """(all loaded, reason, message) of a pass (see the module docstring)."""
    ready = [o for o in outcomes if o.ready]
    done = [o for o in ready if not o.missing]
    head = f"adapters loaded on {len(done)}/{len(ready)} pods"
    if not ready:
        return False, REASON_NO_READY_PODS, f"{head}: no entry pod is Ready"
    failing = [o for o in ready if o.failed]
    if failing:
        named = [
            f"{o.pod}: {name}: {message}" for o in failing[:_NAMED] for name, message in sorted(o.failed.items())[:1]
        ]
        more = f"; and {len(failing) - _NAMED} more pods" if len(failing) > _NAMED else ""
        return False, REASON_ADAPTER_LOAD_FAILED, f"{head}; load failed on {'; '.join(named)}{more}"
    if len(done) == len(ready):
        return True, REASON_ADAPTERS_LOADED, head
    pending = sorted({name for o in ready for name in o.missing})
    return False, REASON_ADAPTERS_LOADING, f"{head}; loading {', '.join(pending)}"


def adapters_condition(
    outcomes: Sequence[PodOutcome], previous: Mapping[str, Any] | None, generation: int, now: float
) -> dict[str, Any]:
    """The condition to hold after a pass; ``previous`` is the current one (a status condition dict) if any."""
    ok, reason, message = summary_message(outcomes)
    status = "True" if ok else "False"
    since = (
        str(previous.get("lastTransitionTime"))
        if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime")
        else format_time(now)
    )
    return {
        "type": ADAPTERS_LOADED,
        "status": status,
        "reason": reason,
        "message": message[:32768],
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
