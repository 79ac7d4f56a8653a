"""How a server process writes its structlog events: JSON lines, or a console.

:func:`configure_logging` renders every event with its level, an ISO-8601
UTC timestamp and the context bound in ``structlog.contextvars`` (the
gateway binds ``request_id`` and ``job_id`` per request; the job actors
pass ``job_id`` themselves): one JSON object per line for log collectors,
or structlog's console renderer for a person at a terminal (structlog's
own advice: pretty in development, JSON in production).
"""

from __future__ import annotations

import sys
from typing import TextIO

import structlog

__all__ = ["configure_logging"]


def configure_logging(level: int, *, json: bool | None = None, file: TextIO | None = None) -> None:
    """Send structlog events at ``level`` or above to ``file`` (stderr by default).

    Args:
        level: A :mod:`logging` level (``logging.INFO``...).
        json: JSON lines (True) or the console renderer (False); None: JSON
            unless ``file`` is a terminal.
        file: Where the lines go; None is ``sys.stderr``, so that stdout
            stays the user's.
    """
    out = file or sys.stderr
    as_json = json if json is not None else not out.isatty()
    rendering: list[structlog.typing.Processor] = (
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()] if as_json
        else [structlog.dev.ConsoleRenderer()])
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *rendering,
        ],
        logger_factory=structlog.PrintLoggerFactory(out),
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=False,
    )
