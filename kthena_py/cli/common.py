"""Shared pieces of the command line."""

from __future__ import annotations


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, exit status 1."""


def positive_int(value: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_at_least(value, 1)


def non_negative_int(value: str) -> int:
    """An argparse type: an integer >= 0."""
    return _int_at_least(value, 0)


def _int_at_least(value: str, least: int) -> int:
    import argparse

    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < least:
        raise argparse.ArgumentTypeError(f"must be >= {least}: {n}")
    return n
