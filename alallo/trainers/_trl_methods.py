"""Which TRL trainer a job's method runs, with its settings: ``SFTTrainer`` (supervised),
``DPOTrainer`` (dpo) or ``GRPOTrainer`` (reinforcement, :mod:`alallo.trainers._trl_rft`), and
the ``TrainingArguments`` of evaluation.

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only.
"""

from __future__ import annotations

from typing import Any

from ._protocol import TrainerConfig
from ._ranks import world_size
from ._trl_model import use_padding_free
from ._trl_report import ProtocolOut
from ._trl_rft import grpo_trainer

__all__ = ["evaluation_args", "method_trainer"]


def evaluation_args(config: TrainerConfig, *, evaluates: bool) -> dict[str, Any]:
    """``TrainingArguments`` of evaluation: every ``eval_steps`` (default: at every
    checkpoint) on the whole validation file; with early stopping, a checkpoint at every
    evaluation, and the best one (lowest validation loss) loaded at the end."""
    if not evaluates:
        return {"eval_strategy": "no"}
    every = config.eval_steps or config.save_steps
    args: dict[str, Any] = {"eval_strategy": "steps", "eval_steps": every,
                            "per_device_eval_batch_size": max(1, config.batch_size // world_size())}
    if config.early_stopping_patience is not None:
        args |= {"save_steps": every, "load_best_model_at_end": True,
                 "metric_for_best_model": "eval_loss", "greater_is_better": False,
                 "restore_callback_states_from_checkpoint": True}
    return args


def method_trainer(config: TrainerConfig, model: Any, tokenizer: Any,
                   datasets: tuple[Any, Any], common: dict[str, Any], peft_config: Any,
                   callbacks: list[Any], out: ProtocolOut, *, longest_prompt: int = 0) -> Any:
    """TRL's trainer for the job's method: ``GRPOTrainer``, ``DPOTrainer`` or
    ``SFTTrainer``, with ``common`` (the ``TrainingArguments`` all share) and the method's
    own settings."""
    dataset, eval_dataset = datasets
    if config.method == "reinforcement":
        return grpo_trainer(config, model, tokenizer, datasets, common, peft_config,
                            callbacks, out, longest_prompt=longest_prompt,
                            max_length=common["max_length"])
    if config.method == "dpo":
        # DPO (Rafailov et al. 2023) on preference pairs. The reference model is the
        # starting one: under LoRA, the model with its adapter turned off (no copy); for
        # full training, TRL keeps a frozen copy.
        from trl.trainer.dpo_config import DPOConfig
        from trl.trainer.dpo_trainer import DPOTrainer

        return DPOTrainer(model=model, args=DPOConfig(**common, beta=config.beta),
                          train_dataset=dataset, eval_dataset=eval_dataset,
                          processing_class=tokenizer,
                          peft_config=peft_config, callbacks=callbacks)
    from trl.trainer.sft_config import SFTConfig
    from trl.trainer.sft_trainer import SFTTrainer

    trainer = SFTTrainer(
        model=model, train_dataset=dataset, eval_dataset=eval_dataset,
        processing_class=tokenizer, args=SFTConfig(**common, dataset_text_field="text", packing=False),
        peft_config=peft_config, callbacks=callbacks)
    # The same examples per step, no pad tokens computed.
    use_padding_free(trainer, model, cuda=not common["use_cpu"])
    return trainer
