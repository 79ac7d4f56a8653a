"""Padding-free batches (alallo.trainers._trl_model.use_padding_free): chosen where the
model keeps the examples of a row apart, and training exactly what padded batches train."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from alallo.trainers import TrainerConfig

# The libraries' deprecation notices (the trainer's main() silences them too).
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _trainer(tiny_model: Path, data: Path, tmp_path: Path, *, adapter: str = "lora",
             batch_size: int = 4, bf16: bool = False, attention: str = "sdpa") -> Any:
    from datasets import Dataset

    from alallo.trainers._data import read_rows
    from alallo.trainers._trl_model import load_model
    from alallo.trainers._trl_report import ProtocolOut
    from alallo.trainers.trl import build_trainer

    config = TrainerConfig(job_id="t", model=str(tiny_model), model_name="alallo/tiny-gpt2",
                           training_file=str(data), data_format="text",
                           output_dir=str(tmp_path / "model"),
                           checkpoint_dir=str(tmp_path / "checkpoints"), adapter=adapter,
                           max_steps=4, batch_size=batch_size, logging_steps=1, save_steps=100)
    model, tokenizer = load_model(config, bf16=bf16)
    model.set_attn_implementation(attention)
    with ProtocolOut(silent=True) as out:
        return build_trainer(config, model, tokenizer,
                             (Dataset.from_list(read_rows(data, "text")), None), out, None,
                             max_length=128, cuda=False, bf16=bf16)


@pytest.fixture
def uneven_file(tmp_path: Path) -> Path:
    """16 ``text`` examples of 5 to ~200 bytes: padded batches would be mostly padding."""
    path = tmp_path / "uneven.jsonl"
    path.write_text("".join(json.dumps({"text": "word " * (1 + (i * 7) % 40)}) + "\n"
                            for i in range(16)))
    return path


def test_a_gpt2_batch_without_dropout_is_padding_free(without_dropout: Path, uneven_file: Path,
                                                      tmp_path: Path) -> None:
    trainer = _trainer(without_dropout, uneven_file, tmp_path)
    examples = [trainer.train_dataset[i] for i in range(4)]
    batch = trainer.data_collator(examples)
    assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 1
    assert batch["input_ids"].shape[1] == sum(len(e["input_ids"]) for e in examples)


def test_with_sdpa_every_batch_is_flat_and_attended_per_sequence(
        without_dropout: Path, uneven_file: Path, tmp_path: Path) -> None:
    """With SDPA each sequence of a row is attended on its own (its own length squared, no
    mask): even four examples of the same length, which padding would not pad, go flat."""
    from alallo.trainers import _trl_attention

    trainer = _trainer(without_dropout, uneven_file, tmp_path)
    batch = trainer.data_collator([{"input_ids": list(range(120))}] * 4)
    assert batch["input_ids"].shape == (1, 480) and "attention_mask" not in batch
    assert trainer.model.get_base_model().config._attn_implementation == \
        _trl_attention.NAME


def test_with_eager_attention_a_batch_of_long_equal_examples_stays_padded(
        without_dropout: Path, uneven_file: Path, tmp_path: Path) -> None:
    """Eager attention keeps a row's sequences apart through the mask, at the whole row's
    length squared: four examples of the same length cost less padded (with no padding at
    all), in fp32."""
    trainer = _trainer(without_dropout, uneven_file, tmp_path, attention="eager")
    batch = trainer.data_collator([{"input_ids": list(range(120))}] * 4)
    assert batch["input_ids"].shape == (4, 120) and "attention_mask" in batch
    assert trainer.model.get_base_model().config._attn_implementation == "eager"


def test_in_bf16_every_batch_is_flat(without_dropout: Path, uneven_file: Path,
                                     tmp_path: Path) -> None:
    """In bf16 (a CPU with bf16 units) flat batches measured fastest even where padding
    costs fewer FLOPs: with eager attention too, the batch that stays padded in fp32 is
    flat."""
    trainer = _trainer(without_dropout, uneven_file, tmp_path, bf16=True, attention="eager")
    batch = trainer.data_collator([{"input_ids": list(range(120))}] * 4)
    assert batch["input_ids"].shape == (1, 480) and "attention_mask" not in batch


@pytest.mark.parametrize("batch_size", [1, 4])
def test_a_batch_of_one_or_a_model_with_dropout_stays_padded(
        tiny_model: Path, without_dropout: Path, uneven_file: Path, tmp_path: Path,
        batch_size: int) -> None:
    """Dropout draws its masks by the batch's shape: the tiny GPT-2 (dropout 0.1) keeps the
    padded batches, and so the numbers, it trained with before."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    model = without_dropout if batch_size == 1 else tiny_model
    trainer = _trainer(model, uneven_file, tmp_path, batch_size=batch_size)
    assert type(trainer.data_collator) is DataCollatorForLanguageModeling
    assert not trainer.data_collator.padding_free


@pytest.fixture
def without_dropout(tiny_model: Path, tmp_path: Path) -> Path:
    """The tiny model with GPT-2's dropout off: dropout draws its masks by the batch's shape,
    so only without it can two batch shapes give the same numbers."""
    copy = tmp_path / "no-dropout"
    shutil.copytree(tiny_model, copy)
    config = json.loads((copy / "config.json").read_text())
    config |= {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize(("adapter", "attention"),
                         [("lora", "sdpa"), ("full", "sdpa"), ("lora", "eager")])
def test_padding_free_computes_what_padded_batches_compute(
        without_dropout: Path, uneven_file: Path, tmp_path: Path, adapter: str,
        attention: str) -> None:
    """The same examples, one row or padded to the longest: the same summed loss over the
    same trained tokens, as the trainer computes it in a training step (the row attended per
    sequence with SDPA, through the mask with eager attention)."""
    import torch
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    trainer = _trainer(without_dropout, uneven_file, tmp_path, adapter=adapter,
                       attention=attention)
    examples = [trainer.train_dataset[i] for i in range(4)]
    trainer.model.train()
    losses = []
    for padding_free in (True, False):
        batch = DataCollatorForLanguageModeling(pad_token_id=256,
                                                padding_free=padding_free)(examples)
        trained = int((batch["labels"][..., 1:] != -100).sum())
        assert trained == sum(len(example["input_ids"]) - 1 for example in examples)
        with torch.no_grad():
            losses.append(float(trainer.compute_loss(trainer.model, batch,
                                                     num_items_in_batch=trained)))
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


@pytest.mark.parametrize("adapter", ["lora", "full"])
def test_a_job_trains_and_reports_the_losses_of_padded_batches(
        without_dropout: Path, uneven_file: Path, tmp_path: Path, adapter: str) -> None:
    """Step by step, the losses of the same job with TRL's padded batches: the divisor of a
    padding-free batch's loss is the padded batch's."""
    losses = []
    for padding_free in (True, False):
        trainer = _trainer(without_dropout, uneven_file, tmp_path / str(padding_free),
                           adapter=adapter)
        if not padding_free:
            trainer.data_collator = trainer.data_collator.padded
        trainer.train()
        losses.append([entry["loss"] for entry in trainer.state.log_history if "loss" in entry])
    assert len(losses[0]) == 4
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
