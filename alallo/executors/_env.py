"""What a trainer process may inherit: a scrubbed environment, and the user it runs as.

A trainer is code the server runs for a job: built in, registered by the
operator, or (for accounts allowed to) the account's own command. None of
them gets the server's environment: no ``ALALLO_*`` setting, no database
URL, no API key or token of the server. A trainer starts from an allowlist
of variables that locate tools and caches (:data:`PASSED_VARIABLES`, and
``LC_*``), plus what the operator adds for every trainer
(``Settings.trainer_env``) and what the caller adds for the job. An
allowlist rather than a denylist: a secret the server gains tomorrow (a
cloud token, a new library's key) must not reach trainers by default.

Where the server runs as root, trainers always run as an unprivileged user: the
one of ``Settings.trainer_user``, else :data:`DEFAULT_TRAINER_USER`, made on first
start (:func:`trainer_user`). A job's directory is handed to that user for each run
(:func:`hand_over`) and taken back when the run ends (:func:`take_back`); what else it
may reach is opened once at start (:mod:`alallo.executors._reach`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_TRAINER_USER", "PASSED_VARIABLES", "TrainerUser", "hand_over",
           "hf_caches", "scrubbed_environment", "take_back", "trainer_user", "trainers_env"]

DEFAULT_TRAINER_USER = "alallo-trainer"
"""The user a root server's trainers run as when ``Settings.trainer_user`` names none: a
system user of its own, made on the first start (``useradd --system``: no home, no login
shell, a group of its own), so that no file or process of another service (``nobody`` is
shared by many) is within a trainer's reach, nor a trainer's within theirs."""

FALLBACK_TRAINER_USER = "nobody"
"""Taken where :data:`DEFAULT_TRAINER_USER` cannot be made (no ``useradd``, a read-only
``/etc``), with a warning in the server's log."""

PASSED_VARIABLES = frozenset({
    # where programs, libraries and the interpreter's packages are
    "PATH", "PYTHONPATH", "VIRTUAL_ENV", "HOME", "TMPDIR", "LD_LIBRARY_PATH",
    # language, time zone, certificates
    "LANG", "LANGUAGE", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    # model and data caches, and their offline switches (tokens are not passed)
    "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_DATASETS_CACHE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_CACHE", "TRANSFORMERS_OFFLINE", "TORCH_HOME", "XDG_CACHE_HOME",
    # devices and threads
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
})
"""Variables of the server's environment a trainer gets (with every ``LC_*``)."""

TRAINER_DEFAULTS = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
"""Set for every trainer: lines arrive as printed; no tokenizer threads forked with it."""


def scrubbed_environment(extra: Mapping[str, str] | None = None, *,
                         source: Mapping[str, str] | None = None) -> dict[str, str]:
    """A trainer's whole environment.

    Args:
        extra: variables on top (the operator's ``trainer_env``, the job's own).
        source: the environment to take the allowed variables from; the server's
            (``os.environ``) if None.

    Returns:
        The allowed variables of ``source``, :data:`TRAINER_DEFAULTS`, then ``extra``.
    """
    source = os.environ if source is None else source
    kept = {name: value for name, value in source.items()
            if name in PASSED_VARIABLES or name.startswith("LC_")}
    return {**kept, **TRAINER_DEFAULTS, **(extra or {})}


@dataclass(frozen=True)
class TrainerUser:
    """The unprivileged user trainers run as (the server runs as root)."""

    name: str
    uid: int
    gid: int


def trainer_user(name: str | None, *, local: bool = True) -> TrainerUser | None:
    """The user trainers run as: when this process runs as root, ``name``, or without one
    :data:`DEFAULT_TRAINER_USER` (made now if this machine lacks it); else None (trainers
    run as this process's own, unprivileged, user).

    A name is checked either way, so a mistyped setting is found on the machine
    where it is written, not on the first one that runs as root.

    Args:
        name: ``Settings.trainer_user``.
        local: whether trainers run on this machine; False (a Ray cluster's nodes run them,
            as the user that runs each node): None, the name only checked.

    Raises:
        ValueError: ``name`` is not a user of this machine, or is root itself; or, as root
            without one, neither :data:`DEFAULT_TRAINER_USER` nor ``nobody`` can be had.
    """
    if name is None:
        return _default_user() if os.geteuid() == 0 and local else None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"ALALLO_TRAINER_USER {name!r} is not a user on this machine") from None
    if entry.pw_uid == 0:
        raise ValueError(f"ALALLO_TRAINER_USER {name!r} is root: name an unprivileged user")
    if os.geteuid() != 0 or not local:
        return None  # not root: trainers run as this process's own (unprivileged) user
    return TrainerUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def _default_user() -> TrainerUser:
    """:data:`DEFAULT_TRAINER_USER`, made if need be; else ``nobody``, said in the log."""
    made = _user_named(DEFAULT_TRAINER_USER)
    if made is not None:
        return made
    useradd = shutil.which("useradd", path=os.pathsep.join(
        [os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if useradd is None:
        why = "this machine has no useradd"
    else:
        shell = next((s for s in ("/usr/sbin/nologin", "/sbin/nologin") if os.path.exists(s)),
                     "/bin/false")
        done = subprocess.run(
            [useradd, "--system", "--user-group", "--no-create-home", "--home-dir",
             "/nonexistent", "--shell", shell, "--comment", "alallo trainers",
             DEFAULT_TRAINER_USER], capture_output=True, text=True, check=False)
        # Made now, or by another server starting at the same time (useradd then fails).
        made = _user_named(DEFAULT_TRAINER_USER)
        if made is not None:
            return made
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        why = f"useradd failed: {said}"
    fallback = _user_named(FALLBACK_TRAINER_USER)
    if fallback is None:
        raise ValueError(
            f"the server runs as root and trainers need an unprivileged user: cannot make "
            f"{DEFAULT_TRAINER_USER!r} ({why}) and there is no {FALLBACK_TRAINER_USER!r}; "
            "name one in ALALLO_TRAINER_USER")
    import structlog  # here only: a Ray node's launcher imports this module

    structlog.get_logger("alallo.executors").warning(
        "trainer_user.fallback", user=FALLBACK_TRAINER_USER, reason=why,
        hint="name a user of its own in ALALLO_TRAINER_USER")
    return fallback


def _user_named(name: str) -> TrainerUser | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    if entry.pw_uid == 0:
        raise ValueError(f"the user {name!r} is root: name an unprivileged user in "
                         "ALALLO_TRAINER_USER")
    return TrainerUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


INPUTS = "inputs"
"""The folder of a job's directory that holds what its trainer reads but does not own (links
to its uploads, to a model of another job it starts from: :mod:`alallo.runtime._run_prep`):
it stays the server's, so the trainer reads them and changes nothing of the originals."""


def hand_over(directory: Path, user: TrainerUser | None) -> None:
    """Give ``directory`` and everything in it but :data:`INPUTS` to ``user`` (nothing
    when None), for a run of its trainer.

    The trainer writes its checkpoints and its model there; the server, as
    root, still reads and writes it.
    """
    if user is None:
        return
    for path in [directory, *directory.rglob("*")]:
        if path.relative_to(directory).parts[:1] != (INPUTS,):
            os.chown(path, user.uid, user.gid, follow_symlinks=False)


def take_back(directory: Path) -> None:
    """Close ``directory`` to every user but the server's after a run: it and everything in
    it become the server's, the directory mode 0700, so that no later trainer (they all run
    as one user) reaches or changes what this one wrote; files another job links to (a model
    it starts from) are then the server's, only read by that job's trainer. Every symbolic
    link the trainer left that leads out of the directory is removed: the server reads the
    directory later (checkpoints, the model) and must not be led to its own files. A
    directory that is gone is left alone."""
    try:
        os.chmod(directory, 0o700)
    except FileNotFoundError:
        return
    uid, gid = os.geteuid(), os.getegid()
    inside = os.path.realpath(directory) + os.sep
    os.chown(directory, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(directory):  # links are listed, never followed
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            if os.path.islink(path) and not os.path.realpath(path).startswith(inside):
                os.unlink(path)
            else:
                os.chown(path, uid, gid, follow_symlinks=False)


def hf_caches(env: Mapping[str, str]) -> list[Path]:
    """The Hugging Face caches a trainer with environment ``env`` reads and downloads into
    (``HF_HOME``, and ``HF_HUB_CACHE``, ``HF_DATASETS_CACHE``, ``TRANSFORMERS_CACHE`` where
    they are set elsewhere), as ``huggingface_hub`` resolves them."""
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME", "~"), ".cache"),
        "huggingface")
    paths = [home] + [env[name] for name in ("HF_HUB_CACHE", "HF_DATASETS_CACHE",
                                              "TRANSFORMERS_CACHE") if env.get(name)]
    found: list[Path] = []
    for path in paths:
        resolved = Path(os.path.expanduser(path)).absolute()
        if resolved not in found:
            found.append(resolved)
    return found


def trainers_env(trainer_env: Mapping[str, str] | None,
                 user: TrainerUser | None) -> dict[str, str]:
    """What every trainer gets on top of its scrubbed environment: the operator's
    ``trainer_env`` and, for a trainer user, ``HF_HOME`` set to the server's Hugging Face
    cache (unless ``trainer_env`` names one), since such a trainer's ``HOME`` is its run's
    directory: it reads and downloads into the cache the server lists models from."""
    shared = dict(trainer_env or {})
    if user is not None and "HF_HOME" not in shared:
        shared["HF_HOME"] = str(hf_caches(os.environ)[0])
    return shared
