r"""Kubernetes ``metav1.Duration``: Go duration strings and a lossless pydantic type.

Guarantees:

* :func:`parse_duration` accepts exactly Go's ``time.ParseDuration`` grammar
  (``[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`` with units ns, us, µs, μs, ms, s, m, h, or the bare ``"0"``) and
  returns integer nanoseconds, truncating sub-nanosecond fractions toward zero as Go does.
* Errors carry Go's messages (``time: invalid duration "x"``, ``time: missing unit in duration "1"``,
  ``time: unknown unit "d" in duration "1d"``).
* The :class:`Duration` pydantic type keeps the original string, so a model dump reproduces its input.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

__all__ = ["Duration", "DurationError", "parse_duration"]

_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DIGITS = "0123456789"
_MAX_NS = 2**63 - 1


class DurationError(ValueError):
    """Raised for strings that Go's ``time.ParseDuration`` rejects; the message is Go's."""


def _digits(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _DIGITS:
        pos += 1
    return pos


def parse_duration(text: str) -> int:
    """Parse a Go duration string.

    Args:
        text: E.g. ``"15s"``, ``"1m30s"``, ``"1.5h"``, ``"-2ms"`` or ``"0"``.

    Returns:
        The duration in nanoseconds.

    Raises:
        DurationError: If ``text`` is not a Go duration or overflows int64 nanoseconds.
    """
    quoted = '"' + text + '"'
    rest = text
    negative = False
    if rest[:1] in ("+", "-"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise DurationError(f"time: invalid duration {quoted}")
    total = 0
    pos = 0
    while pos < len(rest):
        if rest[pos] not in _DIGITS and rest[pos] != ".":
            raise DurationError(f"time: invalid duration {quoted}")
        int_end = _digits(rest, pos)
        whole = rest[pos:int_end]
        frac = ""
        end = int_end
        if end < len(rest) and rest[end] == ".":
            frac_end = _digits(rest, end + 1)
            frac = rest[end + 1 : frac_end]
            end = frac_end
        if not whole and not frac:
            raise DurationError(f"time: invalid duration {quoted}")
        unit_end = end
        while unit_end < len(rest) and rest[unit_end] != "." and rest[unit_end] not in _DIGITS:
            unit_end += 1
        unit = rest[end:unit_end]
        if not unit:
            raise DurationError(f"time: missing unit in duration {quoted}")
        if unit not in _UNITS:
            raise DurationError(f'time: unknown unit "{unit}" in duration {quoted}')
        amount = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
        total += int(amount * _UNITS[unit])  # Go truncates each component's fraction
        if total > _MAX_NS + (1 if negative else 0):
            raise DurationError(f"time: invalid duration {quoted}")
        pos = unit_end
    return -total if negative else total


class Duration:
    """A Go duration string that remembers its original text.

    Equality and hashing use the parsed length, so ``Duration("60s") == Duration("1m")``.

    Attributes:
        raw: The original string.
        nanoseconds: The parsed duration.
    """

    __slots__ = ("nanoseconds", "raw")

    raw: str
    nanoseconds: int

    def __init__(self, raw: str) -> None:
        """Parse ``raw``.

        Args:
            raw: A Go duration string.

        Raises:
            DurationError: If ``raw`` is not a Go duration.
        """
        self.raw = raw
        self.nanoseconds = parse_duration(raw)

    @property
    def seconds(self) -> float:
        """The duration in seconds (Go's ``Duration.Seconds()``)."""
        return self.nanoseconds / 1e9

    @property
    def minutes(self) -> float:
        """The duration in minutes (Go's ``Duration.Minutes()``)."""
        return self.nanoseconds / 6e10

    def __str__(self) -> str:
        return self.raw

    def __repr__(self) -> str:
        return f"Duration({self.raw!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self.nanoseconds == other.nanoseconds
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.nanoseconds)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validate_duration,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda d: d.raw, when_used="always"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string"}


def _validate_duration(value: Any) -> Duration:
    if isinstance(value, Duration):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("k8s_type", "must be of type string", {"expected": "string"})
    try:
        return Duration(value)
    except DurationError as exc:
        raise PydanticCustomError("k8s_invalid", "{detail}", {"detail": str(exc)}) from exc
