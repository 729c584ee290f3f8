"""Kubernetes ``intstr.IntOrString`` and its percentage helpers.

Guarantees:

* :class:`IntOrString` holds either an ``int`` or a ``str`` (never a ``bool``) and serializes back to exactly
  that JSON value, so pydantic models round-trip losslessly.
* :meth:`IntOrString.scaled_value` is apimachinery's ``GetScaledValueFromIntOrPercent`` with the same errors,
  but computed with exact integer arithmetic instead of ``float64`` (identical for every value below 2**53).
* :func:`is_valid_percent` returns apimachinery's ``IsValidPercent`` messages verbatim.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

__all__ = [
    "IntOrString",
    "IntOrStringError",
    "go_atoi",
    "is_valid_percent",
    "regex_error",
    "resolve_scaled",
    "scaled_value",
]

_PERCENT_RE = re.compile(r"[0-9]+%")
_PERCENT_FMT = "[0-9]+%"
_PERCENT_ERR = "a valid percent string must be a numeric string followed by an ending '%'"
_INT64_MAX = 2**63 - 1


class IntOrStringError(ValueError):
    """Raised when an :class:`IntOrString` cannot be resolved to an integer."""


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """Build an apimachinery ``RegexError`` message (including its double space between examples).

    Args:
        message: The leading sentence.
        fmt: The regular expression used for validation.
        *examples: Valid examples.

    Returns:
        The message, e.g. ``"... (e.g. 'my-name',  or 'abc-123', regex used for validation is '...')"``.
    """
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    rendered = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {rendered}regex used for validation is '{fmt}')"


def is_valid_percent(value: str) -> list[str]:
    """Validate a percent string like apimachinery's ``IsValidPercent``.

    Args:
        value: The string to check, e.g. ``"10%"``.

    Returns:
        An empty list when valid, else one message.
    """
    if _PERCENT_RE.fullmatch(value) is None:
        return [regex_error(_PERCENT_ERR, _PERCENT_FMT, "1%", "93%")]
    return []


def go_atoi(text: str) -> int:
    """Parse an integer like Go's ``strconv.Atoi`` (optional sign, ASCII digits, int64 range).

    Args:
        text: The text to parse.

    Returns:
        The integer.

    Raises:
        IntOrStringError: With Go's message, e.g. ``strconv.Atoi: parsing "x": invalid syntax``.
    """
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or any(ch not in "0123456789" for ch in body):
        raise IntOrStringError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise IntOrStringError(f'strconv.Atoi: parsing "{text}": value out of range')
    return value


class IntOrString:
    """An integer or a string, as in Kubernetes (``"10%"`` is a percentage).

    Attributes:
        value: The wrapped ``int`` or ``str``.
    """

    __slots__ = ("value",)

    value: int | str

    def __init__(self, value: int | str) -> None:
        """Wrap ``value``.

        Args:
            value: An ``int`` or a ``str``.

        Raises:
            TypeError: For any other type, including ``bool``.
        """
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise TypeError(f"IntOrString needs an int or a str, not {type(value).__name__}")
        self.value = value

    @property
    def is_int(self) -> bool:
        """Whether the value is an integer."""
        return isinstance(self.value, int)

    @property
    def is_percent(self) -> bool:
        """Whether the value is a string ending in ``%`` (not necessarily a valid percentage)."""
        return isinstance(self.value, str) and self.value.endswith("%")

    def int_value(self) -> int:
        """Return the integer value like Go's ``IntValue()`` (a string is ``Atoi``-parsed, 0 on error)."""
        if isinstance(self.value, int):
            return self.value
        try:
            return go_atoi(self.value)
        except IntOrStringError:
            return 0

    def scaled_value(self, total: int, round_up: bool) -> int:
        """Resolve against ``total`` like ``GetScaledValueFromIntOrPercent``.

        Args:
            total: The count a percentage refers to.
            round_up: Round a percentage up (``True``) or down (``False``).

        Returns:
            The integer as is, or ``percent * total / 100`` rounded as requested.

        Raises:
            IntOrStringError: For strings that are not ``<int>%``, with apimachinery's message.
        """
        if isinstance(self.value, int):
            return self.value
        if not self.value.endswith("%"):
            raise IntOrStringError("invalid value for IntOrString: invalid type: string is not a percentage")
        try:
            percent = go_atoi(self.value[:-1])
        except IntOrStringError as exc:
            raise IntOrStringError(f'invalid value for IntOrString: invalid value "{self.value}": {exc}') from exc
        product = percent * total
        return -(-product // 100) if round_up else product // 100

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return f"IntOrString({self.value!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IntOrString):
            return type(self.value) is type(other.value) and self.value == other.value
        return NotImplemented

    def __hash__(self) -> int:
        return hash((type(self.value).__name__, self.value))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validate_int_or_string,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v.value, when_used="always"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def _validate_int_or_string(value: Any) -> IntOrString:
    if isinstance(value, IntOrString):
        return value
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PydanticCustomError("k8s_type", "must be of type integer or string", {"expected": "integer"})
    return IntOrString(value)


def scaled_value(value: IntOrString | int | str | None, total: int, round_up: bool) -> int:
    """Resolve an int-or-percent against ``total`` (``GetScaledValueFromIntOrPercent``).

    Args:
        value: The value; plain ``int``/``str`` are wrapped.
        total: The count a percentage refers to.
        round_up: Round a percentage up (``True``) or down (``False``).

    Returns:
        The resolved integer.

    Raises:
        IntOrStringError: If ``value`` is ``None`` or not an integer or ``<int>%``.
    """
    if value is None:
        raise IntOrStringError("nil value for IntOrString")
    wrapped = value if isinstance(value, IntOrString) else IntOrString(value)
    return wrapped.scaled_value(total, round_up)


def resolve_scaled(
    value: IntOrString | None,
    total: int,
    *,
    round_up: bool,
    if_none: int,
    if_invalid: int | None = None,
    non_negative: bool = False,
) -> int:
    """Resolve an optional int-or-percent against ``total``: the one resolver every caller shares.

    Callers differ only in their fallbacks, which they state here: the rolling-update budget falls back to its
    default for an absent or unreadable value and never goes below 0; an eviction threshold falls back to
    its default when absent and to ``total`` (protect everything) when unreadable; validation resolves an
    absent value as 0 and lets an unreadable one raise.

    Args:
        value: The value, or ``None`` when the field is absent.
        total: The count a percentage refers to.
        round_up: Round a percentage up (``True``) or down (``False``).
        if_none: The result for an absent value.
        if_invalid: The result for a string that is not ``<int>%``; ``None`` lets the error propagate.
        non_negative: Clamp a resolved value (not a fallback) at 0.

    Returns:
        The resolved integer.

    Raises:
        IntOrStringError: For an unreadable value when ``if_invalid`` is ``None``.
    """
    if value is None:
        return if_none
    try:
        resolved = value.scaled_value(total, round_up)
    except IntOrStringError:
        if if_invalid is None:
            raise
        return if_invalid
    return max(0, resolved) if non_negative else resolved
