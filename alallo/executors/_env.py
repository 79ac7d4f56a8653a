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

Where the server runs as root, trainers run as an unprivileged user
(``Settings.trainer_user``, resolved by :func:`trainer_user`); the job's
directory is handed to that user (:func:`hand_over`).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PASSED_VARIABLES", "TrainerUser", "hand_over", "scrubbed_environment",
           "trainer_user"]

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


def trainer_user(name: str | None) -> TrainerUser | None:
    """The user trainers run as: ``name`` when this process runs as root, else None.

    The name is checked either way, so a mistyped setting is found on the machine
    where it is written, not on the first one that runs as root.

    Args:
        name: ``Settings.trainer_user``.

    Raises:
        ValueError: ``name`` is not a user of this machine, or is root itself.
    """
    if name is None:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"ALALLO_TRAINER_USER {name!r} is not a user on this machine") from None
    if entry.pw_uid == 0:
        raise ValueError(f"ALALLO_TRAINER_USER {name!r} is root: name an unprivileged user")
    if os.geteuid() != 0:
        return None  # not root: trainers run as this process's own (unprivileged) user
    return TrainerUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def hand_over(directory: Path, user: TrainerUser | None) -> None:
    """Give ``directory`` and everything in it to ``user`` (nothing when None).

    The trainer writes its checkpoints and its model there; the server, as
    root, still reads and writes it.
    """
    if user is None:
        return
    for path in [directory, *directory.rglob("*")]:
        os.chown(path, user.uid, user.gid, follow_symlinks=False)
