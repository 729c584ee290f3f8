"""RFC 3339 timestamps as Kubernetes writes them (``metav1.Time``, ``metav1.MicroTime``) and epoch seconds.

Guarantees:

* :func:`format_time` renders UTC with a ``Z`` suffix at the precision asked for (seconds truncate the
  fraction, like ``metav1.Time``). At second precision the last second rendered is kept (one entry, no clock
  read): a burst of conditions and Events stamped in the same second renders it once.
* :func:`parse_time` is total: anything that is not an RFC 3339 timestamp with a zone (``Z``, ``z`` or an
  offset; a fraction of any length) is ``None``; it never raises.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["Precision", "format_time", "parse_time"]

Precision = Literal["seconds", "milliseconds", "microseconds"]
_FRACTION = re.compile(r"\.(\d+)")
_LAST_SECOND: tuple[int | None, str] = (None, "")
"""The last whole second :func:`format_time` rendered at second precision, and its text."""


def format_time(seconds: float, precision: Precision = "seconds") -> str:
    """Render epoch seconds as an RFC 3339 UTC timestamp.

    Args:
        seconds: Epoch seconds.
        precision: ``seconds`` (``2024-01-02T03:04:05Z``), ``milliseconds`` (``...05.678Z``) or
            ``microseconds`` (``...05.678901Z``).

    Returns:
        The timestamp.
    """
    global _LAST_SECOND
    if precision == "seconds":
        whole = int(seconds)
        last = _LAST_SECOND
        if last[0] == whole:
            return last[1]
        text = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _LAST_SECOND = (whole, text)
        return text
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec=precision).replace("+00:00", "Z")


def parse_time(value: Any) -> float | None:
    """Parse an RFC 3339 timestamp into epoch seconds (``None`` when absent, malformed or without a zone)."""
    if not isinstance(value, str) or not value:
        return None
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), value, count=1)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None
