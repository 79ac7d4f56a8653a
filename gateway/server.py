"""Serving the app with Hypercorn's trio worker, in the runtime's Trio run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from alallo import Runtime

from .app import build_app

__all__ = ["GRACEFUL_TIMEOUT_S", "serve"]

GRACEFUL_TIMEOUT_S = 2.0
"""Seconds open requests and streams get to finish when the server stops."""


async def serve(
    runtime: Runtime,
    *,
    host: str,
    port: int,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``runtime`` over HTTP until ``shutdown_trigger`` returns (or SIGINT/SIGTERM).

    ``task_status.started`` gets the bound URLs, so ``await nursery.start(serve, ...)``
    returns once the server accepts connections (with the real port when ``port`` is 0).
    """
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.graceful_timeout = GRACEFUL_TIMEOUT_S
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    await hypercorn_serve(build_app(runtime), config,  # type: ignore[arg-type]
                          shutdown_trigger=shutdown_trigger, task_status=task_status)
