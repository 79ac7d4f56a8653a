"""The job spec a user sends (alallo/jobs/_spec.py, _hyperparameters.py, _method_forms.py),
without I/O: what is refused, by which field, and what the OpenAI and Together forms
become (issue 31: no number that is not one, no nested field dropped, no suffix that
breaks the model's URL)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from alallo.jobs import FAILURE_SWITCHES, JobSpec, SimulatedTrainer

pytestmark = pytest.mark.unit

BASE = {"model": "alallo/tiny-gpt2", "training_file": "file-1"}


def refusal(fields: dict[str, Any]) -> tuple[str, str]:
    """The first error's field path and message for ``BASE`` with ``fields``."""
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate({**BASE, **fields})
    first = caught.value.errors()[0]
    return ".".join(str(part) for part in first["loc"]), first["msg"]


@pytest.mark.parametrize(("fields", "param"), [
    ({"early_stopping": {"patience": 2, "min_delta": float("inf")},
      "validation_file": "file-2"}, "early_stopping.min_delta"),
    ({"hyperparameters": {"learning_rate": float("nan")}}, "hyperparameters.learning_rate"),
    ({"hyperparameters": {"weight_decay": float("-inf")}}, "hyperparameters.weight_decay"),
    ({"hyperparameters": {"learning_rate_multiplier": float("inf")}},
     "hyperparameters.learning_rate_multiplier"),
    ({"method": "dpo", "hyperparameters": {"beta": float("nan")}}, "hyperparameters.beta"),
    ({"method": {"type": "dpo", "dpo": {"hyperparameters": {"beta": float("inf")}}}},
     "method.dpo.hyperparameters.beta"),
    ({"training_method": {"method": "dpo", "dpo_beta": float("inf")}},
     "training_method.dpo_beta"),
])
def test_a_number_that_is_not_finite_is_refused_by_its_field(fields: dict[str, Any],
                                                              param: str) -> None:
    assert refusal(fields) == (param, "Input should be a finite number")


def test_a_simulated_trainers_infinite_pace_is_refused() -> None:
    where, message = refusal({"trainer": {"type": "simulated", "step_delay_s": float("inf")}})
    assert (where, message) == ("trainer", "step_delay_s: Input should be a finite number")


@pytest.mark.parametrize(("fields", "param"), [
    ({"hyperparameters": {"max_steps": True}}, "hyperparameters.max_steps"),
    ({"hyperparameters": {"n_epochs": False}}, "hyperparameters.n_epochs"),
    ({"hyperparameters": {"batch_size": "4"}}, "hyperparameters.batch_size"),
    ({"hyperparameters": {"n_epochs": 2.0}}, "hyperparameters.n_epochs"),
    ({"hyperparameters": {"learning_rate": True}}, "hyperparameters.learning_rate"),
    ({"seed": True}, "seed"),
    ({"early_stopping": {"patience": True}, "validation_file": "file-2"},
     "early_stopping.patience"),
])
def test_a_boolean_or_a_string_is_no_number(fields: dict[str, Any], param: str) -> None:
    assert refusal(fields)[0] == param


def test_auto_and_whole_numbers_for_floats_are_taken() -> None:
    spec = JobSpec.model_validate({**BASE, "hyperparameters": {
        "n_epochs": "auto", "batch_size": "auto", "learning_rate_multiplier": "auto",
        "learning_rate": 1, "max_steps": 12}})
    assert spec.hyperparameters.model_dump(exclude_none=True) == {"learning_rate": 1.0,
                                                                  "max_steps": 12}


@pytest.mark.parametrize(("fields", "param"), [
    ({"method": {"type": "supervised", "supervised": {"trainer": {"command": ["sh"]}}}},
     "method.supervised.trainer"),
    ({"method": {"type": "supervised", "supervised": {"hyperparameters": {"n_epochs": 2,
                                                                          "epochs": 3}}}},
     "method.supervised.hyperparameters.epochs"),
    ({"method": {"type": "dpo", "dpo": {"hyperparameters": {"beta": 0.1}}, "grader": {}}},
     "method.grader"),
    ({"method": {"type": "reinforcement"}}, "method.reinforcement"),  # its grader is missing
    ({"method": {"type": "reinforcement", "reinforcement": {"grader": {"type": "label_model"}}}},
     "method.reinforcement.grader"),
    ({"method": {"type": "dpo", "supervised": {}}}, "method.supervised"),
    ({"training_method": {"method": "sft", "trainer": {"command": ["sh"]}}},
     "training_method.trainer"),
    ({"training_method": {"method": "sft", "train_on_inputs": True}},
     "training_method.train_on_inputs"),
    ({"training_method": {"method": "dpo", "rpo_alpha": 0.5}}, "training_method.rpo_alpha"),
    ({"training_method": {"method": "dpo"}, "method": "dpo"}, "training_method"),
    ({"training_method": {"method": "dpo", "dpo_beta": 0.2},
      "hyperparameters": {"beta": 0.3}}, "hyperparameters.beta"),
    ({"method": {"type": "dpo", "dpo": {"hyperparameters": {"beta": 0.2}}},
      "hyperparameters": {"beta": 0.3}}, "hyperparameters.beta"),
])
def test_an_unknown_or_lost_field_in_the_method_forms_is_refused_by_its_path(
        fields: dict[str, Any], param: str) -> None:
    assert refusal(fields)[0] == param


def test_the_method_forms_unfold_into_method_and_hyperparameters() -> None:
    openai = JobSpec.model_validate({**BASE, "method": {
        "type": "dpo", "dpo": {"hyperparameters": {"beta": 0.2, "n_epochs": "auto"}}},
        "hyperparameters": {"beta": 0.2, "batch_size": 2}})
    assert (openai.method, openai.hyperparameters.beta, openai.hyperparameters.batch_size,
            openai.hyperparameters.n_epochs) == ("dpo", 0.2, 2, None)
    # What Together's SDK sends when nothing but the method is asked for.
    together = JobSpec.model_validate({**BASE, "training_method": {
        "method": "dpo", "dpo_beta": 0.3, "dpo_normalize_logratios_by_length": False,
        "dpo_reference_free": False, "rpo_alpha": 0.0, "simpo_gamma": 0.0}})
    assert (together.method, together.hyperparameters.beta) == ("dpo", 0.3)
    sft = JobSpec.model_validate({**BASE, "training_method": {"method": "sft",
                                                              "train_on_inputs": "auto"}})
    assert sft.method == "supervised"


@pytest.mark.parametrize("suffix", ["a/b", "a:b", "my model", "modèle", "x" * 65, "..", "a\n"])
def test_a_suffix_is_letters_digits_dashes_and_underscores(suffix: str) -> None:
    assert refusal({"suffix": suffix})[0] == "suffix"


@pytest.mark.parametrize("suffix", ["", "my-model_2", "x" * 64])
def test_openais_suffixes_are_taken(suffix: str) -> None:
    assert JobSpec.model_validate({**BASE, "suffix": suffix}).suffix == suffix


def test_the_failure_switches_are_those_that_fail_the_platform() -> None:
    assert FAILURE_SWITCHES == ("fail_at_step", "memory_surprise")
    assert SimulatedTrainer(fail_at_step=3).failure_switch() == "fail_at_step"
    assert SimulatedTrainer(memory_surprise=2.0).failure_switch() == "memory_surprise"
    assert SimulatedTrainer(step_delay_s=1, step_noise=0.5, slow_step_every=3,
                            memory_surprise=1.0).failure_switch() is None
