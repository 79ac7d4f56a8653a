"""Fakes for the client and command-line tests: job objects and SSE bodies."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

JobFactory = Callable[..., dict[str, Any]]
SseBody = Callable[..., bytes]


@pytest.fixture
def make_job() -> JobFactory:
    """A job object shaped as API.md describes it; keyword arguments override fields."""

    def make(**fields: Any) -> dict[str, Any]:
        job: dict[str, Any] = {
            "id": "ft-1",
            "object": "fine_tuning.job",
            "name": "demo",
            "model": "alallo/tiny-gpt2",
            "training_file": "file-1",
            "method": {"type": "supervised", "supervised": {"hyperparameters": {
                "n_epochs": 3, "batch_size": 4, "learning_rate_multiplier": 1.0}}},
            "adapter": "lora",
            "precision": "16-bit",
            "goal": "lowest_cost",
            "status": "running",
            "message": None,
            "progress": {"step": 40, "max_steps": 100, "percent": 40.0},
            "time_left": {"low_s": 120, "high_s": 300, "text": "2 min to 5 min", "basis": "pace"},
            "price": {
                "estimate": {"low": 0.1, "high": 0.25},
                "charged": 0.0,
                "refunded": 0.0,
                "currency": "USD",
            },
            "created_at": 1_700_000_000,
            "started_at": 1_700_000_010,
            "finished_at": None,
            "checkpoint": {"step": 40, "created_at": 1_700_000_100},
            "fine_tuned_model": None,
            "error": None,
        }
        job.update(fields)
        return job

    return make


@pytest.fixture
def sse_body() -> SseBody:
    """Server-Sent Events for ``(kind, seq, data)`` items; data that is a str goes as is."""

    def body(*items: tuple[str, int, Any]) -> bytes:
        frames = []
        for kind, seq, data in items:
            text = data if isinstance(data, str) else json.dumps(data)
            frames.append(f"event: {kind}\nid: {seq}\ndata: {text}\n\n")
        return "".join(frames).encode()

    return body
