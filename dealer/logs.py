"""structlog JSON logs with ``table_id`` / ``round_id`` bound through contextvars."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "info", *, json: bool = True, stream=None) -> None:
    lvl = getattr(logging, level.upper())
    logging.basicConfig(level=max(lvl, logging.WARNING), stream=stream or sys.stderr, format="%(message)s")
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
