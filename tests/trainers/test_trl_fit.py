"""Examples around the model's context (issue 31): the server counts tokens as the trainer
does, TRL keeps exactly the examples the rules say it keeps, and no example, however long
its prompt or answer, ends a run as a platform error: each run succeeds, or fails as the
user's error naming a line.

On the tiny model (one token a byte, a context of 256) rows are generated whose prompts
and answers are just under, at and over the context, in each of the five formats (SFT's
three, DPO's two). The runs train in this process (``alallo.trainers.trl.main``), one step
each: what costs is TRL's setup, about a second a run.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from alallo.trainers import Done, Error, Log, TrainerConfig, counting_encoder, parse_line
from alallo.trainers._env import QUIET_ENV
from alallo.trainers._lengths import fit_examples
from alallo.trainers.tiny import CONTEXT_LENGTH

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

FORMATS = ("text", "messages", "prompt_completion", "chosen_rejected", "preference")
DPO = ("chosen_rejected", "preference")
L = CONTEXT_LENGTH

# Per row: the prompt's tokens (text and messages: the whole example's) relative to the
# context, the answer's characters, and (DPO) whether the two answers share a long start.
rows_strategy = st.lists(st.tuples(st.sampled_from((-60, -2, -1, 0, 1)),
                                   st.sampled_from((1, 2, 40)), st.booleans()),
                         min_size=2, max_size=3)


def _row(data_format: str, prompt_tokens: int, answer: int, shared: bool, i: int,
         tokens: Any) -> dict[str, Any]:
    """A row of ``data_format`` whose prompt (text, messages: the whole) counts
    ``prompt_tokens`` with ``tokens`` (the tokenizer's count of a row's prompt)."""
    tag = f"{i}é<|endoftext|>:" if i == 1 else f"{i}é:"  # two-byte letters, a special token

    def padded(make: Any) -> Any:
        return make("x" * max(0, prompt_tokens - tokens(make(""))))

    good = tag + ("s" * (L - prompt_tokens + 20) if shared else "") + "g" * answer
    bad = tag + ("s" * (L - prompt_tokens + 20) if shared else "") + "b" * answer
    if data_format == "text":
        return padded(lambda pad: {"text": tag + pad})
    if data_format == "messages":
        return padded(lambda pad: {"messages": [{"role": "user", "content": tag + pad},
                                                {"role": "assistant", "content": "ok"}]})
    if data_format == "prompt_completion":
        return {**padded(lambda pad: {"prompt": tag + pad}), "completion": good}
    if data_format == "chosen_rejected":
        return {**padded(lambda pad: {"prompt": tag + pad}), "chosen": good, "rejected": bad}
    return {**padded(lambda pad: {"input": {"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": tag + pad}]}}),
        "preferred_output": [{"role": "assistant", "content": good}],
        "non_preferred_output": [{"role": "assistant", "content": bad}]}


def _prompt_counter(data_format: str) -> Any:
    """The tokens of a row's prompt (text, messages: of the whole row), as TRL counts."""
    encoder = counting_encoder(None, built_in=True, data_format=data_format)
    assert encoder is not None

    def count(row: dict[str, Any]) -> int:
        if data_format == "text":
            return len(encoder.text(row["text"] + encoder.eos_token))
        if data_format == "messages":
            return len(encoder.chat(row["messages"], generation_prompt=False))
        if data_format == "preference":
            return len(encoder.chat(row["input"]["messages"], generation_prompt=True))
        return len(encoder.text(row["prompt"]))
    return count


def _write(path: Path, data_format: str, cases: list[tuple[int, int, bool]]) -> Path:
    count = _prompt_counter(data_format)
    rows = [_row(data_format, L + delta, answer, shared and data_format in DPO, i, count)
            for i, (delta, answer, shared) in enumerate(cases)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _config(tmp: Path, model: Path, data: Path, data_format: str) -> TrainerConfig:
    return TrainerConfig(
        job_id="ft-fit", model=str(model), model_name="alallo/tiny-gpt2", training_file=str(data),
        data_format=data_format,  # type: ignore[arg-type]
        method="dpo" if data_format in DPO else "supervised", output_dir=str(tmp / "model"),
        checkpoint_dir=str(tmp / "checkpoints"), max_steps=1, batch_size=2, logging_steps=1,
        save_steps=100)


@pytest.fixture(autouse=True)
def _quiet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``main`` sets in the environment, set here so that it is undone after."""
    for key, value in QUIET_ENV.items():
        monkeypatch.setenv(key, value)


def test_the_server_counts_as_the_trainer_and_trl_keeps_what_the_rules_say(
        tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from alallo.trainers._data import read_numbered_rows
    from alallo.trainers._trl_fit import TokenizerEncoder, numbered
    from alallo.trainers._trl_model import load_model
    from alallo.trainers._trl_report import ProtocolOut
    from alallo.trainers.trl import build_trainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)

    @settings(max_examples=15, deadline=None, database=None, derandomize=True)
    @given(data_format=st.sampled_from(FORMATS), cases=rows_strategy)
    def check(data_format: str, cases: list[tuple[int, int, bool]]) -> None:
        data = _write(tmp_path / "data.jsonl", data_format, cases)
        rows = read_numbered_rows(data, data_format)  # type: ignore[arg-type]
        server = counting_encoder(None, built_in=True, data_format=data_format)
        assert server is not None
        fit = fit_examples(rows, data_format, TokenizerEncoder(tokenizer), L)
        assert fit_examples(rows, data_format, server, L) == fit
        config = _config(tmp_path, tiny_model, data, data_format)
        model, tokenizer_ = load_model(config, bf16=False)
        with ProtocolOut(silent=True) as out:
            trainer = build_trainer(config, model, tokenizer_, (numbered(rows), None), out,
                                    None, max_length=L, cuda=False, bf16=False)
        prepared = trainer.train_dataset
        assert sorted(prepared["line"]) == [line for line, _ in rows
                                            if line not in fit.dropped]
        refused = {line for line, _ in fit.problems}
        for kept in prepared:
            if data_format in DPO and kept["line"] not in refused:
                # The collator cuts prompt + answer to max_length.
                longest = len(kept["prompt_ids"]) + max(len(kept["chosen_ids"]),
                                                        len(kept["rejected_ids"]))
                assert (longest > L) == (kept["line"] in fit.truncated)
            elif data_format not in DPO:  # cut already
                assert len(kept["input_ids"]) <= L
                assert len(kept["input_ids"]) == L or kept["line"] not in fit.truncated

    check()


def test_no_example_around_the_context_is_a_platform_error(
        tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    from alallo.trainers._data import read_numbered_rows
    from alallo.trainers.trl import main

    # Issue 31: 132-token prompts (over the 128 the trainer cut to before) train, and one
    # that fills the context is the user's error naming its line.
    @example(data_format="preference", cases=[(-124, 2, False), (-124, 40, False)])
    @example(data_format="preference", cases=[(-124, 2, False), (10, 2, False)])
    @example(data_format="chosen_rejected", cases=[(-2, 2, True), (-60, 2, False)])
    @example(data_format="prompt_completion", cases=[(-1, 40, False), (-60, 1, False)])
    @example(data_format="messages", cases=[(1, 1, False), (-2, 1, False)])
    @settings(max_examples=6, deadline=None, database=None, derandomize=True)
    @given(data_format=st.sampled_from(FORMATS), cases=rows_strategy)
    def run(data_format: str, cases: list[tuple[int, int, bool]]) -> None:
        folder = tmp_path_factory.mktemp("fit")
        data = _write(folder / "data.jsonl", data_format, cases)
        config_file = folder / "config.json"
        config_file.write_text(_config(folder, tiny_model, data, data_format).model_dump_json())
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            code = main([str(config_file)])
        messages = [parse_line(line) for line in stdout.getvalue().splitlines()]
        last = messages[-1]
        encoder = counting_encoder(None, built_in=True, data_format=data_format)
        assert encoder is not None
        fit = fit_examples(read_numbered_rows(data, data_format),  # type: ignore[arg-type]
                           data_format, encoder, L)
        if fit.problems:
            assert code == 1 and isinstance(last, Error), messages[-3:]
            assert last.kind == "user" and re.match(r"line \d+: ", last.message), last
            assert last.message == fit.refusal()
        else:
            assert code == 0 and isinstance(last, Done), messages[-3:]
            logs = [m.text for m in messages if isinstance(m, Log)]
            assert any(f"train on their first {L} tokens" in text for text in logs) \
                == bool(fit.truncated), logs

    run()


def test_the_same_seed_on_the_same_data_trains_the_same_numbers(
        tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    # Issue 32: a job's seed is drawn and kept, and it must make the run repeatable: TRL
    # seeds its data order, and the trainer seeds before peft draws a fresh adapter.
    import torch
    from safetensors.torch import load_file

    from alallo.trainers import Progress
    from alallo.trainers.trl import main

    def trained(seed: int) -> tuple[list[float], dict[str, torch.Tensor]]:
        """The losses of 2 steps with ``seed``, and the adapter they made."""
        torch.manual_seed(seed * 1000 + len(seen))  # what ran before in this process differs
        seen.append(seed)
        folder = tmp_path_factory.mktemp(f"seed-{seed}")
        data = _write(folder / "data.jsonl", "text", [(-60, 1, False)] * 3)
        config = _config(folder, tiny_model, data, "text").model_copy(
            update={"seed": seed, "max_steps": 2, "lora_rank": 4})
        (folder / "config.json").write_text(config.model_dump_json())
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            assert main([str(folder / "config.json")]) == 0
        losses = [m.loss for m in map(parse_line, stdout.getvalue().splitlines())
                  if isinstance(m, Progress) and m.loss is not None]
        return losses, load_file(folder / "model" / "adapter_model.safetensors")

    seen: list[int] = []
    losses, adapter = trained(7)
    again_losses, again = trained(7)
    assert len(losses) == 2 and again_losses == losses
    assert adapter.keys() == again.keys()
    assert all(torch.equal(adapter[name], again[name]) for name in adapter)
    _, other = trained(8)  # another seed: another adapter
    assert not all(torch.equal(adapter[name], other[name]) for name in adapter)
