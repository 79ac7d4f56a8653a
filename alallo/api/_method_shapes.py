"""A job's ``method`` as OpenAI's object, with the hyperparameters it runs (API.md, Jobs),
as TypedDicts; see :mod:`alallo.api._shapes`."""

# No ``from __future__ import annotations`` (PEP 655; see ``_shapes``).
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from ._shapes import document

__all__ = ["JobMethod", "JobMethodSettings", "MethodHyperparameters"]


class MethodHyperparameters(TypedDict):
    """OpenAI's hyperparameters of a method (``SupervisedHyperparameters``,
    ``DpoHyperparameters``), as the job runs them: never ``"auto"`` or None."""

    n_epochs: int
    """Passes over the training file its steps make (the last may be partial, when
    ``max_steps`` set the length)."""
    batch_size: int
    """Examples per step."""
    learning_rate_multiplier: float
    """The peak learning rate over the default (1e-3 for LoRA, 1e-4 full): 1 unless set,
    or that of the ``learning_rate`` given."""
    beta: NotRequired[float]
    """DPO only: the KL penalty's weight."""
    compute_multiplier: NotRequired[float]
    """Reinforcement only: answers sampled per prompt in a step are 4 × this (at least 2)."""
    eval_interval: NotRequired[int]
    """Reinforcement only: steps between evaluations on the validation prompts."""
    eval_samples: NotRequired[int]
    """Reinforcement only: answers sampled per validation prompt."""
    reasoning_effort: NotRequired[Literal["default"]]
    """Reinforcement only: the models here answer without reasoning first."""


class JobMethodSettings(TypedDict):
    """What ``method.supervised`` (or ``method.dpo``, ``method.reinforcement``) holds."""

    hyperparameters: MethodHyperparameters
    grader: NotRequired[dict[str, Any]]
    """Reinforcement only: OpenAI's grader, as given."""


class JobMethod(TypedDict):
    """A job's ``method``, OpenAI's object: ``{"type": KIND, KIND: {"hyperparameters":
    {...}}}``, with only the key of its type."""

    type: Literal["supervised", "dpo", "reinforcement"]
    """``supervised`` (SFT), ``dpo`` (preference pairs) or ``reinforcement`` (prompts and
    a grader)."""
    supervised: NotRequired[JobMethodSettings]
    """A ``supervised`` job's settings."""
    dpo: NotRequired[JobMethodSettings]
    """A ``dpo`` job's settings."""
    reinforcement: NotRequired[JobMethodSettings]
    """A ``reinforcement`` job's settings."""


document(MethodHyperparameters, JobMethodSettings, JobMethod)
