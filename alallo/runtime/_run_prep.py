"""Everything a run of a job needs before its trainer starts, for the job actor: the account
still allowed what the job asks, its data files on this machine, the run's directory, the
checkpoint it resumes from, the config file and the command.

What fails here fails the run, never the actor (issue 14): the answer is then the
trainer protocol's ``error`` line the run reports, a user's or a platform's error.

Where trainers run as another user (a root server), that user reaches neither the uploads
nor other jobs' directories (:mod:`alallo.runtime._trainer_access`): the job's training and
validation files, and the model or checkpoint of another job of the account it starts from,
are hard-linked into its directory (``inputs/``, the server's, as the files linked: the
trainer reads them and changes nothing of the originals; copies where they are on another
file system), each readable by that user (an ACL entry), and the config names them there.
A model folder of the server's it starts from (the built-in model, one the operator names by
its path) is opened to that user where it is, for reading: a way to it and each file in it
(a file written 0600 included: transformers writes weights so).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import trio

from .._errors import InvalidRequest, NotFound, Unavailable
from ..capacity import Grant
from ..executors import INPUTS, TrainerUser, grant_read, hand_over, open_way
from ..jobs import Job
from ..trainers import Error, JudgeModel, TrainerConfig
from ..trainers.graders import judge_models
from ._job_context import JobContext
from ._launch import command_refusal, model_refusal, trainer_command, trainer_config

__all__ = ["PreparedRun", "prepare_run"]


_DISK: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("alallo_run_dirs")
"""Worker threads writing runs' directories at once, per Trio run: a few, kept warm (1,000
jobs start together after a restart; a thread each would be created, and retired, for
nothing)."""


def _disk_limiter() -> trio.CapacityLimiter:
    try:
        return _DISK.get()
    except LookupError:
        limiter = trio.CapacityLimiter(2)
        _DISK.set(limiter)
        return limiter


@functools.lru_cache(maxsize=16)
def _resolved(jobs_dir: Path) -> Path:
    """``jobs_dir`` made absolute, symlinks resolved: once per process (a ``realpath`` walks
    every part of the path, a system call each, and every run of every job asked it)."""
    return jobs_dir.resolve()


_INPUT_FIELDS = ("training_file", "validation_file", "model", "init_adapter")
"""The config's paths a trainer reads but does not own: the uploads, and a model or
checkpoint of another job of the account that it starts from."""


def _brought_in(config: TrainerConfig, workdir: Path,
                jobs_dir: Path) -> tuple[TrainerConfig, dict[Path, Path], list[Path]]:
    """``config`` reading its uploads, and what it starts from in another job's directory,
    from its own ``inputs/``; what to link there, as ``{link: source}``; and the server's
    model folders it reads where they are (the one it trains, and its ``score_model``
    graders' judges)."""
    inputs: dict[Path, Path] = {}
    opened: list[Path] = []
    update: dict[str, str] = {}
    for field in _INPUT_FIELDS:
        value = getattr(config, field)
        if not value or not os.path.isabs(value):
            continue  # not a file: a hub model's name
        source = Path(value)
        uploaded = field in ("training_file", "validation_file")
        if uploaded or (source.is_relative_to(jobs_dir) and not source.is_relative_to(workdir)):
            link = workdir / INPUTS / f"{field}-{source.name}"
            inputs[link] = source
            update[field] = str(link)
        elif field == "model" and source.is_dir() and not source.is_relative_to(workdir):
            opened.append(source)  # (the built-in model, not built yet: the trainer builds it)
    judges = {name: _judge_brought_in(judge, index, workdir, jobs_dir, inputs, opened)
              for index, (name, judge) in enumerate(config.judges.items())}
    return config.model_copy(update={**update, "judges": judges}), inputs, opened


def _judge_brought_in(judge: JudgeModel, index: int, workdir: Path, jobs_dir: Path,
                      inputs: dict[Path, Path], opened: list[Path]) -> JudgeModel:
    """A ``score_model`` grader's model as the trainer user reaches it: what is in another
    job's directory (a fine-tuned model, an adapter) linked into ``inputs``, a base model's
    folder opened where it is."""
    paths: dict[str, str] = {}
    for field in ("model", "adapter"):
        value = getattr(judge, field)
        if value is None:
            continue
        source = Path(value)
        if source.is_relative_to(jobs_dir) and not source.is_relative_to(workdir):
            link = workdir / INPUTS / f"judge-{index}-{field}-{source.name}"
            inputs[link] = source
            paths[field] = str(link)
        elif source.is_dir() and source not in opened:  # (a built-in one: built by the trainer)
            opened.append(source)
    return judge.model_copy(update=paths)


def _write_run(workdir: Path, run_dir: Path, config_path: Path, payload: str,
               user: TrainerUser | None, inputs: dict[Path, Path],
               opened: list[Path]) -> None:
    """Make the run's directory, write its config, link its ``inputs`` (link -> source),
    open the model folders in ``opened`` to the trainer user for reading, hand the job's
    directory to it (blocking: in a worker thread, so that a slow disk holds up this run
    only).

    For a trainer user, the run's directory and ``inputs/`` are made anew: an earlier
    trainer of the job may have left links there to where only the server may write."""
    if user is not None:
        for stale in (run_dir, workdir / INPUTS):
            _remove(stale)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path.write_text(payload)
    for link, source in inputs.items():
        assert user is not None
        if not link.parent.exists():  # the server's; the trainer may read it, not change it
            link.parent.mkdir()
            grant_read(user, link.parent)
        if source.is_dir():
            shutil.copytree(source, link, symlinks=True, copy_function=_link)
        else:
            _link(str(source), str(link))
        for path in [link, *link.rglob("*")]:
            if not path.is_symlink():
                grant_read(user, path)
    for folder in opened:
        assert user is not None
        open_way(user, folder)
        for path in [folder, *folder.rglob("*")]:
            if not path.is_symlink():
                grant_read(user, path)
    hand_over(workdir, user)


def _link(source: str, target: str) -> None:
    """A hard link (the server's file, only read by the trainer); a copy across file
    systems."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.copyfile(source, target)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


async def _judges(ctx: JobContext, job: Job) -> dict[str, JudgeModel] | Error:
    """The files of the job's ``score_model`` graders' models, by name; or the user's error
    when the account can no longer use one (deleted since the job was created)."""
    judges: dict[str, JudgeModel] = {}
    for name in judge_models(job.spec.grader) if job.spec.grader else ():
        try:
            files = await ctx.judge_files(job.account_id, name)
        except (NotFound, InvalidRequest, Unavailable) as exc:
            return Error(kind="user", message=f"the score_model grader's model: {exc.message}")
        judges[name] = JudgeModel(model=str(files.model), tiny=files.tiny,
                                  adapter=str(files.adapter) if files.adapter else None)
    return judges


@dataclass(frozen=True)
class PreparedRun:
    """A run ready to start: its command, directory and the config's digest (16 hex)."""

    command: list[str]
    run_dir: Path
    config_hash: str
    resume_step: int | None


async def prepare_run(ctx: JobContext, job: Job, grant: Grant) -> PreparedRun | Error:
    """Prepare the job's next run on ``grant``; or the error that ends it before it starts.

    A refusal (the account lost the right to its command or model since it created the
    job, or the operator removed the trainer it names) is the user's error; a data file
    that cannot be fetched, or a job directory that cannot be written, the platform's.
    """
    trusted = await ctx.may_run_commands(job.account_id)
    refusal = (command_refusal(job.spec.trainer, allow_commands=trusted)
               or model_refusal(job.spec.model, allow_commands=trusted))
    if refusal is not None:
        return Error(kind="user", message=refusal)
    try:  # maybe uploaded through another process: fetched here from storage_url
        training_file, data_format = await ctx.training_file(job.spec.training_file)
        validation = (await ctx.training_file(job.spec.validation_file)
                      if job.spec.validation_file else None)
    except OSError as exc:
        return Error(kind="platform", message=f"cannot read the training file: {exc}")
    judges = await _judges(ctx, job)
    if isinstance(judges, Error):
        return judges
    jobs_dir = _resolved(ctx.settings.jobs_dir)
    workdir = jobs_dir / job.id
    run_dir = workdir / f"attempt-{job.attempt + 1}"
    # The job's directory failing (a file in its place, a full disk) is this run's
    # platform error, restarted up to max_restarts.
    try:
        resume_from = None
        if job.checkpoint is not None:  # maybe saved by another process: fetch it here
            resume_from = await ctx.checkpoint_storage.fetch(
                job.id, job.checkpoint.path, workdir / "checkpoints")
        config = trainer_config(job, grant, settings=ctx.settings, catalogue=ctx.catalogue,
                                workdir=workdir, run_dir=run_dir, resume_from=resume_from,
                                training_file=training_file, data_format=data_format,
                                validation=validation, fenced=ctx.executor.fenced,
                                judges=judges)
        inputs: dict[Path, Path] = {}
        opened: list[Path] = []
        if ctx.trainer_user is not None:  # it may not reach them where they are
            config, inputs, opened = _brought_in(config, workdir, jobs_dir)
        payload = config.model_dump_json(indent=2)
        config_path = run_dir / "config.json"
        await trio.to_thread.run_sync(_write_run, workdir, run_dir, config_path, payload,
                                      ctx.trainer_user, inputs, opened,
                                      limiter=_disk_limiter())
    except OSError as exc:
        return Error(kind="platform",
                     message=f"cannot prepare the run in the job's directory: {exc}")
    try:
        command = trainer_command(job, grant, config_path, python=ctx.settings.python,
                                  registry=ctx.trainers)
    except InvalidRequest as exc:  # the operator has removed the trainer it names
        return Error(kind="user", message=exc.message)
    return PreparedRun(command=command, run_dir=run_dir,
                       config_hash=hashlib.sha256(payload.encode()).hexdigest()[:16],
                       resume_step=job.checkpoint.step if job.checkpoint else None)
