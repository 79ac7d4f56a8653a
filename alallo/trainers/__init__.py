"""Trainers: the processes that do the training, and the protocol they speak.

alallo runs a trainer as ``<command> <config.json>`` and reads JSON lines
from its stdout (see :mod:`alallo.trainers._protocol` and
``docs/trainer-protocol.md``). Two trainers ship here:

- ``python -m alallo.trainers.trl``: real fine-tuning with TRL's
  ``SFTTrainer`` (LoRA or full, CPU or CUDA);
- ``python -m alallo.trainers.simulated``: the same protocol with no torch,
  scripted and fast, for tests and load runs.

:func:`ensure_model` resolves a model name to a local directory, building
the built-in ``alallo/tiny-gpt2`` on first use. Importing this package does
not import torch, transformers or datasets, and its names load on first use (PEP 562): the
launcher on a Ray node imports only the fence (:mod:`alallo.trainers._fence`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from ._data import UserDataError as UserDataError
    from ._data import parse_rows as parse_rows
    from ._encoders import CHAT_FORMATS as CHAT_FORMATS
    from ._encoders import counting_encoder as counting_encoder
    from ._encoders import has_chat_template as has_chat_template
    from ._lengths import Encoder as Encoder
    from ._lengths import Fit as Fit
    from ._lengths import fit_examples as fit_examples
    from ._protocol import Checkpoint as Checkpoint
    from ._protocol import Done as Done
    from ._protocol import Error as Error
    from ._protocol import Integration as Integration
    from ._protocol import JudgeModel as JudgeModel
    from ._protocol import Log as Log
    from ._protocol import Metrics as Metrics
    from ._protocol import Progress as Progress
    from ._protocol import Stage as Stage
    from ._protocol import TrainerConfig as TrainerConfig
    from ._protocol import TrainerMessage as TrainerMessage
    from ._protocol import WandbConfig as WandbConfig
    from ._protocol import emit as emit
    from ._protocol import parse_line as parse_line
    from .tiny import ensure_model as ensure_model

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "CHAT_FORMATS": ("._encoders", "CHAT_FORMATS"),
    "Encoder": ("._lengths", "Encoder"),
    "Fit": ("._lengths", "Fit"),
    "UserDataError": ("._data", "UserDataError"),
    "counting_encoder": ("._encoders", "counting_encoder"),
    "fit_examples": ("._lengths", "fit_examples"),
    "has_chat_template": ("._encoders", "has_chat_template"),
    "parse_rows": ("._data", "parse_rows"),
    "Checkpoint": ("._protocol", "Checkpoint"),
    "Done": ("._protocol", "Done"),
    "Error": ("._protocol", "Error"),
    "Integration": ("._protocol", "Integration"),
    "JudgeModel": ("._protocol", "JudgeModel"),
    "Log": ("._protocol", "Log"),
    "Metrics": ("._protocol", "Metrics"),
    "Progress": ("._protocol", "Progress"),
    "Stage": ("._protocol", "Stage"),
    "TrainerConfig": ("._protocol", "TrainerConfig"),
    "TrainerMessage": ("._protocol", "TrainerMessage"),
    "WandbConfig": ("._protocol", "WandbConfig"),
    "emit": ("._protocol", "emit"),
    "parse_line": ("._protocol", "parse_line"),
    "ensure_model": (".tiny", "ensure_model"),
}
"""Each public name: the module it comes from, and its name there."""

__all__ = [
    "CHAT_FORMATS",
    "Checkpoint",
    "Done",
    "Encoder",
    "Error",
    "Fit",
    "Integration",
    "JudgeModel",
    "Log",
    "Metrics",
    "Progress",
    "Stage",
    "TrainerConfig",
    "TrainerMessage",
    "UserDataError",
    "WandbConfig",
    "counting_encoder",
    "emit",
    "ensure_model",
    "fit_examples",
    "has_chat_template",
    "parse_line",
    "parse_rows",
]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
