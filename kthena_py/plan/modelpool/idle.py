"""The idle check of a resident member, failing closed.

Guarantees:

* A member's verdict comes from its Ready entry pods: each pod's probe is the sum of the configured engine gauges
  (running + waiting requests by default) or the text of why it could not be read.
* ``busy`` when any pod reports a sum above zero; else ``failed`` when any probe failed (a pod that could not be
  read is never taken as idle); else ``idle`` — including a member with no Ready entry pod, which serves nothing.
* NaN or a negative sum is a failed probe, not a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["BUSY", "FAILED", "IDLE", "IdleResult", "Verdict", "member_verdict"]

Verdict = Literal["idle", "busy", "failed"]
IDLE: Verdict = "idle"
BUSY: Verdict = "busy"
FAILED: Verdict = "failed"


@dataclass(frozen=True)
class IdleResult:
    """A member's idle-check verdict and a one-line detail for conditions and Events."""

    verdict: Verdict
    detail: str = ""


def member_verdict(probes: Mapping[str, float | str]) -> IdleResult:
    """The verdict of one member from its pods' probes (pod name -> load, or the error text)."""
    busy = {pod: load for pod, load in probes.items() if isinstance(load, float | int) and load > 0}
    failed = {
        pod: (load if isinstance(load, str) else f"unusable value {load}")
        for pod, load in probes.items()
        if isinstance(load, str) or math.isnan(load) or load < 0
    }
    if busy:
        total = sum(busy.values())
        pods = ", ".join(sorted(busy))
        return IdleResult(BUSY, f"{total:g} requests running or waiting on {pods}")
    if failed:
        pod = min(failed)
        more = f" (and {len(failed) - 1} more pods)" if len(failed) > 1 else ""
        return IdleResult(FAILED, f"pod {pod}: {failed[pod]}{more}")
    if not probes:
        return IdleResult(IDLE, "no Ready entry pod")
    return IdleResult(IDLE, f"0 requests on {len(probes)} Ready entry pods")
