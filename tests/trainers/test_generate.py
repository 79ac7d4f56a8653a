"""The inference worker's text handling: stop sequences held back until they are known,
and text decoded a few tokens at a time yet whole (:mod:`alallo.trainers.generate`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from alallo.trainers import generate
from alallo.trainers.generate import _Generation, safe_end, sampling_options


@pytest.mark.parametrize(("text", "stops", "expected"), [
    ("hello world", [], (11, False)),
    ("hello world", ["wor"], (6, True)),
    ("hello wo", ["wor"], (6, False)),  # "wo" may begin "wor": held back
    ("hello w", ["wor", "xyz"], (6, False)),
    ("hello", ["lo", "hel"], (0, True)),  # the first stop in the text wins
    ("abc", [""], (3, False)),  # an empty stop stops nothing
])
def test_safe_end(text: str, stops: list[str], expected: tuple[int, bool]) -> None:
    assert safe_end(text, stops) == expected


class Bytes:
    """A byte-level tokenizer: token i is byte i; a character cut short decodes as U+FFFD."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


def run(text: str, stops: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], _Generation]:
    monkeypatch.setattr(generate, "PIECE_INTERVAL_S", 0.0)  # every piece as it comes
    generation = _Generation("r", Bytes(), stops, set())
    generation.put(torch.tensor([[1, 2, 3]]))  # the prompt: not sent
    for byte in text.encode():
        if generation.should_stop():
            break
        generation.put(torch.tensor([byte]))
    generation.end()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return [line["text"] for line in lines], generation


def test_pieces_make_the_whole_text_and_never_half_a_character(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pieces, generation = run("naïve café ☕", [], capsys, monkeypatch)
    assert "".join(pieces) == "naïve café ☕" and not generation.stopped
    assert "\ufffd" not in "".join(pieces) and len(pieces) == len("naïve café ☕")


def test_a_stop_sequence_across_pieces_ends_the_text_before_it(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pieces, generation = run("Answer: yes\nUser: more", ["\nUser:"], capsys, monkeypatch)
    assert "".join(pieces) == "Answer: yes" and generation.stopped


def test_sampling_draws_from_the_whole_vocabulary_as_openai_does(tiny_model: Path) -> None:
    """A request with temperature 1 samples every token by its chance: transformers' own
    default would keep the 50 likeliest (top_k 50), which no OpenAI request can ask for.
    The built tiny model gives ~98 tokens nearly equal chances: 400 first tokens drawn
    from all of them show far more than 50 different ones."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    prompt = torch.tensor([list(b"<|user|>\nHello\n<|assistant|>\n")])
    torch.manual_seed(0)
    drawn = model.generate(prompt, max_new_tokens=1, num_return_sequences=400,
                           pad_token_id=256, **sampling_options({"temperature": 1.0}))
    assert len(set(drawn[:, -1].tolist())) > 60
    assert sampling_options({"temperature": 0}) == {"do_sample": False}  # greedy
