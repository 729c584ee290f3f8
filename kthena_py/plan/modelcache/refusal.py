"""The status of a cache whose download Job the API server refused to create (pure).

When a create is refused (quota, admission), the apply layer re-raises so the engine backs off, and writes the
planned status adjusted by :func:`refused_status` first, so the reason is visible in the object, not only in an
Event.

Guarantees:

* Only the ``Progressing`` condition changes: False, reason ``FailedCreate``, the refusal's message (naming the
  object and the API server's answer). ``Ready``, ``Degraded``, the phase and every other field stay as planned.
* ``lastTransitionTime`` is kept when the stored ``Progressing`` was already False (a refusal repeated on every
  retry is not a new transition), so a repeated identical refusal plans an identical status (no write).
* The next successful reconcile plans its status from scratch, which replaces the condition.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kthena_py.vocab.conditions import PROGRESSING, REASON_FAILED_CREATE
from kthena_py.vocab.times import format_time

__all__ = ["refused_status"]


def refused_status(planned: Mapping[str, Any], stored: Mapping[str, Any], message: str, now: float) -> dict[str, Any]:
    """``planned`` with ``Progressing`` False/``FailedCreate``/``message``; ``stored`` is the status written before."""
    status = copy.deepcopy(dict(planned))
    before = next((c for c in stored.get("conditions") or [] if c.get("type") == PROGRESSING), None)
    since = str(before["lastTransitionTime"]) if before and before.get("status") == "False" else format_time(now)
    conditions = list(status.get("conditions") or [])
    for index, condition in enumerate(conditions):
        if condition.get("type") == PROGRESSING:
            conditions[index] = {
                **condition,
                "status": "False",
                "lastTransitionTime": since,
                "reason": REASON_FAILED_CREATE,
                "message": message,
            }
            break
    else:  # cache_status always plans one; kept total for any planned status
        conditions.append(
            {
                "type": PROGRESSING,
                "status": "False",
                "observedGeneration": status.get("observedGeneration"),
                "lastTransitionTime": since,
                "reason": REASON_FAILED_CREATE,
                "message": message,
            }
        )
    status["conditions"] = conditions
    return status
