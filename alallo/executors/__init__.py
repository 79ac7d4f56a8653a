"""Where a trainer process runs: one interface (:class:`Executor`) and two places, a child of
this server (started cold or forked from a warm process that has imported the trainer's
libraries) or a Ray job on a node of a Ray cluster (:mod:`alallo.executors._ray`); and where a
service (a vLLM engine) runs, the same two places (:class:`Services`).

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
    from ._env import DEFAULT_TRAINER_USER as DEFAULT_TRAINER_USER
    from ._env import INPUTS as INPUTS
    from ._env import TrainerUser as TrainerUser
    from ._env import hand_over as hand_over
    from ._env import hf_caches as hf_caches
    from ._env import scrubbed_environment as scrubbed_environment
    from ._env import take_back as take_back
    from ._env import trainer_user as trainer_user
    from ._env import trainers_env as trainers_env
    from ._executor import Executor as Executor
    from ._executor import Launch as Launch
    from ._executor import LineSink as LineSink
    from ._executor import RunEnd as RunEnd
    from ._executor import TrainerRun as TrainerRun
    from ._local import LocalExecutor as LocalExecutor
    from ._local import TrainerProcess as TrainerProcess
    from ._local import start_service as start_service
    from ._posix import die_with_parent as die_with_parent
    from ._posix import free_port as free_port
    from ._posix import kill_group as kill_group
    from ._ray import RayExecutor as RayExecutor
    from ._ray_api import RayApi as RayApi
    from ._ray_api import RayApiError as RayApiError
    from ._ray_api import RayNode as RayNode
    from ._ray_services import RayServices as RayServices
    from ._services import LocalServices as LocalServices
    from ._services import Service as Service
    from ._services import ServiceLaunch as ServiceLaunch
    from ._services import Services as Services
    from ._reach import close_root as close_root
    from ._reach import grant_read as grant_read
    from ._reach import open_tree as open_tree
    from ._reach import open_way as open_way
    from ._user_check import CannotRunTrainers as CannotRunTrainers
    from ._user_check import Interpreter as Interpreter
    from ._user_check import check_trainer_user as check_trainer_user
    from ._user_check import interpreter_paths as interpreter_paths

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "CannotRunTrainers": ("._user_check", "CannotRunTrainers"),
    "DEFAULT_TRAINER_USER": ("._env", "DEFAULT_TRAINER_USER"),
    "Executor": ("._executor", "Executor"),
    "INPUTS": ("._env", "INPUTS"),
    "Interpreter": ("._user_check", "Interpreter"),
    "Launch": ("._executor", "Launch"),
    "LineSink": ("._executor", "LineSink"),
    "LocalExecutor": ("._local", "LocalExecutor"),
    "LocalServices": ("._services", "LocalServices"),
    "RayApi": ("._ray_api", "RayApi"),
    "RayApiError": ("._ray_api", "RayApiError"),
    "RayExecutor": ("._ray", "RayExecutor"),
    "RayNode": ("._ray_api", "RayNode"),
    "RayServices": ("._ray_services", "RayServices"),
    "Service": ("._services", "Service"),
    "ServiceLaunch": ("._services", "ServiceLaunch"),
    "Services": ("._services", "Services"),
    "RunEnd": ("._executor", "RunEnd"),
    "TrainerRun": ("._executor", "TrainerRun"),
    "TrainerProcess": ("._local", "TrainerProcess"),
    "TrainerUser": ("._env", "TrainerUser"),
    "check_trainer_user": ("._user_check", "check_trainer_user"),
    "close_root": ("._reach", "close_root"),
    "die_with_parent": ("._posix", "die_with_parent"),
    "free_port": ("._posix", "free_port"),
    "kill_group": ("._posix", "kill_group"),
    "grant_read": ("._reach", "grant_read"),
    "hand_over": ("._env", "hand_over"),
    "hf_caches": ("._env", "hf_caches"),
    "interpreter_paths": ("._user_check", "interpreter_paths"),
    "open_tree": ("._reach", "open_tree"),
    "open_way": ("._reach", "open_way"),
    "scrubbed_environment": ("._env", "scrubbed_environment"),
    "start_service": ("._local", "start_service"),
    "take_back": ("._env", "take_back"),
    "trainer_user": ("._env", "trainer_user"),
    "trainers_env": ("._env", "trainers_env"),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""


__all__ = ["CannotRunTrainers", "DEFAULT_TRAINER_USER", "Executor", "INPUTS", "Interpreter",
           "Launch", "LineSink", "LocalExecutor", "LocalServices", "RayApi", "RayApiError",
           "RayExecutor", "RayNode", "RayServices", "RunEnd", "Service", "ServiceLaunch",
           "Services", "TrainerProcess", "TrainerRun", "TrainerUser",
           "check_trainer_user", "close_root", "die_with_parent", "free_port", "grant_read", "hand_over", "hf_caches",
           "interpreter_paths", "kill_group", "open_tree", "open_way", "scrubbed_environment", "start_service", "take_back",
           "trainer_user", "trainers_env"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
