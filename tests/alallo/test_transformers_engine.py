"""The inference workers: one process per model, reused; a request whose reader goes away
is cancelled in the worker, which then serves the next one; a model that cannot load is a
503 (:mod:`alallo.serving._transformers`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from alallo import Settings, Unavailable
from alallo.serving import InferenceWorkers, ModelFiles

pytestmark = [pytest.mark.unit, pytest.mark.slow]


def request(request_id: str, max_tokens: int) -> dict[str, Any]:
    return {"id": request_id, "prompt": "Once", "max_tokens": max_tokens, "limit": 1024,
            "temperature": 0, "top_p": 1, "stop": [], "seed": None}


async def test_a_closed_reader_cancels_and_the_worker_serves_the_next(tmp_path: Path) -> None:
    workers = InferenceWorkers(Settings(data_dir=tmp_path))
    tiny = ModelFiles(tmp_path / "tiny", tiny="alallo/tiny-gpt2")
    async with workers.open():
        with trio.fail_after(120):
            answers = workers.submit(tiny, request("long", 250))
            first = await answers.receive()
            assert "text" in first
            await answers.aclose()  # the reader goes away part way
            (worker,) = workers._workers.values()
            pid = worker.process.pid if worker.process else None
            answers = workers.submit(tiny, request("next", 5))
            messages = [m async for m in answers]
        assert "done" in messages[-1] and messages[-1]["done"]["completion_tokens"] == 5
        (again,) = workers._workers.values()
        assert again is worker and again.process is not None and again.process.pid == pid, \
            "the cancel was answered: the model stayed loaded"


async def test_a_model_that_cannot_load_is_unavailable(tmp_path: Path) -> None:
    workers = InferenceWorkers(Settings(data_dir=tmp_path))
    async with workers.open():
        with trio.fail_after(120):
            answers = workers.submit(ModelFiles(tmp_path / "nothing-here"), request("a", 5))
            error = await answers.receive()
    assert isinstance(error, Unavailable) and "could not be loaded" in error.message
    assert workers.loaded == []
