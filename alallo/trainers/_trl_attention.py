"""Attention over a padding-free batch one sequence at a time, with torch's SDPA.

A padding-free batch lays the examples of a batch end to end in one row, each with its
``position_ids`` from 0. With ``sdpa`` attention, transformers keeps them apart with a
block-diagonal mask over the whole row (``create_causal_mask`` finds the sequences from the
position ids). SDPA then computes every pair of the row, its whole length squared, and with
a mask it cannot use its causal kernel. Here each sequence is attended on its own with
``is_causal=True``: what the mask computes (to rounding), at each sequence's own length
squared. It is what flash-attention's variable-length kernels (``cu_seqlens``) do, in
torch's own SDPA, for a device or a build without them (the CPU; a GPU without the
``flash-attn`` package).

Registered with transformers' attention interfaces (``AttentionInterface``,
``AttentionMaskInterface``; transformers >= 5) as :data:`NAME`, a model takes it with
``set_attn_implementation(NAME)``; the name is not saved with the model. Anything else (a
padded batch, a mask, a KV cache that holds earlier tokens, a single sequence) goes to
transformers' own SDPA as before.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NAME", "fits", "register"]

NAME = "alallo_sdpa_per_sequence"
"""The attention implementation's name in transformers' registries."""


def fits(model: Any) -> bool:
    """Whether ``model`` (a ``PreTrainedModel``; for a PEFT model, its base model) can attend
    a padding-free batch per sequence and compute what its own ``sdpa`` computes: it uses
    ``sdpa``, and every layer attends to the whole causal past (no sliding window, no
    chunked or bidirectional layers) and is causal."""
    config = model.config
    if getattr(config, "_attn_implementation", None) not in ("sdpa", NAME):
        return False
    text = config.get_text_config()
    if getattr(text, "sliding_window", None) or getattr(text, "attention_chunk_size", None):
        return False
    layers = getattr(text, "layer_types", None)
    return layers is None or all(kind == "full_attention" for kind in layers)


def register() -> None:
    """Register :data:`NAME` with transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, _attention)
    AttentionMaskInterface.register(NAME, _mask)


def _mask(*args: Any, attention_mask: Any = None, **kwargs: Any) -> Any:
    """No mask for a batch without one (padding-free, or unpadded): the attention keeps its
    sequences apart; SDPA's mask otherwise (a padded batch, generation)."""
    from transformers.masking_utils import sdpa_mask

    if attention_mask is None and kwargs.get("kv_offset", 0) == 0 \
            and kwargs.get("q_offset", 0) == 0:
        return None
    return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


def _attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
               **kwargs: Any) -> tuple[Any, None]:
    """transformers' attention signature: ``query`` (batch, heads, tokens, head size),
    ``key``/``value`` (batch, key-value heads, tokens, head size); returns the output as
    (batch, tokens, heads, head size) and no weights."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    lengths = _sequence_lengths(kwargs.get("position_ids"), query, key, attention_mask)
    if lengths is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    import torch

    kwargs = {name: kwargs[name] for name in ("dropout", "scaling") if name in kwargs}
    parts = [sdpa_attention_forward(module, q, k, v, None, is_causal=True, **kwargs)[0]
             for q, k, v in zip(query.split(lengths, dim=2), key.split(lengths, dim=2),
                                value.split(lengths, dim=2), strict=True)]
    return torch.cat(parts, dim=1), None


def _sequence_lengths(position_ids: Any, query: Any, key: Any,
                      attention_mask: Any) -> list[int] | None:
    """The lengths of the sequences laid end to end in a one-row batch without a mask and
    without a cache (each starts where its position id does not follow the previous one);
    None for anything else, or a single sequence."""
    if (position_ids is None or attention_mask is not None or query.shape[0] != 1
            or position_ids.shape[0] != 1 or query.shape[2] != key.shape[2]
            or position_ids.shape[-1] != query.shape[2]):
        return None
    import torch

    positions = position_ids[0]
    starts = torch.nonzero(positions[1:] != positions[:-1] + 1).flatten() + 1
    if starts.numel() == 0:
        return None
    bounds = [0, *starts.tolist(), positions.shape[0]]
    return [end - start for start, end in zip(bounds, bounds[1:])]
