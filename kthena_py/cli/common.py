"""Shared pieces of the command line."""

from __future__ import annotations


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, exit status 1."""


def positive_int(value: str) -> int:
    """An argparse type: an integer >= 1."""
    import argparse

    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {n}")
    return n
