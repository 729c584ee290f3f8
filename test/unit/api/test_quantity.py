from __future__ import annotations

import json
from decimal import Decimal

import pytest
from pydantic import BaseModel, ValidationError

from kthena_py.api import Quantity, QuantityError, QuantityFormat, canonical_quantity, format_quantity, parse_quantity
from kthena_py.api.quantity import ERR_FORMAT_WRONG, ERR_SUFFIX


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("90Gi", Decimal(96636764160)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1e+3", Decimal(1000)),
        ("1e-3", Decimal("0.001")),
        ("1.5Gi", Decimal(1610612736)),
        ("100Ki", Decimal(102400)),
        ("1Ei", Decimal(2**60)),
        ("2E", Decimal(2 * 10**18)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("250u", Decimal("0.00025")),
        ("3n", Decimal("0.000000003")),
        ("0.5", Decimal("0.5")),
        (".5", Decimal("0.5")),
        ("-1.5", Decimal("-1.5")),
        ("+7", Decimal(7)),
        ("0", Decimal(0)),
        ("00", Decimal(0)),
        ("1.", Decimal(1)),
        ("1.G", Decimal(10**9)),
        # apimachinery quirks: a bare sign or dot is zero
        ("+", Decimal(0)),
        ("-", Decimal(0)),
        (".", Decimal(0)),
        # rounding away from zero to the next nano
        ("0.0000000001", Decimal("0.000000001")),
        ("1e-10", Decimal("0.000000001")),
        ("-0.5n", Decimal("-0.000000001")),
        # DecimalSI/BinarySI are capped at 2**63-1 on the slow path only
        ("99999999999999999999", Decimal(2**63 - 1)),
        ("16Ei", Decimal(2**63 - 1)),
        ("1e20", Decimal(10**20)),
        (" 1Gi ", Decimal(2**30)),
        (12, Decimal(12)),
        (1.5, Decimal("1.5")),
    ],
)
def test_parse_quantity(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", ERR_FORMAT_WRONG),
        ("abc", ERR_FORMAT_WRONG),
        ("1 Gi", ERR_FORMAT_WRONG),
        ("1.2.3", ERR_FORMAT_WRONG),
        ("1e3e", ERR_FORMAT_WRONG),
        ("64GB", ERR_FORMAT_WRONG),
        ("--1", ERR_SUFFIX),  # "-1" is read as a suffix
        ("1K", ERR_SUFFIX),
        ("1e", ERR_SUFFIX),
        ("1i", ERR_SUFFIX),
        ("1ee3", ERR_SUFFIX),
        ("1Mi3", ERR_SUFFIX),
        ("1E99999999999999999999", ERR_SUFFIX),
        ("\u0661", ERR_FORMAT_WRONG),  # ARABIC-INDIC DIGIT ONE: non-ASCII digits are not digits for Go
    ],
)
def test_parse_quantity_rejects(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert str(info.value) == message


@pytest.mark.parametrize("value", [float("inf"), float("nan"), True])
def test_parse_quantity_rejects_non_finite_and_bool(value: float) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("500m", "500m"),
        ("1000m", "1"),
        ("1500m", "1500m"),
        ("1.5", "1500m"),
        ("0.1", "100m"),
        ("1.5Gi", "1536Mi"),
        ("2048Ki", "2Mi"),
        ("1024", "1024"),
        ("1Ki", "1Ki"),
        ("512Ki", "512Ki"),
        ("0.5Ki", "512"),
        ("1e3", "1e3"),
        ("1e2", "100"),
        ("1e-7", "100e-9"),
        ("1e-10", "1e-9"),
        ("12000", "12k"),
        ("0Gi", "0"),
        ("-2048Ki", "-2Mi"),
        ("+1", "+1"),
        ("01", "01"),
        ("1.G", "1.G"),
        ("10E", "10E"),
        ("99999999999999999999", "9223372036854775807"),
    ],
)
def test_canonical_quantity(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical
    assert Quantity(text).canonical() == canonical
    assert parse_quantity(canonical) == parse_quantity(text)


@pytest.mark.parametrize(
    ("value", "fmt", "text"),
    [
        (Decimal("0.25"), QuantityFormat.DECIMAL_SI, "250m"),
        (Decimal(3 * 2**30), QuantityFormat.BINARY_SI, "3Gi"),
        (Decimal(1000), QuantityFormat.BINARY_SI, "1k"),
        (0, QuantityFormat.DECIMAL_SI, "0"),
        (Decimal("0.0000000001"), QuantityFormat.DECIMAL_SI, "1n"),
        (Decimal(10**21), QuantityFormat.DECIMAL_EXPONENT, "1e21"),
        (Decimal("-1.5"), QuantityFormat.DECIMAL_SI, "-1500m"),
    ],
)
def test_format_quantity(value: Decimal, fmt: QuantityFormat, text: str) -> None:
    assert format_quantity(value, fmt) == text


def test_quantity_value_semantics() -> None:
    assert Quantity("1") == Quantity("1000m")
    assert hash(Quantity("1Ki")) == hash(Quantity(1024))
    assert Quantity("500m") < Quantity("1") <= Quantity("1")
    assert sorted([Quantity("1Gi"), Quantity("1G"), Quantity("1Mi")]) == [
        Quantity("1Mi"),
        Quantity("1G"),
        Quantity("1Gi"),
    ]
    assert Quantity("1.5").ceil() == 2
    assert Quantity("-1.5").ceil() == -2
    assert Quantity("1.0001").milli_value() == 1001
    assert Quantity("9223372036854775807").milli_value() == 9223372036854775807000
    assert str(Quantity("1.5Gi")) == "1536Mi"
    assert repr(Quantity(3)) == "Quantity(3)"
    decoded = json.loads('{"cpu": 1.5}')  # a float reaches the constructor only as untyped decoded JSON
    with pytest.raises(QuantityError) as rejected:
        Quantity(decoded["cpu"])
    assert str(rejected.value) == ERR_FORMAT_WRONG


class _Holder(BaseModel):
    q: Quantity


@pytest.mark.parametrize("raw", ["500m", "1.5Gi", 12, "+1", " 1 "])
def test_quantity_pydantic_roundtrip_keeps_original(raw: str | int) -> None:
    holder = _Holder.model_validate({"q": raw})
    assert holder.model_dump(mode="json") == {"q": raw}
    assert holder.model_dump() == {"q": raw}
    assert holder.q.value == parse_quantity(raw)


@pytest.mark.parametrize("raw", [0.5, True, None, [1], "1 Gi"])
def test_quantity_pydantic_rejects(raw: object) -> None:
    with pytest.raises(ValidationError):
        _Holder.model_validate({"q": raw})
