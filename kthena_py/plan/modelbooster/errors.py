"""The one error of the expander: a booster that cannot be expanded, with Kthena's message."""

from __future__ import annotations

__all__ = ["ExpandError"]


class ExpandError(ValueError):
    """The booster cannot be expanded; ``str(error)`` is the message Kthena's controller reports."""
