"""Where a trainer process runs: today a child of this server, started cold or forked from a
warm process that has imported the trainer's libraries (room for torchrun and Ray next).

A trainer always starts with a scrubbed environment, in its job's directory, as the
trainer user when the server runs as root, in its own process group, and never outlives
the server (:mod:`alallo.executors._local`, :mod:`alallo.executors._posix`). Executors
run commands; they know nothing of jobs (``alallo._launch`` turns a job into a command).
"""

from __future__ import annotations

from alallo.executors._env import (
                                   TrainerUser,
                                   hand_over,
                                   scrubbed_environment,
                                   trainer_user,
)
from alallo.executors._local import TrainerProcess

__all__ = ["TrainerProcess", "TrainerUser", "hand_over", "scrubbed_environment", "trainer_user"]
