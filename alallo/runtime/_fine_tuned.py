"""`FineTunedModels`: an account's trained models, by id, as archives to download (issue 17).

A job that succeeded made a model: its id is OpenAI's shape, ``ft:BASE:ACCOUNT:SUFFIX:JOB``
(:func:`~alallo.runtime._model_ids.model_id`), e.g.
``ft:alallo--tiny-gpt2:acct-1f2e:support:3a4b5c…`` (the four-field ids of earlier versions
name it too); the directory stays readable as the job's ``fine_tuned_model_path`` for the
operator. The job's kept checkpoints are models too (``…:ckpt-step-N``,
:mod:`alallo.runtime._checkpoint_models`, at :attr:`FineTunedModels.checkpoints`). A model exists while
its directory does: ``DELETE /v1/models/{id}`` removes it, and the id then answers 404 as an
id nobody has (so does another account's).

``GET /v1/models/{id}/content?format=adapter|merged`` is a tar.gz of the model: the PEFT
adapter as saved (folder ``<job>-adapter``), or the adapter merged into its base (``<job>-merged``);
a full fine-tune's whole model either way (``<job>-model``). The merge
(``merge_and_unload``) is run by ``python -m alallo.trainers.merge`` in a child process, never
in the server's event loop. The adapter's ``adapter_config.json`` names its base by the
directory the trainer loaded, a path on this server that the server's own engines rely on;
the archive's copy names it by its id instead (``alallo/tiny-gpt2``, or the hub id with its
commit as ``revision``), so that the adapter loads elsewhere (:func:`_portable_config`).
Each archive is built once, into the job's directory, and served
as a file (``Content-Length``, ``Range``).

Requests that arrive while an archive is being built wait for that one build and are served
its file (a single flight per archive, :class:`_Build`): a merge takes seconds and a whole
model's memory, so it runs once however many clients ask. Each build writes into a name of
its own (:func:`tempfile.mkstemp` and :func:`tempfile.mkdtemp` beside the archive) and
renames the whole archive into place, so two servers sharing the job's folder cannot
corrupt each other either (the last rename wins; both wrote the same bytes). A build that
fails leaves nothing behind: the requests waiting on it get its error, and the next request
builds again.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import trio

from .._errors import InvalidRequest, NotFound, shown
from ..executors import scrubbed_environment
from .._status import JobStatus
from ..jobs import Job
from ..settings import Settings
from ..store import Store
from ._checkpoint_models import CheckpointModels
from ._model_ids import legacy_model_id, model_id, parse_model_id

__all__ = ["ArchiveFormat", "FineTunedModels"]

ArchiveFormat = Literal["adapter", "merged"]

ADAPTER_CONFIG = "adapter_config.json"
"""A PEFT adapter's config, which names its base model (``base_model_name_or_path``)."""


TRAINED_CACHED = 1024
"""Succeeded jobs :class:`FineTunedModels` keeps in memory."""


class FineTunedModels:
    """The account's fine-tuned models: listed, archived, deleted.

    Args:
        store: the jobs.
        settings: ``python`` (for the merge) and where jobs keep their files.
        get_job: the account's job by id (raises :class:`NotFound`).
    """

    def __init__(self, store: Store, settings: Settings,
                 get_job: Callable[[str, str], Awaitable[Job]]) -> None:
        self._store = store
        self._settings = settings
        self._get_job = get_job
        self._builds: dict[Path, _Build] = {}
        self._trained: OrderedDict[str, Job] = OrderedDict()
        """Succeeded jobs by id, those asked for lately (:data:`TRAINED_CACHED` at most): a
        succeeded job's model never changes, so a completion does not read the store for
        it (64 requests at once waited 2 s on SQLite's one reader for it, issue 33)."""
        self.checkpoints = CheckpointModels(store, get_job)
        """The jobs' checkpoints as models, and their permissions."""

    async def find(self, account_id: str, model: str) -> Job:
        """The succeeded job whose model ``model`` is (its id, or the four-field id of
        earlier versions), while the model exists.

        Raises:
            NotFound: no such model of the account (``param="model"``); a checkpoint
                model's id too (:attr:`checkpoints` finds those).
        """
        ref = parse_model_id(model)
        job: Job | None = None
        if ref is not None and ref.step is None:
            job = self._trained.get(ref.job_id)
            if job is not None and job.account_id == account_id:
                self._trained.move_to_end(ref.job_id)
            else:
                try:
                    job = await self._get_job(account_id, ref.job_id)
                except NotFound:
                    job = None
                if job is not None and job.status is JobStatus.SUCCEEDED:
                    self._trained[ref.job_id] = job
                    while len(self._trained) > TRAINED_CACHED:
                        self._trained.popitem(last=False)
        if (job is None or job.fine_tuned_model is None
                or model not in (model_id(job), legacy_model_id(job))
                or not Path(job.fine_tuned_model).is_dir()):
            raise NotFound(f"no model {shown(model)}", param="model")
        return job

    async def weights(self, account_id: str, model: str) -> tuple[Job, Path]:
        """A model the account may chat with or train from: its own fine-tuned model, or a
        checkpoint model of its own or shared with it. Returns the job that trained it and
        the weights' directory (a LoRA adapter, or whole weights).

        Raises:
            NotFound: no such model for this account (``param="model"``).
        """
        ref = parse_model_id(model)
        if ref is not None and ref.step is not None:
            found = await self.checkpoints.find(account_id, model, shared=True)
            return found.job, found.path
        job = await self.find(account_id, model)
        return job, Path(job.fine_tuned_model or "")

    async def usable(self, account_id: str, model: str) -> Job:
        """The job that trained a model the account may train from (:meth:`weights`)."""
        return (await self.weights(account_id, model))[0]

    async def list(self, account_id: str) -> list[Job]:
        """The account's jobs whose models exist, newest first."""
        found: list[Job] = []
        after: str | None = None
        while True:
            page, more = await self._store.list_jobs(account_id, limit=1000, after=after)
            found += [j for j in page if j.fine_tuned_model and Path(j.fine_tuned_model).is_dir()]
            if not more or not page:
                return found
            after = page[-1].id

    async def archive(self, account_id: str, model: str, fmt: str) -> Path:
        """A tar.gz of the model (``adapter`` or ``merged``), built once: concurrent
        requests share one build (see the module's docstring).

        Raises:
            NotFound: no such model of the account.
            InvalidRequest: an unknown format (``param="format"``).
            OSError: the archive could not be built (the merge failed, a full disk); a
                later request builds it again.
        """
        if fmt not in ("adapter", "merged"):
            raise InvalidRequest(f"format must be adapter or merged, not {fmt!r}",
                                 param="format")
        job = await self.find(account_id, model)
        source = Path(job.fine_tuned_model or "")
        # A full fine-tune is one model whichever is asked: one archive, "<job>-model".
        kind = fmt if (source / ADAPTER_CONFIG).is_file() else "model"
        out = source.parent / "downloads" / f"{job.id}-{kind}.tar.gz"
        while not out.is_file():
            build = self._builds.get(out)
            if build is not None:
                await build.wait()  # then the archive is there, or the builder was cancelled
                continue
            build = self._builds[out] = _Build()
            try:
                await self._build(source, out, merge=fmt == "merged", model=model, job=job)
            except BaseException as exc:  # trio.Cancelled too: a waiter then builds instead
                build.error = exc
                raise
            finally:
                del self._builds[out]
                build.done.set()
        return out

    async def _build(self, source: Path, out: Path, *, merge: bool, model: str,
                     job: Job) -> None:
        """Write the archive ``out`` of ``job``'s model at ``source`` (merged into its base
        if ``merge`` and it is an adapter), whole or not at all."""
        if not source.is_dir():  # deleted since it was found
            raise NotFound(f"no model {shown(model)}", param="model")
        top = out.name.removesuffix(".tar.gz")
        out.parent.mkdir(exist_ok=True)
        config = source / ADAPTER_CONFIG
        if not (merge and config.is_file()):
            replaced = ({ADAPTER_CONFIG: await trio.to_thread.run_sync(
                _portable_config, config, job)} if config.is_file() else {})
            await trio.to_thread.run_sync(_tar, source, out, top, replaced)
            return
        merged = Path(tempfile.mkdtemp(prefix=f".{top}-", dir=out.parent))
        try:
            await self._merge(source, merged)
            await trio.to_thread.run_sync(_tar, merged, out, top, {})
        finally:
            with trio.CancelScope(shield=True):  # a cancelled build leaves nothing either
                await trio.to_thread.run_sync(shutil.rmtree, merged, True)

    async def delete(self, account_id: str, model: str) -> None:
        """Delete the model's files (the job stays, with its events and log).

        Raises:
            NotFound: no such model of the account.
        """
        job = await self.find(account_id, model)
        model_dir = Path(job.fine_tuned_model or "")
        await trio.to_thread.run_sync(shutil.rmtree, model_dir)
        await trio.to_thread.run_sync(
            lambda: shutil.rmtree(model_dir.parent / "downloads", ignore_errors=True))

    async def _merge(self, adapter: Path, out: Path) -> None:
        """The adapter merged into its base, saved into the directory ``out``."""
        result = await trio.run_process(
            [self._settings.python, "-m", "alallo.trainers.merge", str(adapter), str(out)],
            capture_stdout=True, capture_stderr=True, check=False,
            env=scrubbed_environment(self._settings.trainer_env))
        if result.returncode != 0:
            last = (result.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            raise OSError(f"merging the adapter into its base failed: {last}")


@dataclass(eq=False)
class _Build:
    """An archive being built: the requests that want it meanwhile wait for this one."""

    done: trio.Event = field(default_factory=trio.Event)
    error: BaseException | None = None
    """What the build raised (set before ``done``); None when it succeeded."""

    async def wait(self) -> None:
        """Wait for the build to end.

        Raises:
            NotFound: the model was deleted meanwhile.
            OSError: the build failed.

        Each is a new exception with the build's message, chained to the build's own: one
        exception object is never raised in two tasks.
        """
        await self.done.wait()
        if isinstance(self.error, NotFound):
            raise NotFound(self.error.message, param=self.error.param) from self.error
        if isinstance(self.error, Exception):
            raise OSError(str(self.error)) from self.error


def _portable_config(config: Path, job: Job) -> bytes:
    """The adapter's config with its base named by id, not by the path on this server: the
    job's base model (the hub id without ``@revision``, its commit as PEFT's ``revision``);
    a base that is a local directory the job named keeps its path, the only name it has.

    Raises:
        OSError: the config cannot be read, or is not a JSON object.
    """
    try:
        data = json.loads(config.read_bytes())
    except ValueError as exc:
        raise OSError(f"{config.name} of the adapter is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise OSError(f"{config.name} of the adapter is not a JSON object")
    base = job.base_model
    if not Path(base).is_absolute():
        base, _, revision = base.partition("@")
        if job.model_revision or revision:
            data["revision"] = job.model_revision or revision
    data["base_model_name_or_path"] = base
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def _tar(source: Path, out: Path, top: str, replaced: Mapping[str, bytes]) -> None:
    """``source``'s files as ``top/...`` in a tar.gz at ``out``, written whole or not at all:
    into a temporary file of its own beside ``out``, renamed into place once complete. A
    file named in ``replaced`` (by its path in ``source``) holds those bytes instead."""
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    partial = Path(name)
    try:
        with os.fdopen(fd, "wb") as file, tarfile.open(fileobj=file, mode="w:gz") as archive:
            for path in sorted(source.rglob("*")):
                if not path.is_file():
                    continue
                inside = path.relative_to(source).as_posix()
                if inside not in replaced:
                    archive.add(path, arcname=f"{top}/{inside}")
                    continue
                info = archive.gettarinfo(path, arcname=f"{top}/{inside}")
                info.size = len(replaced[inside])
                archive.addfile(info, io.BytesIO(replaced[inside]))
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
