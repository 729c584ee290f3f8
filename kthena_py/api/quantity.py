"""Kubernetes ``resource.Quantity``: parsing, canonical formatting and a pydantic type.

Guarantees:

* :func:`parse_quantity` accepts exactly the strings that apimachinery's ``ParseQuantity`` accepts
  (including its quirks: ``"+"``, ``"."`` and ``"1.G"`` parse, ``"1K"`` and ``"1e"`` do not) and returns
  the value apimachinery stores, as an exact :class:`~decimal.Decimal`: non-zero values are rounded *away from
  zero* to the next nano (1e-9) and ``DecimalSI``/``BinarySI`` values are capped at ``2**63 - 1``.
* :meth:`Quantity.canonical` (and :func:`canonical_quantity`) returns what ``Quantity.String()`` returns after
  a JSON round trip through the API server, including the cases where apimachinery keeps the input string
  verbatim (``"100m"``, ``"+1"``, ``"01"``).
* No float arithmetic is used anywhere: values are built from integer mantissas and decimal exponents.
* The :class:`Quantity` pydantic type keeps the original JSON value (``str`` or ``int``) so that a model dump
  reproduces its input byte for byte, and exposes the numeric value as :attr:`Quantity.value`.

Deliberate differences from apimachinery: cases where Go's ``inf.Dec.SetString`` would reject the numeric part
(``ErrNumeric``) after the grammar accepted it are parsed arithmetically instead; no such string is known to
reach that branch.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_UP, Context, Decimal
from enum import StrEnum
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

__all__ = [
    "ERR_FORMAT_WRONG",
    "ERR_NUMERIC",
    "ERR_SUFFIX",
    "MAX_QUANTITY",
    "Quantity",
    "QuantityError",
    "QuantityFormat",
    "canonical_quantity",
    "format_quantity",
    "parse_quantity",
]

#: apimachinery's ``ErrFormatWrong`` message.
ERR_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
#: apimachinery's ``ErrSuffix`` message.
ERR_SUFFIX = "unable to parse quantity's suffix"
#: apimachinery's ``ErrNumeric`` message.
ERR_NUMERIC = "unable to parse numeric part of quantity"
#: Values in ``DecimalSI`` and ``BinarySI`` format are capped here (``maxAllowed`` in apimachinery).
MAX_QUANTITY = 2**63 - 1

_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_BY_POWER = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}
_NANO = -9
_INT64_MIN = -(2**63)
# Exact arithmetic: a context that never rounds (only scaling and multiplication are used with it).
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


class QuantityError(ValueError):
    """Raised for strings that are not Kubernetes quantities; the message is apimachinery's."""


class QuantityFormat(StrEnum):
    """The serialization format apimachinery remembers for a parsed quantity."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


@dataclass(frozen=True, slots=True)
class _Parsed:
    value: Decimal
    fmt: QuantityFormat
    cached: str | None


def _split(text: str) -> tuple[bool, str, str, str]:
    """Split a quantity into (positive, numerator, denominator, suffix) like ``parseQuantityString``."""
    end = len(text)
    pos = 0
    positive = True
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(ERR_FORMAT_WRONG)
    return positive, num, denom, text[suffix_start:]


def _parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``; ``None`` on error."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not set(body) <= _DIGITS:
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= MAX_QUANTITY else None


def _interpret(suffix: str) -> tuple[int, int, QuantityFormat]:
    """Return (base, exponent, format) for a suffix, like apimachinery's ``suffixHandler.interpret``."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        parsed = _parse_int64(suffix[1:])
        if parsed is not None:
            # Go truncates the exponent to int32.
            return 10, (parsed + 2**31) % 2**32 - 2**31, QuantityFormat.DECIMAL_EXPONENT
    raise QuantityError(ERR_SUFFIX)


def _decimal(sign_positive: bool, mantissa: int, exponent: int) -> Decimal:
    """Build ``±mantissa * 10**exponent`` exactly (no context rounding), in plain notation when small."""
    if not mantissa:
        return Decimal(0)
    while exponent < 0 and mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    if 0 <= exponent <= 64:
        mantissa, exponent = mantissa * 10**exponent, 0
    return Decimal(f"{'' if sign_positive else '-'}{mantissa}E{exponent}")


def _fast_path(text: str, positive: bool, num: str, denom: str, exponent: int, fmt: QuantityFormat) -> _Parsed | None:
    """The int64 fast path of ``ParseQuantity``; it is also where apimachinery caches the input string."""
    if fmt is QuantityFormat.BINARY_SI:
        if exponent < 0 or denom:
            return None
        multiplier = 1 << exponent
        precision = 15 - len(num) - exponent * 3 // 10 - 1
        scale = 0
    else:
        multiplier = 1
        precision = 18 - (len(num) + len(denom))
        scale = exponent
    if precision < 0:
        return None
    scale -= len(denom)
    if scale < _NANO:
        return None
    shifted = num + denom
    value = int(shifted)
    result = value * multiplier
    if result > MAX_QUANTITY:
        return None
    cached: str | None = None
    if fmt is QuantityFormat.BINARY_SI:
        if exponent % 10 == 0 and value & 0x07:
            cached = text
    elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
        cached = text
    return _Parsed(_decimal(positive, result, scale), fmt, cached)


def _slow_path(positive: bool, num: str, denom: str, base: int, exponent: int, fmt: QuantityFormat) -> _Parsed:
    mantissa = int(num + denom)
    exp10 = -len(denom)
    if base == 10:
        exp10 += exponent
    else:
        mantissa <<= exponent
    if mantissa and exp10 < _NANO:
        # Round away from zero to the next nano: "if you want some resources, you should get some".
        drop = _NANO - exp10
        mantissa = 1 if drop > len(str(mantissa)) else -(-mantissa // 10**drop)
        exp10 = _NANO
    if fmt is not QuantityFormat.DECIMAL_EXPONENT and _decimal(True, mantissa, exp10) > MAX_QUANTITY:
        mantissa, exp10 = MAX_QUANTITY, 0
    return _Parsed(_decimal(positive, mantissa, exp10), fmt, None)


def _to_text(value: str | int | float) -> str:
    if isinstance(value, bool):
        raise QuantityError(ERR_FORMAT_WRONG)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(ERR_FORMAT_WRONG)
        return repr(value)
    return value.strip()


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> _Parsed:
    if not text:
        raise QuantityError(ERR_FORMAT_WRONG)
    if text == "0":
        return _Parsed(Decimal(0), QuantityFormat.DECIMAL_SI, "0")
    positive, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)
    fast = _fast_path(text, positive, num, denom, exponent, fmt)
    return fast if fast is not None else _slow_path(positive, num, denom, base, exponent, fmt)


def _parse(value: str | int | float) -> _Parsed:
    return _parse_text(_to_text(value))


def parse_quantity(value: str | int | float | Quantity) -> Decimal:
    """Parse a Kubernetes quantity into its exact numeric value.

    Args:
        value: A quantity string (``"500m"``, ``"90Gi"``, ``"1e3"``), a JSON integer, a float (converted via
            its shortest ``repr``) or a :class:`Quantity`. Surrounding whitespace is ignored, as in
            ``Quantity.UnmarshalJSON``.

    Returns:
        The value apimachinery would store, e.g. ``Decimal("0.5")`` for ``"500m"``.

    Raises:
        QuantityError: If the value is not a valid quantity; the message is apimachinery's.
    """
    if isinstance(value, Quantity):
        return value.value
    return _parse(value).value


def canonical_quantity(value: str | int | float) -> str:
    """Return the string the API server would serialize for a quantity (``Quantity.String()``).

    Args:
        value: Anything :func:`parse_quantity` accepts.

    Returns:
        The canonical form, e.g. ``"1536Mi"`` for ``"1.5Gi"`` and ``"1"`` for ``"1000m"``.

    Raises:
        QuantityError: If the value is not a valid quantity.
    """
    parsed = _parse(value)
    return parsed.cached if parsed.cached is not None else _canonical(parsed.value, parsed.fmt)


def _canonical(value: Decimal, fmt: QuantityFormat) -> str:
    if value == 0:
        return "0"
    if fmt is QuantityFormat.BINARY_SI and (-1024 < value < 1024 or value != value.to_integral_value()):
        fmt = QuantityFormat.DECIMAL_SI
    sign = "-" if value < 0 else ""
    if fmt is QuantityFormat.BINARY_SI:
        amount, power = abs(int(value)), 0
        while amount >= 1024 and amount % 1024 == 0 and power < 6:
            amount //= 1024
            power += 1
        return f"{sign}{amount}{_BINARY_BY_POWER[power]}"
    digits_tuple = value.as_tuple()
    mantissa = int("".join(map(str, digits_tuple.digits)))
    exponent = int(digits_tuple.exponent)
    while mantissa >= 10 and mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt is QuantityFormat.DECIMAL_SI and exponent in _DECIMAL_BY_EXPONENT:
        return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
    return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")


def format_quantity(value: Decimal | int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> str:
    """Format a computed value as a canonical quantity string.

    ``DecimalSI`` and ``BinarySI`` values are first rounded away from zero to the next nano, as parsing does,
    so the result always parses back to the same value.

    Args:
        value: The exact value, e.g. a sum of container requests.
        fmt: The format to render in; ``BinarySI`` falls back to ``DecimalSI`` below 1024 or for fractions,
            like apimachinery.

    Returns:
        The canonical string, e.g. ``format_quantity(Decimal("0.25"))`` is ``"250m"``.
    """
    amount = Decimal(value)
    if fmt is not QuantityFormat.DECIMAL_EXPONENT:
        return _canonical(parse_quantity(format(amount, "f")), fmt)
    return _canonical(amount, fmt)


@functools.total_ordering
class Quantity:
    """A Kubernetes quantity that remembers its original JSON value.

    Equality, ordering and hashing use the numeric value (``Quantity("1") == Quantity("1000m")``), like
    apimachinery's ``Cmp``/semantic equality; serialization (:attr:`raw`) reproduces the input exactly.

    Attributes:
        raw: The original JSON value (``str`` or ``int``).
        value: The exact numeric value.
        format: The format apimachinery would keep for it.
    """

    __slots__ = ("_canonical", "format", "raw", "value")

    raw: str | int
    value: Decimal
    format: QuantityFormat

    def __init__(self, raw: str | int) -> None:
        """Parse ``raw``.

        Args:
            raw: A quantity string or integer.

        Raises:
            QuantityError: If ``raw`` is not a valid quantity (floats are rejected; see the module docstring).
        """
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise QuantityError(ERR_FORMAT_WRONG)
        parsed = _parse(raw)
        self.raw = raw
        self.value = parsed.value
        self.format = parsed.fmt
        self._canonical = parsed.cached

    def canonical(self) -> str:
        """Return the API server's serialization of this quantity (``Quantity.String()``)."""
        if self._canonical is None:
            self._canonical = _canonical(self.value, self.format)
        return self._canonical

    def ceil(self) -> int:
        """Return the value rounded away from zero to an integer, like ``Quantity.Value()``."""
        return int(self.value.to_integral_value(rounding=ROUND_UP))

    def milli_value(self) -> int:
        """Return ``value * 1000`` rounded away from zero, like ``Quantity.MilliValue()``."""
        return int(_EXACT.scaleb(self.value, 3).to_integral_value(rounding=ROUND_UP))

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.raw!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value < other.value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validate_quantity,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda q: q.raw, when_used="always"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def _validate_quantity(value: Any) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise PydanticCustomError("k8s_type", "must be of type integer or string", {"expected": "integer"})
    try:
        return Quantity(value)
    except QuantityError as exc:
        raise PydanticCustomError("k8s_invalid", "{detail}", {"detail": str(exc)}) from exc
