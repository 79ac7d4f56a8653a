"""The real trainer: supervised fine-tuning with TRL's ``SFTTrainer``.

``python -m alallo.trainers.trl CONFIG.json`` fine-tunes the local model
``config.model`` on ``config.training_file`` and speaks the trainer protocol
(:mod:`alallo.trainers._protocol`) on stdout. When ``model_name`` is
``alallo/tiny-gpt2`` and ``config.model`` does not exist yet, the trainer
builds it there first (:func:`alallo.trainers.tiny.build_tiny`). Then:

1. ``Log`` + ``Stage(model_loaded)`` (hash: the model's ``config.json``),
   ``Stage(data_loaded)`` (hash: the training file), ``Stage(validation_loaded)``
   with a validation file, a ``Log`` naming the examples cut to the model's context
   (``max_seq_length``, by default the context), ``Stage(training_start)``;
2. one ``Progress`` per optimizer step, carrying the loss (the mean since the
   previous report, as ``Trainer`` logs it) every ``logging_steps`` and at the
   last step, each with a ``Metrics`` line (loss, mean token accuracy, learning
   rate, gradient norm, tokens/s) and a ``Step N/M: loss X`` log line; with a
   validation file, an evaluation on all of it every ``eval_steps`` (default: at
   each checkpoint) and at the last step: a ``Metrics`` line (``valid_loss``,
   ``valid_mean_token_accuracy``) and a ``Step N/M: validation loss X`` line; at
   the end, the model's figures again as ``full_valid_*``. With early stopping
   (transformers' ``EarlyStoppingCallback``) a checkpoint is saved at each
   evaluation, and the model saved is the best one;
3. a ``Checkpoint`` per ``Trainer`` checkpoint (``checkpoint_dir/checkpoint-<step>``,
   every ``save_steps`` and at the last step; the newest three are kept), its
   hash a digest of its files but the optimizer, scheduler and RNG state;
4. the model saved to ``output_dir`` (LoRA: the adapter; full: the whole
   model; both with the tokenizer), then ``Done`` (with ``stopped_at`` and
   ``best_step`` when it stopped early) and exit 0.

What the user gave is the user's to fix: a bad data line, an example that
cannot train within the model's context (its prompt fills it: TRL would drop it,
and a dataset it empties fails in torch's sampler; :mod:`~alallo.trainers._trl_fit`
names the line), an impossible setting, or their own model (an absolute path, not a
catalogue name) that has no ``config.json`` or that transformers cannot load, each end with
``Error(kind="user")``, so the job fails at once with "Training failed: ..."
and is not restarted. Anything else, alallo's own models included (a
catalogue model that does not load is alallo's fault), and out of memory,
ends with ``Error(kind="platform")`` and a traceback on stderr; both exit 1.

Under ``torchrun`` (a plan of several devices, docs/clusters.md) every rank trains
with DDP (``gloo`` on the CPU), the job's batch shared among them; rank 0 alone
speaks the protocol (:mod:`alallo.trainers._ranks`).

LoRA targets GPT-2's ``c_attn``, peft's known modules for the other
architectures peft knows, and every linear layer otherwise. ``4-bit`` is
QLoRA through bitsandbytes, on CUDA or on the CPU (NF4 weights,
:mod:`alallo.trainers._trl_4bit`). Training runs in bf16 (mixed
precision) where the machine has bf16 units: a GPU that supports it, a CPU with
AMX or AVX-512 BF16 (:func:`~alallo.trainers._trl_model.trains_in_bf16`); elsewhere in
fp32. On the CPU a batch's examples are laid end to end in one row and each is attended
on its own (:func:`~alallo.trainers._trl_model.use_padding_free`).

Start-up is dominated by importing torch, transformers, peft and TRL (about
6 s on a CPU machine): the data file is read and checked first, with the
standard library only, so a bad file fails in well under a second. The
runtime skips that cost: it forks this trainer from a warm process that has
imported those libraries once, and calls :func:`main` there
(:mod:`alallo.executors._warm_process`). Each run is a fresh fork, so nothing one
run changes is seen by the next; what must hold is that importing this module
initialises no CUDA (a CUDA context does not survive a fork).
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._data import UserDataError, file_hash, read_numbered_rows
from ._encoders import CHAT_FORMATS
from ._env import quiet_process
from ._fence import exit_if_superseded
from ._protocol import Done, Error, Log, Stage, TrainerConfig
from ._ranks import die_with_launcher, rank, world_size
from ._trl_4bit import quantized_share
from ._trl_fit import check_fit, check_kept, numbered, sequence_length
from ._trl_model import (
    UserModelError,
    is_users_model,
    load_model,
    lora_config,
    quiet_libraries,
    shortened,
    trains_in_bf16,
    with_starting_adapter,
)
from ._trl_methods import evaluation_args, method_trainer
from ._trl_rft import prompts_dataset
from ._trl_report import ProtocolOut, checkpoint_step, model_hash, progress_callback
from ._wandb import WandbFailed, WandbRun, start_wandb
from .tiny import TINY_MODELS, build_tiny

if TYPE_CHECKING:
    from datasets import Dataset  # type: ignore[import-untyped]
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["build_trainer", "choose_threads", "main"]

_ONE_THREAD_BELOW_PARAMS = 10_000_000


class _SettingsError(ValueError):
    """A setting this trainer cannot honour here; reported as a user error."""


def main(argv: list[str] | None = None) -> int:
    """Train as the config file ``argv[0]`` says; return the exit code.

    Returns:
        0 after a ``done`` line; 1 after an ``error`` line; 2 when the
        command line is wrong (a message goes to stderr).
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m alallo.trainers.trl CONFIG.json", file=sys.stderr)
        return 2
    quiet_process()
    # The libraries' deprecation notices speak to this code's author, not to
    # the user who reads the job's log.
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    die_with_launcher()
    with ProtocolOut(silent=rank() != 0) as out:
        try:
            config = TrainerConfig.model_validate_json(Path(args[0]).read_bytes())
            _train(config, out)
        except WandbFailed:
            return 1
        except (UserDataError, _SettingsError, UserModelError) as exc:
            out(Error(kind="user", message=str(exc)))
            return 1
        except ValidationError as exc:
            out(Error(kind="user", message=_config_problem(exc)))
            return 1
        except Exception as exc:
            traceback.print_exc()
            out(Error(kind="platform", message=_platform_message(exc)))
            return 1
    return 0


def _config_problem(exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'config'}: {error['msg']}"
        for error in exc.errors()
    )
    return f"invalid trainer config: {problems}"


def _platform_message(exc: Exception) -> str:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.OutOfMemoryError):
        return f"out of memory: {exc} (a smaller batch_size or max_seq_length needs less)"
    return f"{type(exc).__name__}: {exc}"


def _train(config: TrainerConfig, out: ProtocolOut) -> None:
    if config.hub_revision is not None:  # a hub model: downloaded first, once per machine
        from ._hub import download_hub_model

        config = config.model_copy(update={"model": str(download_hub_model(config, out))})
    model_dir = Path(config.model)
    if config.precision == "4-bit" and config.adapter != "lora":
        raise _SettingsError('precision "4-bit" needs adapter "lora" (QLoRA), got "full"')
    data_file = Path(config.training_file)
    rows = read_numbered_rows(data_file, config.data_format)
    validation_format = config.validation_format or config.data_format
    validation_rows = (read_numbered_rows(Path(config.validation_file), validation_format)
                       if config.validation_file else None)
    resume_step = checkpoint_step(Path(config.resume_from)) if config.resume_from else None

    if not (model_dir / "config.json").is_file():
        if is_users_model(config):
            raise UserModelError(f"the model directory {model_dir} has no config.json")
        if config.model_name not in TINY_MODELS:
            raise RuntimeError(f"model directory {model_dir} has no config.json")
        # The built-in model is built on first use, by whichever trainer
        # needs it first (build_tiny is safe to race).
        out(Log(text=f"Building model {config.model_name}"))
        build_tiny(config.model_name, model_dir)
    out(Log(text=f"Loading model {config.model_name}"
                 + (" in 4-bit (NF4, QLoRA)" if config.precision == "4-bit" else "")))
    import torch

    cuda = torch.cuda.is_available()
    bf16 = trains_in_bf16(cuda=cuda)
    quiet_libraries()
    model, tokenizer = load_model(config, bf16=bf16)
    if config.precision == "4-bit":
        out(Log(text=f"Quantized {quantized_share(model):.0%} of the model's weights to 4-bit; "
                     "the embeddings, norms and output layer keep their precision"))
    if config.init_adapter is not None:
        out(Log(text=f"Starting from the adapter at {config.init_adapter}"
                     + (", merged into the model" if config.adapter == "full" else "")))
        model = with_starting_adapter(config, model)
    choose_threads(model, cuda=cuda)
    out(Stage(stage="model_loaded", hash=file_hash(model_dir / "config.json")))
    if {config.data_format, validation_format} & CHAT_FORMATS and not tokenizer.chat_template:
        raise _SettingsError(
            f"model {config.model_name} has no chat template, so it cannot train on "
            f'{config.data_format} data: use the "text" or "prompt_completion" format'
            + (' (for DPO, "prompt", "chosen" and "rejected")'
               if config.data_format == "preference" else ""))

    as_dataset = prompts_dataset if config.method == "reinforcement" else numbered
    dataset = as_dataset(rows)
    out(Log(text=f"Loaded {len(rows)} training "
                 + ("prompts" if config.method == "reinforcement" else "examples")))
    out(Stage(stage="data_loaded", hash=file_hash(data_file)))
    eval_dataset = None
    if validation_rows is not None and config.validation_file:
        eval_dataset = as_dataset(validation_rows)
        out(Log(text=f"Loaded {len(validation_rows)} validation "
                     + ("prompts" if config.method == "reinforcement" else "examples")))
        out(Stage(stage="validation_loaded", hash=file_hash(Path(config.validation_file))))

    max_length = sequence_length(config, model, out)
    longest = check_fit(rows, config.data_format, tokenizer, max_length, out,
                        model_name=config.model_name)
    if validation_rows is not None:
        longest = max(longest, check_fit(validation_rows, validation_format, tokenizer,
                                         max_length, out, model_name=config.model_name,
                                         validation=True))
    run = start_wandb(config.wandb, out) if config.wandb and rank() == 0 else None
    if world_size() > 1:
        out(Log(text=f"Distributed training: world size {world_size()}, "
                     f"backend {'nccl' if cuda else 'gloo'}"))
    trainer = build_trainer(
        config, model, tokenizer, (dataset, eval_dataset), out, run,
        max_length=max_length, cuda=cuda, bf16=bf16, longest_prompt=longest,
    )
    check_kept(trainer.train_dataset, [line for line, _ in rows], max_length)
    if validation_rows is not None:
        check_kept(trainer.eval_dataset, [line for line, _ in validation_rows], max_length,
                   validation=True)

    if resume_step is not None:
        out(Log(text=f"Resuming from checkpoint at step {resume_step}"))
    out(Stage(stage="training_start"))
    trainer.train(resume_from_checkpoint=config.resume_from)
    if run is not None:
        run.finish()
    if any(getattr(c, "paused", False) for c in trainer.callback_handler.callbacks):
        out(Log(text=f"Paused at step {trainer.state.global_step}: the job resumes from this "
                     "checkpoint"))
        return  # a pause (alallo.trainers._pause): the checkpoint is saved, no model
    exit_if_superseded()
    trainer.save_model(config.output_dir)  # the best checkpoint's, when it stopped early
    if rank() != 0:
        return  # rank 0 may still be writing the model: only it hashes and reports it
    state = trainer.state
    early = config.early_stopping_patience is not None and state.global_step < config.max_steps
    best = state.best_global_step if early else None
    out(Log(text=f"Training stopped early at step {state.global_step}: the validation loss "
                 f"did not improve for {config.early_stopping_patience} evaluations; the "
                 f"model is the checkpoint of step {best}" if early else "Training complete"))
    out(Done(model_path=config.output_dir, hash=model_hash(Path(config.output_dir)),
             stopped_at=state.global_step if early else None, best_step=best))


def choose_threads(model: PreTrainedModel, *, cuda: bool) -> None:
    """On the CPU, one torch thread for a model under 10 M parameters (unless
    ``OMP_NUM_THREADS`` says otherwise): a small model's matrices are too small to split;
    measured on the tiny model, 1 thread steps as fast as 2 when the cores are idle and
    several times faster when other processes share them."""
    if not cuda and "OMP_NUM_THREADS" not in os.environ:
        if model.num_parameters() < _ONE_THREAD_BELOW_PARAMS:
            import torch

            torch.set_num_threads(1)


def build_trainer(
    config: TrainerConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    datasets: tuple[Dataset, Dataset | None],
    out: ProtocolOut,
    run: WandbRun | None,
    *,
    max_length: int,
    cuda: bool,
    bf16: bool,
    longest_prompt: int = 0,
) -> Any:
    """TRL's trainer for the job's method (:func:`~alallo.trainers._trl_methods.method_trainer`),
    with the job's settings and alallo's own (:mod:`alallo.trainers._trl_model`), its progress
    callback writing protocol lines to ``out``; ``longest_prompt``: the most tokens of a
    reinforcement prompt (its answers get what is left of ``max_length``).

    Raises:
        _SettingsError: LoRA target modules the model does not have.
    """
    from transformers import PrinterCallback, set_seed

    dataset, eval_dataset = datasets
    common: dict[str, Any] = dict(
        output_dir=config.checkpoint_dir,
        max_steps=config.max_steps,
        # Under torchrun the job's batch is shared by its ranks: the same steps, each
        # rank a share of every batch (the plan's step time counts on it).
        per_device_train_batch_size=max(1, config.batch_size // world_size()),
        gradient_accumulation_steps=1,
        learning_rate=config.learning_rate,
        warmup_steps=config.warmup_ratio,  # transformers 5: a float below 1 is a ratio
        weight_decay=config.weight_decay,
        logging_strategy="steps",
        logging_steps=config.logging_steps,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.keep_checkpoints,
        seed=config.seed,
        use_cpu=not cuda,
        ddp_backend=None if cuda or world_size() == 1 else "gloo",
        ddp_find_unused_parameters=False if world_size() > 1 else None,
        bf16=bf16,
        fp16=False,
        # TRL turns it on by default; it saves GPU memory at ~20% speed, and
        # only costs time on a CPU. (transformers 5 renamed it from
        # gradient_checkpointing, which now warns.)
        activation_checkpointing=cuda,
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        dataloader_pin_memory=cuda,
        max_length=max_length,
    ) | evaluation_args(config, evaluates=eval_dataset is not None)
    # An adapter continued from an earlier job is on the model already (with_starting_adapter).
    fresh_adapter = config.adapter == "lora" and config.init_adapter is None
    peft_config = lora_config(config, model) if fresh_adapter else None
    callbacks = [progress_callback(out, run, evaluates=eval_dataset is not None)]
    if config.early_stopping_patience is not None and eval_dataset is not None:
        from transformers import EarlyStoppingCallback

        callbacks.append(EarlyStoppingCallback(config.early_stopping_patience,
                                               config.early_stopping_min_delta))
    set_seed(config.seed)  # before peft draws a fresh adapter's weights: same seed, same numbers
    try:
        trainer = method_trainer(config, model, tokenizer, (dataset, eval_dataset), common,
                                 peft_config, callbacks, out, longest_prompt=longest_prompt)
    except ValueError as exc:  # peft: "Target modules {...} not found in the base model"
        if config.lora_target_modules and "target modules" in str(exc).lower():
            raise _SettingsError(f"lora_target_modules {config.lora_target_modules}: "
                                 f"{shortened(str(exc))}") from exc
        raise
    trainer.remove_callback(PrinterCallback)
    return trainer


if __name__ == "__main__":
    _code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Tearing torch, transformers and datasets down at interpreter exit takes
    # over a second; by now every file is written and closed, and the streams
    # are flushed, so skip it.
    os._exit(_code)
