"""When a forwarded request is tried again.

Guarantees: a retry happens only while nothing of the answer reached the client (not one byte), only after a
refused connection or an answer of 502 or 503, and only while the hold budget has time left for the wait before
it. The wait grows (0.05 s doubling up to 1 s) and never exceeds the time left.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["RETRY_STATUSES", "Failure", "retry_delay"]

Failure = Literal["refused", "status", "other"]
RETRY_STATUSES = frozenset({502, 503})
_FIRST = 0.05
_MAX = 1.0


def retry_delay(
    *, attempt: int, failure: Failure, status: int | None, first_byte_sent: bool, remaining: float
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or ``None`` not to retry.

    Args:
        attempt: Attempts made so far (1 after the first).
        failure: ``refused`` (no connection), ``status`` (an answer with ``status``), ``other`` (anything else).
        status: The upstream status for ``failure == "status"``.
        first_byte_sent: Whether any byte of the answer went to the client.
        remaining: Seconds left of the hold budget.
    """
    if first_byte_sent or remaining <= 0:
        return None
    if failure == "other" or (failure == "status" and status not in RETRY_STATUSES):
        return None
    delay = min(_MAX, _FIRST * (2 ** max(0, attempt - 1)))
    return delay if delay < remaining else None
