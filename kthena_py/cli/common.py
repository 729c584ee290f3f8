"""Shared pieces of the command line."""

from __future__ import annotations


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, exit status 1."""
