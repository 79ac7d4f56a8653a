"""The environment the Hugging Face libraries read when they are imported, and the loggers
of theirs that speak to no user."""

import logging
import os

QUIET_ENV = {
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}
"""Offline (models load from local paths only), no telemetry, no progress bars: set before
the first import, by the TRL trainer and by the warm process that imports it ahead."""

QUIET_LOGGERS = ("bitsandbytes", "kernels")
"""bitsandbytes (which peft imports) asks the ``kernels`` package for a faster CPU kernel
from the Hugging Face Hub when it is imported, and warns "Failed to load CPU
gemm_4bit_forward from kernels-community … pip install kernels" when none comes: offline,
none does, its own kernels serve, and nothing changes for anyone. Their warnings are
silenced (ERROR and up still speak)."""


def quiet_process() -> None:
    """Make this process quiet and offline before it imports the libraries: :data:`QUIET_ENV`
    where the environment does not say otherwise, and :data:`QUIET_LOGGERS` at ERROR. Every
    process that imports them calls it first (trainers, the warm process, merge, inference)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for library in QUIET_LOGGERS:
        logging.getLogger(library).setLevel(logging.ERROR)
