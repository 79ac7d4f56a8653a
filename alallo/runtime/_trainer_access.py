"""A root server's trainer user, made able to run trainers, and to reach nothing else of the
server's, once at start (docs/security.md, "Trainers: what a trainer process can reach").

Opened to it (:mod:`alallo.executors._reach`: an ACL entry for that one user each):

- a way (cross, not list) to the interpreter, its library, the packages a trainer imports
  (the virtual environment, an editable checkout), the data folder and its ``jobs`` folder;
- read and write on the Hugging Face cache trainers read and download into (``HF_HOME``: the
  server's, as the trainers' ``HOME`` is their run's directory; a way to it alone where it is
  mounted read-only) and on the ``models`` folder the built-in model is built in.

Closed to it: the data folder cannot be listed, and every entry in it but ``jobs`` and
``models`` (the database, the API key, the uploads, the inference workers' folder, whatever
is made there later) is closed to "other" users. A job's own directory is handed to it for
each run, and taken back after (:mod:`alallo.runtime._run_prep`,
:class:`~alallo.executors.LocalExecutor`); its training files are linked into it.

Then the interpreter is run as that user in a folder made as a job's is
(:mod:`alallo.executors._user_check`): a user that still cannot run a trainer stops the start
with one line (:class:`~alallo.SettingError`, ``param="trainer_user"``).
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import structlog
import trio

from .._errors import SettingError
from ..executors import (
    CannotRunTrainers,
    TrainerUser,
    check_trainer_user,
    close_root,
    hand_over,
    hf_caches,
    interpreter_paths,
    open_tree,
    open_way,
    scrubbed_environment,
    trainer_user,
    trainers_env,
)
from ..settings import Settings

__all__ = ["open_to_trainer_user", "resolve_trainer_user"]

log = structlog.get_logger("alallo.runtime")

TRAINER_ENTRIES = ("jobs", "models")
"""The entries of the folder holding the jobs (the data folder, or ``shared_dir``) that
the trainer user reaches."""


def resolve_trainer_user(settings: Settings) -> TrainerUser | None:
    """The user this server's trainers run as: see :func:`alallo.executors.trainer_user`
    (None on a Ray cluster, whose nodes run them).

    Raises:
        SettingError: ``trainer_user`` names no user, or root; or none can be had
            (``param="trainer_user"``).
    """
    try:
        return trainer_user(settings.trainer_user, local=not settings.ray_address)
    except ValueError as exc:
        raise SettingError(str(exc), param="trainer_user") from None


async def open_to_trainer_user(settings: Settings, user: TrainerUser | None) -> None:
    """Open to ``user`` what a trainer needs, close the rest, and check that it can run a
    trainer (nothing when None: trainers run as the server's own user).

    Raises:
        SettingError: it still cannot (``param="trainer_user"``); the message, one line,
            says what it could not reach.
    """
    if user is None:
        return
    try:
        await trio.to_thread.run_sync(_open, settings, user)
    except (CannotRunTrainers, OSError) as exc:
        detail = str(exc) if isinstance(exc, CannotRunTrainers) else _os_error(exc)
        raise SettingError(
            f"trainers cannot run as the user {user.name}: {detail} (name another user in "
            "ALALLO_TRAINER_USER, or make what it needs readable to it)",
            param="trainer_user") from None
    log.info("trainers.user", user=user.name, uid=user.uid)


def _os_error(exc: OSError) -> str:
    return f"cannot open {exc.filename} to it: {exc.strerror or exc}"


def _read_only(path: Path) -> bool:
    """Whether ``path`` (or the folder it would be made in) is on a read-only file system."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def _python(settings: Settings, env: dict[str, str]) -> Path:
    found = shutil.which(settings.python, path=env.get("PATH"))
    return Path(os.path.abspath(found or settings.python))


def _open(settings: Settings, user: TrainerUser) -> None:
    env = scrubbed_environment(trainers_env(settings.trainer_env, user))
    data, jobs, models = (settings.data_dir.resolve(), settings.jobs_dir.resolve(),
                          settings.models_dir.resolve())
    caches = [cache for cache in hf_caches(env) if not _read_only(cache)]
    for cache in set(hf_caches(env)) - set(caches):  # a model volume mounted read-only
        open_way(user, cache)
    check = jobs / f".check-{secrets.token_hex(4)}"
    check.mkdir(parents=True)
    try:
        python = _python(settings, env)
        interpreter = interpreter_paths(python, env, check)
        for path in interpreter.reads():
            open_way(user, path)
        for tree in (*caches, models):
            open_tree(user, tree)
        open_way(user, jobs)
        holder = jobs.parent  # the data folder, or the shared one
        if holder != data:
            close_root(user, data, crossable=False)
        close_root(user, holder, TRAINER_ENTRIES)
        close_root(user, jobs)
        hand_over(check, user)
        check_trainer_user(interpreter, user, {**env, "HOME": str(check)}, check,
                           [check, models, *caches])
    finally:
        shutil.rmtree(check, ignore_errors=True)
