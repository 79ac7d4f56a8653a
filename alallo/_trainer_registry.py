"""The trainers a job may use: the built-in ones and those the operator registers.

An account never chooses an executable on the server (docs/security.md).
A job picks a trainer by name (``"trainer": {"name": "my-sft"}``, or just
``"trainer": "my-sft"``); the operator registers each name with its command
in the settings (``alallo.toml``)::

    [[trainers]]
    name = "my-sft"
    command = ["/opt/trainers/my-sft", "--fast"]
    description = "Our in-house SFT trainer"

``GET /v1/trainers`` lists them, built-in ones first. A registered trainer
speaks the trainer protocol (``docs/trainer-protocol.md``): alallo starts
``<command> <config.json>``. Only the embedded default's local account and
accounts the operator allowed (``alallo accounts create --allow-commands``)
may still send a command of their own (``"trainer": {"command": [...]}``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._errors import InvalidRequest

__all__ = ["BUILT_IN_TRAINERS", "RegisteredTrainer", "TrainerInfo", "TrainerRegistry"]


TRAINER_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
"""A trainer's name: lower-case letters, digits, ``.``, ``_`` and ``-``; 1 to 64 characters."""


class RegisteredTrainer(BaseModel):
    """One trainer the operator registers (``Settings.trainers``).

    Raises:
        pydantic.ValidationError: a malformed name, an empty command, or a
            built-in trainer's name.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=TRAINER_NAME_PATTERN)
    """What a job names it by, e.g. ``"my-sft"``."""
    command: list[str] = Field(min_length=1)
    """The program and its first arguments; the config file's path is appended."""
    description: str = ""
    """One line for ``GET /v1/trainers`` and ``alallo trainers``."""

    @field_validator("name")
    @classmethod
    def _not_built_in(cls, value: str) -> str:
        if value in BUILT_IN_TRAINERS:
            raise ValueError(f"{value!r} is a built-in trainer's name; pick another")
        return value


@dataclass(frozen=True)
class TrainerInfo:
    """A trainer as ``GET /v1/trainers`` shows it (never its command)."""

    name: str
    description: str
    built_in: bool

BUILT_IN_TRAINERS: dict[str, str] = {
    "trl": "Fine-tuning with TRL, transformers and peft (LoRA or full); the default.",
    "simulated": "Scripted steps without a model, for tests and load runs; costs far less.",
}
"""The trainers every server has, by name, with their descriptions."""


class TrainerRegistry:
    """The trainers of one server: built in, then registered in settings order.

    Args:
        registered: ``Settings.trainers``.

    Raises:
        ValueError: two registered trainers share a name.
    """

    def __init__(self, registered: list[RegisteredTrainer]) -> None:
        self._registered: dict[str, RegisteredTrainer] = {}
        for trainer in registered:
            if trainer.name in self._registered:
                raise ValueError(f"trainer {trainer.name!r} is registered twice")
            self._registered[trainer.name] = trainer

    def listed(self) -> list[TrainerInfo]:
        """Every trainer a job may name here, built-in ones first."""
        built_in = [TrainerInfo(name, text, True) for name, text in BUILT_IN_TRAINERS.items()]
        return built_in + [TrainerInfo(t.name, t.description, False)
                           for t in self._registered.values()]

    def command(self, name: str) -> list[str]:
        """The registered trainer's command (without the config path).

        Raises:
            InvalidRequest: no trainer of that name is registered (``param="trainer.name"``).
        """
        trainer = self._registered.get(name)
        if trainer is None:
            known = ", ".join([*BUILT_IN_TRAINERS, *self._registered])
            raise InvalidRequest(
                f"no trainer {name!r} on this server; it has: {known} (GET /v1/trainers)",
                param="trainer.name")
        return list(trainer.command)
