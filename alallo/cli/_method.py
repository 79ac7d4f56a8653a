"""The options of ``alallo jobs create`` and ``alallo estimate`` that choose how a job trains:
``--method``, DPO's ``--beta``, and reinforcement fine-tuning's ``--grader`` and
hyperparameters.

Of reinforcement's hyperparameters, ``reasoning_effort`` has no option: the models here
answer without reasoning first, so the server takes only its default. The bounds of each
value are the server's to check (its refusal names the field), as for the other options;
what is checked here is what the server cannot see: the grader file, and a ``--grader``
given to a method that would not use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from alallo.cli._common import fail
from alallo.cli._graders import read_json
from alallo.client import HyperparameterFields

__all__ = ["BetaOption", "ComputeMultiplierOption", "EvalIntervalOption", "EvalSamplesOption",
           "GraderOption", "MaxCompletionTokensOption", "MethodOption", "method_fields"]

MethodName = Literal["supervised", "dpo", "reinforcement"]

MethodOption = Annotated[MethodName | None, typer.Option(
    help="supervised (examples), dpo (preference pairs) or reinforcement (prompts whose "
         "answers --grader scores).")]
BetaOption = Annotated[float | None, typer.Option(min=0.0, help="DPO's beta (default 0.1).")]
GraderOption = Annotated[Path | None, typer.Option(
    help="Reinforcement: a file holding the grader that scores the model's answers, OpenAI's "
         "JSON (try it first: `alallo graders run`).", show_default=False)]
ComputeMultiplierOption = Annotated[float | None, typer.Option(
    help="Reinforcement: answers sampled per prompt at each step, 4 × this (default 1).")]
EvalIntervalOption = Annotated[int | None, typer.Option(
    min=1, help="Reinforcement, with --validation-file: grade answers to its prompts every "
                "this many steps (default: at each checkpoint).")]
EvalSamplesOption = Annotated[int | None, typer.Option(
    min=1, help="Reinforcement: answers sampled per validation prompt (default 1).")]
MaxCompletionTokensOption = Annotated[int | None, typer.Option(
    min=1, help="Reinforcement: the longest answer sampled, in tokens (default 128).")]


def method_fields(
    method: MethodName | None,
    grader: Path | None,
    *,
    beta: float | None = None,
    compute_multiplier: float | None = None,
    eval_interval: int | None = None,
    eval_samples: int | None = None,
    max_completion_tokens: int | None = None,
) -> tuple[dict[str, Any] | None, HyperparameterFields]:
    """The request's ``grader`` (read from its file) and the method's ``hyperparameters``
    from the command's options (None: not given, the server's default).

    A reinforcement hyperparameter given with another method is sent as it is: the
    server's refusal names it.

    Raises:
        typer.Exit: (after one red line on stderr) ``--grader`` without ``--method
            reinforcement``, ``--method reinforcement`` without ``--grader``, or a grader
            file that cannot be read or holds no JSON object.
    """
    if grader is not None and method != "reinforcement":
        fail(f"--grader goes with --method reinforcement, not {method or 'supervised'} "
             "(the default): add --method reinforcement, or leave --grader out")
    if method == "reinforcement" and grader is None:
        fail("--method reinforcement needs --grader FILE: the grader that scores the "
             "model's answers, OpenAI's JSON")
    body = None if grader is None else read_json(grader, "grader")
    if grader is not None and not isinstance(body, dict):
        fail(f"{grader} holds no grader: a JSON object such as "
             '{"type": "string_check", ...} was expected')
    hyperparameters = HyperparameterFields(
        beta=beta, compute_multiplier=compute_multiplier, eval_interval=eval_interval,
        eval_samples=eval_samples, max_completion_tokens=max_completion_tokens)
    return body, hyperparameters
