"""Small helpers shared by the API tests."""

from __future__ import annotations

from typing import Any


def contains(defaulted: Any, original: Any) -> bool:
    """Whether ``defaulted`` equals ``original`` plus (only) added keys, recursively."""
    if isinstance(original, dict):
        return isinstance(defaulted, dict) and all(
            key in defaulted and contains(defaulted[key], value) for key, value in original.items()
        )
    if isinstance(original, list):
        return (
            isinstance(defaulted, list)
            and len(defaulted) == len(original)
            and all(contains(item, value) for item, value in zip(defaulted, original, strict=True))
        )
    return type(defaulted) is type(original) and bool(defaulted == original)
