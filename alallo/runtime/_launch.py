"""A trainer's run, from a job and its grant: the config file, the command, its environment.

Which program runs is decided here, and never by the account's word alone
(docs/security.md): the built-in trainers, a trainer the operator registered
(:mod:`alallo._trainer_registry`), or the account's own command, and that
only for an account allowed to send one (:func:`command_refusal`). On a
simulated node the simulated trainer runs whatever the job asked for; its
failure switches (:data:`alallo.jobs.FAILURE_SWITCHES`), which make the
platform fail on purpose, are for the same trusted accounts only.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from pydantic import SecretStr

from .._errors import InvalidRequest
from .._trainer_registry import TrainerRegistry
from ..capacity import Catalogue, CatalogueModel, Grant, Placement
from ..executors import Launch, TrainerUser
from ..jobs import CommandTrainer, Job, NamedTrainer, SimulatedTrainer
from ..settings import Settings
from ..trainers import JudgeModel, TrainerConfig, WandbConfig
from ..trainers._pause import PAUSE_FILE, PAUSE_FILE_ENV

__all__ = ["COMMANDS_NOT_ALLOWED", "FAILURE_SWITCH_NOT_ALLOWED", "KEPT_CHECKPOINTS",
           "MODEL_PATHS_NOT_ALLOWED", "command_refusal", "failure_switch_refusal", "launch",
           "model_refusal", "prune_checkpoints", "trainer_command", "trainer_config", "trainer_env",
           "users_own_command"]

KEPT_CHECKPOINTS = 3
"""A job's newest checkpoints the server keeps (OpenAI keeps the last 3): each is a checkpoint
model (:mod:`alallo.runtime._checkpoint_models`); older ones are deleted."""

COMMANDS_NOT_ALLOWED = (
    "this account may not run a command of its own on the server: the operator registers "
    "trainers (GET /v1/trainers lists them) and a job picks one by name, "
    '"trainer": {"name": "..."}')
"""Why a ``trainer.command`` is refused (403, ``param="trainer.command"``)."""

MODEL_PATHS_NOT_ALLOWED = (
    "this account may not train a directory of the server's: name a model that "
    "GET /v1/models lists (the operator adds models)")
"""Why a ``model`` given as a path is refused (403, ``param="model"``): the server's files,
another account's fine-tuned models among them, are not a tenant's to read."""


FAILURE_SWITCH_NOT_ALLOWED = (
    "{switch} makes the simulated trainer fail on purpose, a drill of the operator's "
    "(it fails the run as the platform's fault, or re-schedules the job): this account may "
    "not set it. The simulated trainer's pace (step_delay_s, step_noise, slow_step_every, "
    "slow_step_factor) is anyone's to set")
"""Why a simulated trainer's failure switch is refused (403, ``param="trainer.<switch>"``):
only the accounts that may send commands (the local account and ``--allow-commands`` ones)
may set one (docs/security.md)."""


def users_own_command(job: Job) -> bool:
    """Whether the job runs a command the account sent (its failures are the user's)."""
    return isinstance(job.spec.trainer, CommandTrainer)


def command_refusal(trainer: object, *, allow_commands: bool) -> str | None:
    """Why a job's trainer may not run for its account, or None when it may: a command of
    its own, or a simulated trainer's failure switch (:func:`failure_switch_refusal`), from
    an account the operator does not trust with the server."""
    if isinstance(trainer, CommandTrainer) and not allow_commands:
        return COMMANDS_NOT_ALLOWED
    switch = failure_switch_refusal(trainer, allow_commands=allow_commands)
    return switch[1] if switch else None


def failure_switch_refusal(trainer: object, *, allow_commands: bool) -> tuple[str, str] | None:
    """The failure switch (:data:`alallo.jobs.FAILURE_SWITCHES`) a simulated trainer sets
    that its account may not, as ``(param, why)``; None when it sets none or may."""
    if allow_commands or not isinstance(trainer, SimulatedTrainer):
        return None
    switch = trainer.failure_switch()
    if switch is None:
        return None
    return f"trainer.{switch}", FAILURE_SWITCH_NOT_ALLOWED.format(switch=switch)


def model_refusal(model: str, *, allow_commands: bool) -> str | None:
    """Why a job's model may not be read for its account, or None when it may.

    A model named by its absolute path is a directory of the server: only the accounts the
    operator trusts with the server (those that may run commands: the local account and
    ``--allow-commands`` ones) may name one. Decided from the name alone, before anything
    looks at the path, so the answer says nothing of what exists there.
    """
    if Path(model).is_absolute() and not allow_commands:
        return MODEL_PATHS_NOT_ALLOWED
    return None


def trainer_config(job: Job, grant: Grant, *, settings: Settings, catalogue: Catalogue,
                   workdir: Path, run_dir: Path, resume_from: str | None, training_file: str,
                   data_format: str, validation: tuple[str, str] | None = None,
                   fenced: bool = False,
                   judges: dict[str, JudgeModel] | None = None) -> TrainerConfig:
    """The config file's contents for one run of the job (``docs/trainer-protocol.md``).

    Args:
        workdir: the job's directory (absolute); the model goes below it.
        run_dir: this run's directory (``attempt-<n>`` in ``workdir``): its checkpoints go
            there, so that a run that outlives its end never writes into another's.
        fenced: the run may outlive its end (a Ray node cut off): the trainer then deletes
            no checkpoint (:func:`prune_checkpoints` does, on the server).
        resume_from: the local checkpoint directory to continue from, or None.
        training_file: the local path of the training file.
        data_format: the training file's format, as checked on upload.
        validation: the validation file's local path and format, or None.
        judges: the models of the job's ``score_model`` graders, by name.
    """
    spec = job.spec
    hp = job.resolved_hyperparameters()
    trainer = spec.trainer
    base = job.base_model  # under a fine-tuned model or checkpoint it continues
    model = _pinned(catalogue, base, job.model_revision)
    model_dir: str | Path = (model.local_path
                             or settings.models_dir.resolve() / base.replace("/", "--"))
    if model.on_hub:  # the trainer downloads it: its repo id, at the pinned revision
        model_dir = base.partition("@")[0]
    start = job.init_from
    if start is not None and start.kind == "full":
        model_dir = Path(start.path)  # whole weights: they are the model it loads
    wandb = None
    if spec.integrations:
        w = spec.integrations[0].wandb
        wandb = WandbConfig(project=w.project, api_key=w.api_key or "", name=w.name or job.id,
                            entity=w.entity, tags=w.tags, mode=settings.wandb_mode,
                            base_url=settings.wandb_base_url, dir=str(workdir / "wandb"))
    simulated = trainer if isinstance(trainer, SimulatedTrainer) else None
    if simulated is None and grant.placement.simulated:
        # Simulated nodes run the simulated trainer at the plan's pace (time-scaled).
        simulated = SimulatedTrainer(
            step_delay_s=grant.plan.step_time_s / settings.simulation_time_scale)
    return TrainerConfig(
        job_id=job.id,
        model=str(model_dir),
        model_name=base,
        hub_revision=model.revision if model.on_hub else None,
        init_adapter=start.path if start is not None and start.kind == "adapter" else None,
        training_file=training_file,
        data_format=data_format,  # type: ignore[arg-type]
        validation_file=validation[0] if validation else None,
        validation_format=validation[1] if validation else None,  # type: ignore[arg-type]
        eval_steps=hp.get("eval_steps"),
        early_stopping_patience=spec.early_stopping.patience if spec.early_stopping else None,
        early_stopping_min_delta=spec.early_stopping.min_delta if spec.early_stopping else 0.0,
        output_dir=str(workdir / "model"),
        checkpoint_dir=str(run_dir / "checkpoints"),
        keep_checkpoints=None if fenced else KEPT_CHECKPOINTS,
        resume_from=resume_from,
        adapter=spec.adapter,
        precision=spec.precision,
        max_steps=job.max_steps,
        n_epochs=hp["n_epochs"],
        batch_size=hp["batch_size"],
        learning_rate=hp["learning_rate"],
        lora_rank=hp["lora_rank"] or 8,
        lora_alpha=hp.get("lora_alpha"),
        lora_dropout=hp.get("lora_dropout", 0.0),
        lora_target_modules=hp.get("lora_target_modules"),
        warmup_ratio=hp["warmup_ratio"],
        weight_decay=hp["weight_decay"],
        logging_steps=hp["logging_steps"],
        method=spec.method,
        beta=hp.get("beta", 0.1),
        grader=spec.grader.model_dump(exclude_none=True) if spec.grader else None,
        judges=judges or {},
        num_generations=hp.get("num_generations", 4),
        max_completion_length=hp.get("max_completion_tokens", 128),
        eval_samples=hp.get("eval_samples", 1),
        seed=spec.seed or 0,
        step_delay_s=simulated.step_delay_s if simulated else 0.0,
        fail_at_step=simulated.fail_at_step if simulated else None,
        memory_gb=grant.plan.memory_gb if simulated and grant.placement.simulated else None,
        memory_surprise=(simulated.memory_surprise
                         if simulated and job.memory_factor == 1.0 else 1.0),
        step_noise=simulated.step_noise if simulated else 0.0,
        slow_step_every=simulated.slow_step_every if simulated else None,
        slow_step_factor=simulated.slow_step_factor if simulated else 10.0,
        wandb=wandb,
    )


def _pinned(catalogue: Catalogue, name: str, revision: str | None) -> CatalogueModel:
    """The model ``name`` at the revision the job resolved at creation: from the cache when
    it is there, else to download from the hub at that revision (the trainer does)."""
    if not revision or "@" in name:
        return catalogue.resolve(name)
    try:
        return catalogue.resolve(f"{name}@{revision}")
    except InvalidRequest:
        return CatalogueModel(id=name, parameters=0, context_length=0, revision=revision,
                              on_hub=True)


def prune_checkpoints(workdir: Path, newest: str) -> None:
    """Delete the job's checkpoints (of every run) but the :data:`KEPT_CHECKPOINTS` newest up
    to ``newest``, the one just recorded (which the job resumes from). Newer ones are left
    alone: the trainer may be writing one that it has not reported yet. Blocking (run it in
    a thread)."""
    top = _step(Path(newest))
    if top is None:
        return
    saved = sorted(((step, path) for path in workdir.glob("attempt-*/checkpoints/checkpoint-*")
                    if (step := _step(path)) is not None and step <= top),
                   key=lambda found: (found[0], str(found[1])), reverse=True)
    kept = {str(path) for _, path in saved[:KEPT_CHECKPOINTS]} | {newest}
    for _, path in saved:
        if str(path) not in kept:
            shutil.rmtree(path, ignore_errors=True)


def _step(path: Path) -> int | None:
    suffix = path.name.removeprefix("checkpoint-")
    return int(suffix) if suffix.isdigit() else None


def trainer_command(job: Job, grant: Grant, config_path: Path, *, python: str,
                    registry: TrainerRegistry) -> list[str]:
    """The argv of the job's trainer: ``<command> <config.json>``; the built-in trainer
    under ``torchrun`` (``python -m torch.distributed.run --nproc-per-node D --standalone``)
    when the placement has D > 1 devices. A registered trainer gets every device of its
    placement in ``CUDA_VISIBLE_DEVICES`` and starts its own ranks.

    Raises:
        InvalidRequest: the job names a trainer that is no longer registered.
    """
    trainer = job.spec.trainer
    if not grant.placement.simulated:
        if isinstance(trainer, CommandTrainer):
            return [*trainer.command, str(config_path)]
        if isinstance(trainer, NamedTrainer):
            return [*registry.command(trainer.name), str(config_path)]
    simulated = isinstance(trainer, SimulatedTrainer) or grant.placement.simulated
    module = "simulated" if simulated else "trl"
    if not simulated and grant.placement.devices > 1:
        # One rank per device; rank 0 speaks the protocol, a rank's crash ends them all.
        return [python, "-m", "torch.distributed.run", "--nproc-per-node",
                str(grant.placement.devices), "--standalone", "-m", f"alallo.trainers.{module}",
                str(config_path)]
    return [python, "-m", f"alallo.trainers.{module}", str(config_path)]


def launch(job: Job, placement: Placement, command: list[str], run_dir: Path,
           user: TrainerUser | None, hf_token: SecretStr | None = None) -> Launch:
    """What the executor needs to run the job's next attempt in ``run_dir``. The run's id is
    new each time (``<job>-attempt-<n>-<6 hex>``): a start repeated after a crash of this
    server is another run, and fences the one before. The operator's Hugging Face token
    (``hf_token``) goes to the built-in trainer only, as ``HF_TOKEN``: never to a trainer
    of the operator's registry or of the account's own (docs/security.md). Every trainer
    gets ``ALALLO_PAUSE_FILE``, the pause file of its run (:mod:`alallo.trainers._pause`)."""
    env = trainer_env(run_dir, user, placement)
    env[PAUSE_FILE_ENV] = str(run_dir / PAUSE_FILE)
    if hf_token is not None and job.spec.trainer == "trl":
        env["HF_TOKEN"] = hf_token.get_secret_value()
    return Launch(command, cwd=run_dir, output_log=run_dir / "trainer-output.log",
                  run_id=f"{job.id}-attempt-{job.attempt + 1}-{secrets.token_hex(3)}",
                  node=placement.node,
                  device_type=placement.device_type, devices=placement.devices,
                  device_indices=placement.device_indices, env=env)


def trainer_env(run_dir: Path, user: TrainerUser | None,
                placement: Placement | None = None) -> dict[str, str]:
    """The job's own variables on top of the scrubbed environment.

    A trainer running as another user gets its run's directory as ``HOME`` (the
    server's is not its). On a GPU node, ``CUDA_VISIBLE_DEVICES`` names the GPUs the
    scheduler gave the job (NVML's numbering: ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), so two
    jobs never share one; on the CPU node it is empty: a CPU job uses no GPU, and is
    billed as the CPU it ran on. A simulated node's trainer gets neither.
    """
    env = {"HOME": str(run_dir)} if user is not None else {}
    if placement is not None and not placement.simulated:
        gpu = placement.device_type != "cpu"
        env["CUDA_VISIBLE_DEVICES"] = (",".join(map(str, placement.device_indices))
                                       if gpu else "")
        if gpu:
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env
