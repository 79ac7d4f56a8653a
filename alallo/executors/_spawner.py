"""One thread of the server that starts every cold trainer, for the life of the process.

Starting a process blocks its caller: ``subprocess`` searches the program, then ``vfork``s
and waits until the child has exec'd (``setpriv``), about a millisecond idle and several
under load. On the Trio thread that wait stopped every job: after a restart with 1,000
running jobs, a third of the event loop's time went to it (``bench/bench_recovery.py``).
Here the wait happens in a thread of its own, with the GIL released, while the event
loop goes on with the other jobs.

Why not ``trio.to_thread``: ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the
child ends (prctl(2)), and trio's worker threads end after ~10 idle seconds, which
killed every trainer (:mod:`alallo.executors._local`). This thread never ends while the
process runs, so a trainer dies with the server, and only then. One thread for every
Trio run of the process: starts are queued and made in their order.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import outcome
import trio

__all__ = ["start_in_spawner"]

T = TypeVar("T")

_Request = tuple[Callable[[], Any], Callable[[outcome.Outcome[Any]], None]]

_requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _serve() -> None:
    while True:
        start, deliver = _requests.get()
        deliver(outcome.capture(start))


def _ensure_thread() -> None:
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_serve, name="alallo trainer starts", daemon=True)
            _thread.start()


async def start_in_spawner(start: Callable[[], T], undo: Callable[[T], None]) -> T:
    """Run ``start()`` (which starts a child process) in the spawner thread; return its result.

    Not cancellable while it runs (a start takes milliseconds): a caller cancelled
    meanwhile gets its child, and the cancellation at its next checkpoint, so the child
    is never left without an owner. Should the Trio run end before the answer comes
    back, ``undo(result)`` stops the child in the spawner thread.

    Raises:
        Exception: what ``start`` raised (``OSError``: the program is missing...).
    """
    _ensure_thread()
    token = trio.lowlevel.current_trio_token()
    task = trio.lowlevel.current_task()

    def deliver(result: outcome.Outcome[T]) -> None:
        try:
            token.run_sync_soon(trio.lowlevel.reschedule, task, result)
        except trio.RunFinishedError:
            if isinstance(result, outcome.Value):
                with contextlib.suppress(Exception):
                    undo(result.value)

    _requests.put((start, deliver))
    return await trio.lowlevel.wait_task_rescheduled(  # type: ignore[no-any-return]
        lambda _: trio.lowlevel.Abort.FAILED)
