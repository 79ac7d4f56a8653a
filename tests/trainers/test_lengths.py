"""The length rules (alallo.trainers._lengths), the server's tokenizers for them
(alallo.trainers._encoders), and the trainer's reader of preference pairs: pure code, no
training (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alallo.capacity import Catalogue
from alallo.trainers import UserDataError, counting_encoder, fit_examples, has_chat_template
from alallo.trainers._data import read_rows
from alallo.trainers._lengths import context_length, lines_text
from alallo.trainers.tiny import CHAT_TEMPLATE, EOS_TOKEN, byte_level_tokenizer


@pytest.mark.parametrize("config", [{"max_position_embeddings": 512, "n_positions": 64},
                                    {"n_positions": 256}, {"n_ctx": 1024}, {}])
def test_the_trainer_reads_the_context_as_the_catalogue_does(
        config: dict[str, object], tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert context_length(tmp_path) == Catalogue().resolve(str(tmp_path)).context_length


def test_lines_are_named_the_first_ten_and_a_count() -> None:
    assert lines_text([7]) == "line 7"
    assert lines_text([2, 5, 9]) == "lines 2, 5 and 9"
    assert lines_text(list(range(1, 14))) == "lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 3 more"


def test_the_built_in_models_count_is_its_tokenizers() -> None:
    encoder = counting_encoder(None, built_in=True, data_format="text")
    assert encoder is not None
    tokenizer = byte_level_tokenizer()
    for text in ("héllo 🎉", "a<|endoftext|>b<|endoftext|>", "<|endoftext", "", " \t\n"):
        assert encoder.text(text) == tokenizer.encode(text).ids


def test_a_pair_the_same_within_the_context_cannot_train_and_the_others_are_counted() -> None:
    encoder = counting_encoder(None, built_in=True, data_format="chosen_rejected")
    assert encoder is not None
    same_start = "s" * 300
    rows = [(1, {"prompt": "Q", "chosen": " A", "rejected": " B"}),
            (3, {"prompt": "Q", "chosen": same_start + "A", "rejected": same_start + "B"}),
            (4, {"prompt": "q" * 256, "chosen": " A", "rejected": " B"}),
            (5, {"prompt": "Q", "chosen": "x" * 300, "rejected": " B"})]
    fit = fit_examples(rows, "chosen_rejected", encoder, 256)
    assert (fit.examples, fit.truncated, fit.dropped, fit.longest) == (4, (5,), (4,), 302)
    refusal = fit.refusal()
    assert refusal is not None
    assert refusal.startswith(
        "line 3: the preferred and the non-preferred answer are the same within the model's "
        "context of 256 tokens (they differ only after it), so the pair has nothing to teach")
    assert refusal.endswith("; 1 more line cannot train (line 4)")
    assert fit.note("m") == ("1 of 4 examples are longer than m's context of 256 tokens (the "
                             "longest: 302) and train on their first 256 tokens only: line 5")


def test_another_models_tokenizer_counts_the_formats_without_a_template(tmp_path: Path) -> None:
    # The tokenizer files of a model as transformers 5 saves them (no weights needed).
    tiny_model = tmp_path / "model"
    tiny_model.mkdir()
    byte_level_tokenizer().save(str(tiny_model / "tokenizer.json"))
    (tiny_model / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOS_TOKEN}))
    (tiny_model / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    text = counting_encoder(tiny_model, built_in=False, data_format="chosen_rejected")
    assert text is not None and text.eos_token == "<|endoftext|>"
    assert text.text("hé<|endoftext|>") == [104, 195, 169, 256]
    assert counting_encoder(tiny_model, built_in=False, data_format="messages") is None
    assert counting_encoder(tmp_path, built_in=False, data_format="text") is None
    assert counting_encoder(None, built_in=False, data_format="text") is None
    assert has_chat_template(tiny_model, built_in=False) is True
    assert has_chat_template(tmp_path, built_in=False) is None
    (tiny_model / "chat_template.jinja").unlink()
    assert has_chat_template(tiny_model, built_in=False) is False


@pytest.mark.parametrize(("row", "columns"), [
    ({"prompt": "Q", "chosen": "A", "rejected": "A"}, '"chosen" and "rejected"'),
    ({"input": {"messages": [{"role": "user", "content": "Q"}]},
      "preferred_output": [{"role": "assistant", "content": "A"}],
      "non_preferred_output": [{"role": "assistant", "content": "A", "weight": 1}]},
     '"preferred_output" and "non_preferred_output"'),
])
def test_the_trainers_reader_refuses_an_equal_pair_by_its_line(
        row: dict[str, object], columns: str, tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    fine = {"prompt": "Q", "chosen": "A", "rejected": "B"} if "prompt" in row else {
        **row, "non_preferred_output": [{"role": "assistant", "content": "B"}]}
    data.write_text(json.dumps(fine) + "\n\n" + json.dumps(row) + "\n")
    data_format = "chosen_rejected" if "prompt" in row else "preference"
    with pytest.raises(UserDataError) as refused:
        read_rows(data, data_format)  # type: ignore[arg-type]
    assert str(refused.value) == (f"line 3: {columns} are the same answer, so the pair has "
                                  "nothing to teach: prefer one answer over a different one")
