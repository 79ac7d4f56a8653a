"""Where a trainer process runs: one interface (:class:`Executor`) and two places, a child of
this server (started cold or forked from a warm process that has imported the trainer's
libraries) or a Ray job on a node of a Ray cluster (:mod:`alallo.executors._ray`).

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
    from ._executor import Executor as Executor
    from ._executor import Launch as Launch
    from ._executor import LineSink as LineSink
    from ._executor import RunEnd as RunEnd
    from ._executor import TrainerRun as TrainerRun
    from ._local import LocalExecutor as LocalExecutor
    from ._local import TrainerProcess as TrainerProcess
    from ._ray import RayExecutor as RayExecutor
    from ._ray_api import RayApi as RayApi
    from ._ray_api import RayApiError as RayApiError
    from ._ray_api import RayNode as RayNode

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "Executor": ("._executor", "Executor"),
    "Launch": ("._executor", "Launch"),
    "LineSink": ("._executor", "LineSink"),
    "LocalExecutor": ("._local", "LocalExecutor"),
    "RayApi": ("._ray_api", "RayApi"),
    "RayApiError": ("._ray_api", "RayApiError"),
    "RayExecutor": ("._ray", "RayExecutor"),
    "RayNode": ("._ray_api", "RayNode"),
    "RunEnd": ("._executor", "RunEnd"),
    "TrainerRun": ("._executor", "TrainerRun"),
    "TrainerProcess": ("._local", "TrainerProcess"),
    "TrainerUser": ("._env", "TrainerUser"),
    "hand_over": ("._env", "hand_over"),
    "scrubbed_environment": ("._env", "scrubbed_environment"),
    "trainer_user": ("._env", "trainer_user"),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""


__all__ = ["Executor", "Launch", "LineSink", "LocalExecutor", "RayApi", "RayApiError", "RayExecutor",
           "RayNode", "RunEnd", "TrainerProcess", "TrainerRun", "TrainerUser", "hand_over",
           "scrubbed_environment", "trainer_user"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
