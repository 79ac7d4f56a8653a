"""Fixtures for the trainer tests: the tiny model, built once, and small data files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alallo.trainers.tiny import build_tiny_gpt2


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``alallo/tiny-gpt2`` model directory, built once per session."""
    return build_tiny_gpt2(tmp_path_factory.mktemp("models") / "alallo--tiny-gpt2")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="session")
def text_file(data_dir: Path) -> Path:
    """32 lines of short ``text`` examples."""
    return _write_jsonl(
        data_dir / "text.jsonl",
        [{"text": f"Example {i}: the cat sat on mat number {i}."} for i in range(32)],
    )


@pytest.fixture(scope="session")
def messages_file(data_dir: Path) -> Path:
    """16 short two-turn conversations (``messages``)."""
    return _write_jsonl(
        data_dir / "messages.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": f"What is {i} plus one?"},
                    {"role": "assistant", "content": f"It is {i + 1}."},
                ]
            }
            for i in range(16)
        ],
    )


@pytest.fixture(scope="session")
def prompt_completion_file(data_dir: Path) -> Path:
    """16 short ``prompt``/``completion`` pairs."""
    return _write_jsonl(
        data_dir / "prompt_completion.jsonl",
        [{"prompt": f"Count after {i}:", "completion": f" {i + 1}"} for i in range(16)],
    )


@pytest.fixture(scope="session")
def missing_column_file(data_dir: Path) -> Path:
    """``text`` data whose third line lacks the ``text`` column."""
    return _write_jsonl(
        data_dir / "missing_column.jsonl",
        [{"text": "fine"}, {"text": "also fine"}, {"txt": "typo"}, {"text": "never read"}],
    )
