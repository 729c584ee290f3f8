"""Polling helpers for tests against real servers.

Guarantees: :func:`eventually` only ever fails by timeout (with the last error or value in the
message); it never asserts on how long something took, so a slow machine makes tests slower,
never red, as long as the generous default timeout holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]] | Callable[[], T],
    *,
    timeout: float = 60.0,
    interval: float = 0.1,
    description: str = "condition",
) -> T:
    """Call ``probe`` until it returns a truthy value without raising ``AssertionError``.

    Args:
        probe: Sync or async callable; a falsy result or an ``AssertionError`` means "not yet".
        timeout: Give up after this many seconds.
        interval: Pause between attempts.
        description: Named in the timeout message.

    Returns:
        The first truthy result.

    Raises:
        AssertionError: The timeout passed; the message carries the last failure.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = probe()
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
            if result:
                return result  # type: ignore[return-value]
            last = result
        except AssertionError as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {description}; last: {last!r}")
        await asyncio.sleep(interval)
