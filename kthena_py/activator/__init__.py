"""The activator: an OpenAI-compatible reverse proxy that wakes ModelServings from zero without losing a request.

Layers: :mod:`.app` (the process) > :mod:`.proxy` (requests) > :mod:`.waker` (scale writes) | :mod:`.demand`
(ModelPool demand records) > :mod:`.catalog` (informers) > :mod:`.metrics` / :mod:`.resources`. Every decision
is a pure function of :mod:`kthena_py.plan.activator`. See docs/activator.md.
"""

from __future__ import annotations

from .app import Activator, ActivatorOptions, run

__all__ = ["Activator", "ActivatorOptions", "run"]
