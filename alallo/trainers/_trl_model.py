"""Loading the model a TRL run trains: the weights and tokenizer, 4-bit quantization
(QLoRA, bitsandbytes) and the LoRA adapter's configuration (peft).

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._protocol import TrainerConfig

if TYPE_CHECKING:
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["MESSAGE_CHARS", "UserModelError", "bnb_config", "is_users_model", "load_model",
           "lora_config", "quiet_libraries", "shortened"]


class UserModelError(ValueError):
    """The user's own model directory cannot be loaded; reported as a user error."""


MESSAGE_CHARS = 300
"""A library's error can run long (transformers lists every model type it knows)."""



def quiet_libraries() -> None:
    """Silence transformers' and datasets' progress bars and notices: the job's log is for
    the user, not for the libraries' authors."""
    import transformers

    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    import datasets  # type: ignore[import-untyped]

    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()


def load_model(
    config: TrainerConfig, *, bf16: bool
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model and tokenizer at ``config.model``: 4-bit (NF4, double quantization) for
    ``precision="4-bit"``, a bf16 frozen base under LoRA when ``bf16``; the tokenizer's pad
    token falls back to its end-of-sequence token.

    Raises:
        UserModelError: the user's own model directory cannot be loaded (a catalogue model's
            failure is the platform's, raised as the library raised it).
        RuntimeError: 4-bit without bitsandbytes installed.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {}
    if config.precision == "4-bit":
        kwargs["quantization_config"] = bnb_config(bf16=bf16)
        kwargs["device_map"] = {"": 0}
    if bf16 and config.adapter == "lora":
        # The frozen base can live in bf16; full fine-tuning keeps fp32
        # master weights and trains under bf16 autocast instead.
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
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(  # type: ignore[no-untyped-call]
            model, use_gradient_checkpointing=True
        )
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


def bnb_config(*, bf16: bool) -> Any:
    """QLoRA's quantization (Dettmers et al. 2023): NF4 weights, double quantization,
    computing in bf16 where the GPU has it, else fp16.

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
        bnb_4bit_compute_dtype=torch.bfloat16 if bf16 else torch.float16,
    )


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
