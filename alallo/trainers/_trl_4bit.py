"""4-bit training (QLoRA, Dettmers et al. 2023): the quantization transformers loads a model
with, and the loaded model made ready for a LoRA adapter on top.

bitsandbytes (>= 0.50) quantizes and trains NF4 weights on CUDA and on the CPU alike.
transformers replaces every ``nn.Linear``, and GPT-2's ``Conv1D`` (its weight transposed),
with bitsandbytes' ``Linear4bit``, all but the output layer; the embeddings, norms, biases
and output layer keep their 16- or 32-bit dtype (:func:`quantized_share`). A LoRA adapter
trained on these layers has the shapes of one trained on the 16-bit model, so it loads on
the 16-bit base for download, merging and chat.

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from typing import Any

__all__ = ["bnb_config", "quantized_share", "ready_for_lora"]


def bnb_config(*, bf16: bool) -> Any:
    """transformers' ``BitsAndBytesConfig`` for QLoRA: NF4 weights, double quantization (the
    blocks' scales quantized too: 0.52 bytes a weight, measured in docs/capacity.md),
    computing in bf16 where the machine trains in bf16
    (:func:`~alallo.trainers._trl_model.trains_in_bf16`), else in fp32. Not fp16, QLoRA's
    choice for GPUs without bf16: the trainer never trains in fp16 (no loss scaling), and a
    CPU has no fast fp16 kernels.

    Raises:
        RuntimeError: bitsandbytes is not installed.
    """
    import torch
    from transformers import BitsAndBytesConfig

    if importlib.util.find_spec("bitsandbytes") is None:
        raise RuntimeError("4-bit training needs the bitsandbytes package, which is not installed")
    return BitsAndBytesConfig(  # type: ignore[no-untyped-call]
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16 if bf16 else torch.float32,
    )


def quantized_share(model: Any) -> float:
    """The share of ``model``'s weights held in 4 bits (bitsandbytes' ``Linear4bit`` layers),
    by parameter count, from 0 (a model loaded in 16 or 32 bits, or one whose layers
    bitsandbytes does not quantize) to 1."""
    import bitsandbytes as bnb

    four_bit = sum(module.in_features * module.out_features for module in model.modules()
                   if isinstance(module, bnb.nn.Linear4bit))
    other = sum(param.numel() for param in model.parameters()
                if not isinstance(param, bnb.nn.Params4bit))
    return four_bit / (four_bit + other) if four_bit + other else 0.0


def ready_for_lora(model: Any, *, bf16: bool) -> Any:
    """``model``, loaded with :func:`bnb_config`, ready for a LoRA adapter on top.

    In fp32 (a machine without bf16 units), peft's ``prepare_model_for_kbit_training``
    casts what stayed in 16 bits to fp32, the dtype every layer then computes in; under
    bf16 autocast what stayed in 16 bits is left so (the cast would only cost memory: 2
    more bytes for each embedding, norm and output weight). Its other parts are done
    elsewhere: peft freezes the base under the adapter, and activation checkpointing is
    the training arguments' choice (on a GPU only).

    On the CPU the weights that stay in 16 or 32 bits are copied out of the checkpoint's
    memory map: left in it, they keep the whole file mapped, and with it the 16-bit
    weights that quantizing read (measured on a 152 M-parameter Llama: 553 MB against
    289 MB while training, docs/capacity.md); then what quantizing freed goes back to the
    system (:func:`_return_freed_memory`). On a GPU they were copied to the device.
    """
    import bitsandbytes as bnb

    if not bf16:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(  # type: ignore[no-untyped-call]
            model, use_gradient_checkpointing=False)
    on_cpu = False
    for param in model.parameters():
        if param.device.type == "cpu" and not isinstance(param, bnb.nn.Params4bit):
            param.data = param.data.clone()
            on_cpu = True
    if on_cpu:
        _return_freed_memory()
    return model


def _return_freed_memory() -> None:
    """Give what quantizing freed back to the system (glibc's ``malloc_trim``).

    Quantizing on the CPU makes and frees a copy of each weight in turn, from torch's
    threads; glibc keeps what they free in its per-thread arenas, so a trainer held 140 to
    440 MB after loading a 152 M-parameter Llama from one run to the next, against 110 MB
    once trimmed (docs/capacity.md). No library offers the call (torch's and Python's
    allocators do not trim glibc's arenas). Nothing where the C library lacks it (musl).
    """
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)
