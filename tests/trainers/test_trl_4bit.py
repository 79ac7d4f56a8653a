"""4-bit loading (alallo.trainers._trl_4bit, through _trl_model.load_model): NF4 layers where
the model has linear layers (GPT-2's Conv1D included), the rest as loaded, a LoRA adapter on
top that trains on the CPU in bf16 and in fp32."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alallo.trainers import TrainerConfig

# The libraries' deprecation notices (the trainer's main() silences them too).
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _config(model: Path, data: Path, tmp_path: Path) -> TrainerConfig:
    return TrainerConfig(job_id="t", model=str(model), model_name=str(model),
                         training_file=str(data), data_format="text", precision="4-bit",
                         output_dir=str(tmp_path / "model"),
                         checkpoint_dir=str(tmp_path / "checkpoints"), max_steps=3,
                         batch_size=2, logging_steps=1, save_steps=100, learning_rate=1e-2)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """A 2-layer Llama with grouped-query attention and an untied output layer, saved in
    bf16 as published checkpoints are, with the tiny model's byte-level tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    config = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=len(tokenizer),
                         max_position_embeddings=128, tie_word_embeddings=False,
                         bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("llama") / "tiny-llama"
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _train(config: TrainerConfig, model: Any, tokenizer: Any, data: Path, *,
           bf16: bool) -> Any:
    from datasets import Dataset

    from alallo.trainers._data import read_rows
    from alallo.trainers._trl_report import ProtocolOut
    from alallo.trainers.trl import build_trainer

    with ProtocolOut(silent=True) as out:
        trainer = build_trainer(config, model, tokenizer,
                                (Dataset.from_list(read_rows(data, "text")), None), out, None,
                                max_length=64, cuda=False, bf16=bf16)
        trainer.train()
    return trainer


def test_the_quantization_is_nf4_computing_in_bf16_or_fp32_never_fp16() -> None:
    import torch

    from alallo.trainers._trl_4bit import bnb_config

    for bf16, dtype in ((True, torch.bfloat16), (False, torch.float32)):
        config = bnb_config(bf16=bf16)
        assert (config.load_in_4bit, config.bnb_4bit_quant_type) == (True, "nf4")
        assert config.bnb_4bit_use_double_quant and config.bnb_4bit_compute_dtype == dtype


def test_gpt2s_conv1d_layers_are_quantized_and_the_output_layer_is_not(
        tiny_model: Path, text_file: Path, tmp_path: Path) -> None:
    import bitsandbytes as bnb
    from transformers import AutoModelForCausalLM

    from alallo.trainers._trl_4bit import quantized_share
    from alallo.trainers._trl_model import load_model

    model, _ = load_model(_config(tiny_model, text_file, tmp_path), bf16=True)
    block = model.transformer.h[0]
    for layer in (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj):
        assert isinstance(layer, bnb.nn.Linear4bit) and layer.weight.quant_type == "nf4"
    assert (block.attn.c_attn.in_features, block.attn.c_attn.out_features) == (64, 192)
    assert not isinstance(model.lm_head, bnb.nn.Linear4bit)
    assert quantized_share(model) == pytest.approx(0.74, abs=0.01)
    assert quantized_share(AutoModelForCausalLM.from_pretrained(tiny_model)) == 0.0


@pytest.mark.parametrize("bf16", [True, False], ids=["bf16", "fp32"])
def test_a_llama_trains_a_lora_adapter_on_its_4_bit_weights(
        tiny_llama: Path, text_file: Path, tmp_path: Path, bf16: bool) -> None:
    """In bf16 what stayed in 16 bits stays so; in fp32 it is cast to fp32 (every layer
    computes in fp32). Either way the adapter trains (its B matrices start at zero) and the
    base does not."""
    import bitsandbytes as bnb
    import torch
    from safetensors.torch import load_file

    from alallo.trainers._trl_model import load_model

    config = _config(tiny_llama, text_file, tmp_path)
    model, tokenizer = load_model(config, bf16=bf16)
    attention = model.model.layers[0].self_attn
    assert isinstance(attention.q_proj, bnb.nn.Linear4bit)
    assert attention.q_proj.compute_dtype == (torch.bfloat16 if bf16 else torch.float32)
    kept = {p.dtype for p in model.parameters() if not isinstance(p, bnb.nn.Params4bit)}
    assert kept == {torch.bfloat16 if bf16 else torch.float32}

    trainer = _train(config, model, tokenizer, text_file, bf16=bf16)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))
    trainer.save_model(config.output_dir)
    adapter = load_file(Path(config.output_dir) / "adapter_model.safetensors")
    b_matrices = [weight for name, weight in adapter.items() if "lora_B" in name]
    assert b_matrices and all(weight.abs().sum() > 0 for weight in b_matrices)
    saved = json.loads((Path(config.output_dir) / "adapter_config.json").read_text())
    assert saved["base_model_name_or_path"] == str(tiny_llama)
    trained = {name for name, p in trainer.model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in name for name in trained)


def test_on_the_cpu_no_weight_is_left_in_the_checkpoints_memory_map(
        tiny_llama: Path, text_file: Path, tmp_path: Path) -> None:
    """A weight left in the memory map keeps the file mapped, and with it every 16-bit
    weight that quantizing read: the process would hold the 16-bit model after all."""
    from alallo.trainers._trl_model import load_model

    model, _ = load_model(_config(tiny_llama, text_file, tmp_path), bf16=True)
    mapped = [line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
              if line.endswith("model.safetensors")]
    assert str(tiny_llama / "model.safetensors") not in mapped
    del model
