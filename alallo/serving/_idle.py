"""Letting go of the loaded models nobody asked for lately (``inference_idle_s``), for both
engines: a transformers worker, a vLLM engine."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

import structlog
import trio

from ._models import ModelFiles

__all__ = ["let_go_when_idle"]

log = structlog.get_logger("alallo.serving")


class _Loaded(Protocol):
    files: ModelFiles
    last_used: float


T = TypeVar("T", bound=_Loaded)


async def let_go_when_idle(loaded: Callable[[], Iterable[T]], busy: Callable[[T], bool],
                           let_go: Callable[[T], None], idle_s: float, engine: str) -> None:
    """Forever: every ``idle_s / 4`` (at most 30 s), ``let_go`` each of ``loaded()`` not
    ``busy`` and unused (``last_used``, Trio's clock) for more than ``idle_s``."""
    while True:
        await trio.sleep(min(idle_s / 4, 30.0))
        now = trio.current_time()
        for item in list(loaded()):
            if not busy(item) and now - item.last_used > idle_s:
                log.info("serving.idle", engine=engine, model=str(item.files.model))
                let_go(item)
