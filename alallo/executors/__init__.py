"""Where a trainer process runs: today a child of this server, started cold or forked from a
warm process that has imported the trainer's libraries (room for torchrun and Ray next).

A trainer always starts with a scrubbed environment, in its job's directory, as the
trainer user when the server runs as root, in its own process group, and never outlives
the server (:mod:`alallo.executors._local`, :mod:`alallo.executors._posix`). Executors
run commands; they know nothing of jobs (``alallo.runtime._launch`` turns a job into a command).

Names load on first use (PEP 562), so importing one module of the wing does not
import the rest of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from ._env import TrainerUser as TrainerUser
    from ._env import hand_over as hand_over
    from ._env import scrubbed_environment as scrubbed_environment
    from ._env import trainer_user as trainer_user
    from ._local import TrainerProcess as TrainerProcess

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "TrainerProcess": ("._local", "TrainerProcess"),
    "TrainerUser": ("._env", "TrainerUser"),
    "hand_over": ("._env", "hand_over"),
    "scrubbed_environment": ("._env", "scrubbed_environment"),
    "trainer_user": ("._env", "trainer_user"),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""


__all__ = ["TrainerProcess", "TrainerUser", "hand_over", "scrubbed_environment", "trainer_user"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
