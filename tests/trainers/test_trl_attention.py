"""Attention over a padding-free row one sequence at a time (alallo.trainers._trl_attention):
what each sequence alone computes, forward and backward; anything else as SDPA computes it."""

from __future__ import annotations

from typing import Any

import pytest

from alallo.trainers import _trl_attention

pytestmark = [pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

LENGTHS = [5, 17, 3, 40]


def _model(kind: str) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if kind == "gpt2":
        config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=128,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            bos_token_id=0, eos_token_id=0)
        return GPT2LMHeadModel(config)
    # Llama with grouped-query attention: 4 query heads share 2 key-value heads.
    config = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                         max_position_embeddings=128, bos_token_id=0, eos_token_id=0)
    return LlamaForCausalLM(config)


def _row() -> tuple[Any, Any]:
    import torch

    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 100, (1, sum(LENGTHS)), generator=generator)
    positions = torch.cat([torch.arange(n) for n in LENGTHS]).unsqueeze(0)
    return ids, positions


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_row_computes_what_each_sequence_alone_computes(kind: str) -> None:
    """Logits and weight gradients of a padding-free row equal those of its sequences run
    one by one (GPT-2; Llama with grouped-query attention)."""
    import torch

    model = _model(kind).train()
    ids, positions = _row()
    apart = []
    for piece in ids.split(LENGTHS, dim=1):
        apart.append(model(input_ids=piece, use_cache=False).logits)
    torch.cat(apart, dim=1).sum().backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()

    _trl_attention.register()
    model.set_attn_implementation(_trl_attention.NAME)
    logits = model(input_ids=ids, position_ids=positions, use_cache=False).logits
    logits.sum().backward()

    assert torch.allclose(logits, torch.cat(apart, dim=1), atol=1e-5)
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, expected[name], atol=1e-4), name


def test_a_row_with_a_cache_is_still_attended_per_sequence() -> None:
    """A model's forward makes a KV cache by default (``use_cache``), which turns off
    transformers' own finding of packed sequences; the row is still kept apart."""
    import torch

    model = _model("gpt2").eval()
    ids, positions = _row()
    with torch.no_grad():
        apart = torch.cat([model(input_ids=piece).logits
                           for piece in ids.split(LENGTHS, dim=1)], dim=1)
        _trl_attention.register()
        model.set_attn_implementation(_trl_attention.NAME)
        row = model(input_ids=ids, position_ids=positions).logits
    assert torch.allclose(row, apart, atol=1e-5)


def test_padded_batches_and_generation_are_sdpa_s() -> None:
    """A padded batch (with its mask) and generation (a KV cache, one token at a time)
    compute what SDPA computes."""
    import torch

    model = _model("gpt2").eval()
    ids, _ = _row()
    batch = ids[:, :12].repeat(2, 1)
    mask = torch.ones_like(batch)
    mask[1, 8:] = 0
    with torch.no_grad():
        padded = model(input_ids=batch, attention_mask=mask).logits
        generated = model.generate(ids[:, :6], max_new_tokens=6, do_sample=False,
                                   pad_token_id=0)
        _trl_attention.register()
        model.set_attn_implementation(_trl_attention.NAME)
        assert torch.allclose(model(input_ids=batch, attention_mask=mask).logits, padded,
                              atol=1e-5)
        assert torch.equal(model.generate(ids[:, :6], max_new_tokens=6, do_sample=False,
                                          pad_token_id=0), generated)


def test_only_full_causal_sdpa_models_fit() -> None:
    """A sliding window, or eager attention (chosen where SDPA would compute something
    else), keeps the model's own attention."""
    from transformers import MistralConfig, MistralForCausalLM

    assert _trl_attention.fits(_model("gpt2"))
    assert _trl_attention.fits(_model("llama"))
    eager = _model("gpt2")
    eager.set_attn_implementation("eager")
    assert not _trl_attention.fits(eager)
    windowed = MistralForCausalLM(MistralConfig(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
        num_key_value_heads=1, vocab_size=100, sliding_window=16))
    assert not _trl_attention.fits(windowed)


def test_the_name_is_not_saved_with_the_model(tmp_path: Any) -> None:
    """A fine-tuned model saved while training with it loads anywhere, with SDPA."""
    from transformers import AutoModelForCausalLM

    model = _model("gpt2")
    _trl_attention.register()
    model.set_attn_implementation(_trl_attention.NAME)
    model.save_pretrained(tmp_path)
    assert _trl_attention.NAME not in (tmp_path / "config.json").read_text()
    assert AutoModelForCausalLM.from_pretrained(tmp_path).config._attn_implementation == "sdpa"
