"""Loading the model a TRL run trains: the weights and tokenizer, 4-bit quantization
(QLoRA, bitsandbytes) and the LoRA adapter's configuration (peft).

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _trl_attention as sequence_attention
from ._protocol import TrainerConfig
from ._trl_4bit import bnb_config, quantized_share, ready_for_lora

if TYPE_CHECKING:
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["MESSAGE_CHARS", "UserModelError", "drops_out", "is_users_model",
           "keeps_apart", "trains_in_bf16",
           "load_model", "lora_config", "quiet_libraries", "shortened", "use_padding_free"]


class UserModelError(ValueError):
    """The user's own model directory cannot be loaded; reported as a user error."""


MESSAGE_CHARS = 300
"""A library's error can run long (transformers lists every model type it knows)."""



def quiet_libraries() -> None:
    """Silence transformers' and datasets' progress bars and notices: the job's log is for
    the user, not for the libraries' authors (bitsandbytes' and ``kernels``' are silenced
    as the process starts: :func:`~alallo.trainers._env.quiet_process`)."""
    import transformers

    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    import datasets  # type: ignore[import-untyped]

    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()


def load_model(
    config: TrainerConfig, *, bf16: bool
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model and tokenizer at ``config.model``: NF4 4-bit weights for
    ``precision="4-bit"`` (:mod:`alallo.trainers._trl_4bit`), a bf16 frozen base under LoRA
    when ``bf16`` on a GPU; the tokenizer's pad token falls back to its end-of-sequence token.

    Raises:
        UserModelError: the user's own model directory cannot be loaded, or has no layer
            that 4-bit quantizes (a catalogue model's failure is the platform's, raised as
            the library raised it).
        RuntimeError: 4-bit without bitsandbytes installed.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cuda = torch.cuda.is_available()
    kwargs: dict[str, Any] = {}
    if config.precision == "4-bit":
        kwargs["quantization_config"] = bnb_config(bf16=bf16)
        if cuda:  # each torchrun rank on its own GPU (bitsandbytes' weights cannot move later)
            kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    if bf16 and config.adapter == "lora" and cuda:
        # On a GPU the frozen base can live in bf16 (half the memory); full fine-tuning,
        # and any run on the CPU, keep fp32 weights and train under bf16 autocast: a
        # bf16 base on the CPU saved little time and cost the tiny model what it learns.
        kwargs["dtype"] = torch.bfloat16
    try:
        model = AutoModelForCausalLM.from_pretrained(config.model, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(config.model)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # What transformers raises for a config, weights or tokenizer it cannot
        # read; torch's out-of-memory is a RuntimeError and stays alallo's.
        if not is_users_model(config):
            raise
        raise UserModelError(
            f"cannot load the model {config.model_name}: {shortened(str(exc))}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if config.precision == "4-bit":
        if quantized_share(model) == 0.0:
            # Trained at full precision while the job says 4-bit: refused, not pretended.
            raise UserModelError(
                f"the model {config.model_name} has no layer that bitsandbytes quantizes to "
                f'4-bit ({type(model).__name__}): train it with precision "16-bit"')
        model = ready_for_lora(model, bf16=bf16)
    return model, tokenizer


def with_starting_adapter(config: TrainerConfig, model: PreTrainedModel) -> Any:
    """``model`` with the adapter ``config.init_adapter`` applied (continued training): a
    LoRA job trains that adapter further (``PeftModel.from_pretrained(...,
    is_trainable=True)``); a full fine-tune starts from the adapter merged into the weights
    (``merge_and_unload``). ``model`` itself when there is none."""
    if config.init_adapter is None:
        return model
    from peft import PeftModel

    if config.adapter == "lora":
        return PeftModel.from_pretrained(model, config.init_adapter, is_trainable=True)
    merged = PeftModel.from_pretrained(model, config.init_adapter).merge_and_unload()
    merged.requires_grad_(True)  # peft froze the base weights; a full fine-tune trains them
    return merged


def is_users_model(config: TrainerConfig) -> bool:
    """The job names a model directory of the user's (an absolute path), not a catalogue model."""
    return Path(config.model_name).is_absolute()


def shortened(message: str) -> str:
    """``message`` on one line, cut to :data:`MESSAGE_CHARS` characters with an ellipsis."""
    first = " ".join(message.split())
    return first if len(first) <= MESSAGE_CHARS else first[: MESSAGE_CHARS - 1] + "…"


def trains_in_bf16(*, cuda: bool) -> bool:
    """Whether this machine trains faster in bf16 (mixed precision) than in fp32.

    On CUDA: when the GPU has bf16. On the CPU: when it has bf16 matrix
    instructions that oneDNN uses under torch's CPU autocast: AMX tiles (Intel
    Sapphire Rapids and later) or AVX-512 BF16 (AMD Zen 4 and later, Intel Cooper
    Lake). Measured (``bench/bench_throughput.py``, GPT-2 2 x 128, 2 cores):
    with AMX, LoRA 15,110 tokens/s in bf16 against 11,697 in fp32, full fine-tune
    14,719 against 11,131; on an AMD EPYC with AVX-512 BF16, plain TRL in bf16
    stepped 8,000-10,000 tokens/s against alallo's fp32 6,200-7,100. A CPU without
    them (AVX-512 alone, AVX2) stays in fp32, where bf16 autocast is emulated and
    several times slower.
    """
    import torch

    if cuda:
        return bool(torch.cuda.is_bf16_supported())
    units = [getattr(torch.cpu, name, None)  # torch >= 2.3
             for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
    return (any(unit is not None and unit() for unit in units)
            and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))


def lora_config(config: TrainerConfig, model: PreTrainedModel) -> LoraConfig:
    """A LoRA adapter of rank ``config.lora_rank``, with the job's alpha (default twice the
    rank) and dropout (default none), on the job's target modules, else on those peft knows
    for the architecture, else on every linear layer."""
    from peft import LoraConfig
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as KNOWN

    model_type = getattr(model.config, "model_type", None)
    # None lets peft pick its known modules for the architecture; GPT-2's
    # c_attn is a Conv1D, whose weight is stored transposed (fan_in_fan_out).
    targets: list[str] | str | None = config.lora_target_modules or (
        None if model_type in KNOWN else "all-linear")
    return LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha or 2 * config.lora_rank,
        lora_dropout=config.lora_dropout,
        target_modules=targets,
        fan_in_fan_out=model_type == "gpt2",
        task_type="CAUSAL_LM",
    )


_VARLEN_ATTENTION = frozenset({"flash_attention_2", "flash_attention_3"})


def _base_model(model: Any) -> Any:
    """The transformers model inside a PEFT model, or ``model`` itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def keeps_apart(model: Any) -> str | None:
    """How ``model`` keeps the sequences of a padding-free batch (several examples laid end
    to end in one row, each with its own ``position_ids`` from 0, no attention mask) from
    attending to each other, so that it computes what the padded batch computes: ``"varlen"``
    with flash-attention's variable-length kernels (TRL's documented case; each sequence
    costs its own length squared), ``"mask"`` with ``sdpa`` or ``eager`` attention in a model
    that builds its mask with transformers' ``create_causal_mask``, which finds the sequences
    from the position ids when no attention mask is given (transformers >= 5: GPT-2, Llama,
    Qwen, Mistral, Gemma...; the row's attention then costs its whole length squared);
    None when it does not."""
    base = _base_model(model)
    attention = getattr(base.config, "_attn_implementation", None)
    if attention in _VARLEN_ATTENTION:
        return "varlen"
    modeling = sys.modules.get(type(base).__module__)
    if attention in ("sdpa", "eager", sequence_attention.NAME) \
            and hasattr(modeling, "create_causal_mask"):
        return "mask"
    return None


def drops_out(model: Any) -> bool:
    """Whether training ``model`` (its adapter included) draws dropout masks: a dropout
    layer with p > 0, or an attention dropout in the config (Llama's ``attention_dropout``).
    GPT-2's configs have 0.1; Llama, Qwen, Mistral and Gemma train without."""
    import torch

    if any(isinstance(module, torch.nn.Dropout) and module.p > 0 for module in model.modules()):
        return True
    base = _base_model(model)
    return bool(getattr(base.config.get_text_config(), "attention_dropout", 0.0))


FIRST_LABELS = "alallo_first_labels"
"""A padding-free batch's count of the examples whose first token had a label: ``Trainer``
counts those in a padded batch's tokens (the loss's divisor) where its loss does not shift
the labels itself, though nothing predicts them; taken out before the model sees the batch."""


FULL_TOKEN_WEIGHT = 1.5
"""A token's cost in a full fine-tune against one with frozen weights, next to attention's
(forward + input and weight gradients, 3 units, against forward + input gradients, 2,
while attention's scores cost 3 units in both): see :func:`use_padding_free`."""


@dataclasses.dataclass
class _PaddingFree:
    """TRL's padding-free collator, which pads a batch instead when that costs fewer FLOPs
    (``per_token`` set: a masked row's attention grows with its whole length squared, a
    padded batch's with each row's). Per layer and per unit of width, a token costs
    ``per_token`` (the projections and the MLP, 12 x width, and a share of the LM head,
    vocabulary / layers) and each pair of tokens in a row 2 (scores and values)."""

    flat: Any
    padded: Any
    per_token: float | None

    def __call__(self, examples: list[dict[str, Any]]) -> Any:
        lengths = [len(example["input_ids"]) for example in examples]
        if self.per_token is not None:
            total, longest = sum(lengths), max(lengths)
            padded = len(lengths) * (longest * self.per_token + 2 * longest * longest)
            if total * self.per_token + 2 * total * total > padded:
                return self.padded(examples)
        batch = self.flat(examples)
        batch[FIRST_LABELS] = sum(example.get("labels", example["input_ids"])[0] != -100
                                  for example in examples)
        return batch


def _counted_as_padded(trainer: Any) -> None:
    """The loss's divisor of a padding-free batch as of the padded one (:data:`FIRST_LABELS`),
    so that the numbers trained and reported stay those of padded batches."""
    count, compute_loss = trainer._get_num_items_in_batch, trainer.compute_loss
    shifts = getattr(trainer, "_loss_shifts_labels", True)

    def num_items_in_batch(batch_samples: list[dict[str, Any]], device: Any) -> Any:
        items = count(batch_samples, device)
        first = sum(int(batch.get(FIRST_LABELS, 0)) for batch in batch_samples)
        return items + first if items is not None and not shifts else items

    def loss(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        inputs.pop(FIRST_LABELS, None)
        return compute_loss(model, inputs, *args, **kwargs)

    trainer._get_num_items_in_batch = num_items_in_batch
    trainer.compute_loss = loss


def use_padding_free(trainer: Any, model: Any, *, cuda: bool) -> bool:
    """Give an ``SFTTrainer`` padding-free batches where that trains exactly the tokens that
    padded ones train, faster: the examples of a batch laid end to end in one row, no pad
    token computed (TRL's ``padding_free``: position ids restart at 0 for each example, and
    the first token of each is no label, as after the padded batch's shift). The loss is
    divided by what the padded batch's is divided by (:data:`FIRST_LABELS`), so a job
    trains and reports the numbers it did with padded batches.

    Why not ``SFTConfig(padding_free=True)``: TRL then refuses ``max_length`` without
    packing, and packing changes what a step trains on (so the steps, and the price).
    Here TRL prepares the data as for padded batches (truncated to ``max_length``, loss
    masks as before) and only the collator changes. Only with batches of 2 or more, TRL's
    own collator (not a vision model's), a model without dropout (:func:`drops_out`: its
    random masks are drawn by the batch's shape, so another shape trains other numbers)
    and a model that :func:`keeps_apart` its sequences:
    on a GPU with flash-attention's kernels; on the CPU with SDPA each sequence attended on
    its own (:mod:`~alallo.trainers._trl_attention`: every batch flat), or with eager
    attention through the mask (in bf16 every batch, in fp32 the batches where that costs
    fewer FLOPs than padding; the others are padded as before). Returns whether it did.
    """
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    collator = trainer.data_collator
    how = keeps_apart(model)
    if (type(collator) is not DataCollatorForLanguageModeling or collator.padding_free
            or trainer.args.per_device_train_batch_size < 2 or how is None
            or (cuda and how != "varlen") or drops_out(trainer.model)):
        return False
    base, per_token = _base_model(model), None  # every batch flat
    if how == "mask" and sequence_attention.fits(base):
        # Each sequence attended on its own: no pad token, no pair across sequences, so
        # flat is the cheaper shape for every batch (bench/bench_throughput.py).
        sequence_attention.register()
        base.set_attn_implementation(sequence_attention.NAME)
    elif how == "mask" and not trainer.args.bf16:
        # In fp32 a flat row's masked attention (its whole length squared) can cost more
        # than padding. In bf16 (a CPU with bf16 units) every batch flat measured fastest:
        # 15,058 tokens/s for a full fine-tune against 12,941 choosing by FLOPs, and as
        # fast as TRL's own padding-free batches (bench/bench_throughput.py).
        text = base.config.get_text_config()
        per_token = 12 * text.hidden_size + text.vocab_size / max(1, text.num_hidden_layers)
        if base is model:
            # A full fine-tune also computes the weights' gradients: a token's backward pass
            # is twice its forward pass, as against once with the weights frozen (LoRA),
            # while attention's is twice in both (no weights): tokens weigh 3/2 as much.
            per_token *= FULL_TOKEN_WEIGHT
    trainer.data_collator = _PaddingFree(dataclasses.replace(collator, padding_free=True),
                                         collator, per_token)
    _counted_as_padded(trainer)
    return True
