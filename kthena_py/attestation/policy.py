"""The effective attestation mode of one cache (pure).

The manager's ``--model-attestation`` sets a floor (``off`` < ``warn`` < ``enforce``); a cache's
``spec.attestation.policy`` (``Warn``/``Enforce``) can only raise it, never lower it. Guarantees of
:func:`effective_mode`:

* the result is never weaker than the manager's mode nor than the cache's policy;
* a cache that references an attestation is verified at least in ``warn`` mode, even under ``off`` (a
  reference asks for a check);
* a cache without a reference keeps the manager's mode: under ``warn``/``enforce`` it reports
  :data:`~kthena_py.vocab.conditions.REASON_NO_ATTESTATION` (and under ``enforce`` is never Ready).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["ENFORCE", "MODES", "OFF", "WARN", "Mode", "effective_mode", "parse_mode"]

Mode = Literal["off", "warn", "enforce"]
OFF: Mode = "off"
WARN: Mode = "warn"
ENFORCE: Mode = "enforce"
MODES: tuple[Mode, ...] = (OFF, WARN, ENFORCE)
"""The modes, weakest first."""

_POLICY: dict[str, Mode] = {"Warn": WARN, "Enforce": ENFORCE}


def parse_mode(text: str) -> Mode:
    """The mode named ``text`` (``off``, ``warn``, ``enforce``, any case).

    Raises:
        ValueError: Not a mode.
    """
    for mode in MODES:
        if text.strip().lower() == mode:
            return mode
    raise ValueError(f"attestation mode must be one of {', '.join(MODES)}, not {text!r}")


def _stronger(a: Mode, b: Mode) -> Mode:
    return a if MODES.index(a) >= MODES.index(b) else b


def effective_mode(manager: Mode, policy: str | None, referenced: bool) -> Mode:
    """The mode a cache is checked under (see the module docstring).

    Args:
        manager: The manager's ``--model-attestation``.
        policy: The cache's ``spec.attestation.policy`` (``Warn``, ``Enforce`` or ``None``).
        referenced: Whether the cache references an attestation.
    """
    mode = manager
    if policy is not None:
        mode = _stronger(mode, _POLICY.get(policy, WARN))
    if referenced:
        mode = _stronger(mode, WARN)
    return mode
