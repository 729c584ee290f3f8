"""Structured JSON logging for the whole process.

Guarantees: after :func:`configure`, every log line (structlog and standard-library loggers alike,
including aiohttp's and kubernetes-asyncio's) is one JSON object on stderr with ``timestamp``,
``level``, ``logger`` and ``event``, plus whatever context is bound: reconciles bind ``controller``,
``namespace``, ``name`` and ``reconcile_id``.
"""

from __future__ import annotations

import logging
import sys

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure(level: str = "info", *, json: bool = True) -> None:
    """Configure structlog and the standard library's root logger.

    Args:
        level: One of :data:`LEVELS`.
        json: JSON lines (default) or a human-friendly console format.
    """
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The HTTP access log of the probe/metrics server is noise at info level.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
