"""Reinforcement fine-tuning (issue 34): TRL's ``GRPOTrainer`` rewarded by OpenAI's graders.

GRPO (Shao et al. 2024, DeepSeekMath) samples a group of ``num_generations`` answers to each
prompt, scores them, and moves the model toward the answers scored above their group's mean.
Here the score is the job's grader (:mod:`alallo.trainers.graders`): the same code that
answers ``/v1/fine_tuning/alpha/graders/run``, so a user's test of a grader gives the score
training uses. A python grader runs sandboxed, one process per step's answers. A grader that
fails on an answer (its exception, a time-out, a template naming a field the row lacks)
scores it 0 and the log says so once per line of data and reason, naming the line; the job
goes on.

What the user watches comes from here too: each step's mean reward and its spread are TRL's
``reward`` and ``reward_std``; each grader's mean (a ``multi`` grader's sub-graders, or the
single grader's own) is gathered by :class:`GraderReward` between two logging steps and
read by the progress callback (:meth:`GraderReward.take`).

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._protocol import Log, TrainerConfig
from ._ranks import world_size
from ._trl_fit import LINE
from ._trl_report import ProtocolOut
from ._trl_judge import LocalJudge
from .graders import GRADER, Graded, Judge, grade_many

if TYPE_CHECKING:
    from datasets import Dataset  # type: ignore[import-untyped]

__all__ = ["GraderReward", "grpo_trainer", "prompts_dataset"]

_REPORTED_A_STEP = 3
"""Lines of grader failures the log gets per step; the rest are counted."""


def prompts_dataset(rows: list[tuple[int, dict[str, Any]]]) -> Dataset:
    """The reinforcement rows as TRL's conversational prompts: ``prompt`` (the messages),
    ``item`` (the row, as JSON: rows may differ in their fields) and the row's line."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": row["messages"], "item": json.dumps(row["item"]),
                               LINE: line} for line, row in rows])


class GraderReward:
    """The job's grader as a TRL reward function: ``reward(prompts, completions, item,
    line, ...)`` → one score per completion (GRPO's ``reward_funcs``).

    Args:
        grader: the grader's JSON (OpenAI's shape, checked when the job was created).
        out: where the log lines of failed grades go.
        training: whether the trainer is training now (False: evaluating), read when it
            scores, so that the two are gathered apart.
        judge: answers ``score_model`` graders (:class:`~alallo.trainers._trl_judge.LocalJudge`).
    """

    __name__ = "grader"  # TRL logs a reward function's figures under its name

    def __init__(self, grader: dict[str, Any], out: ProtocolOut,
                 training: Callable[[], bool] = lambda: True, judge: Judge | None = None,
                 ) -> None:
        self.grader = GRADER.validate_python(grader)
        self.training = training
        self._judge = judge
        self._out = out
        self._sums: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
        self._reported: set[tuple[int, str]] = set()

    def __call__(self, prompts: list[Any], completions: list[Any], item: list[str],
                 **columns: Any) -> list[float]:
        texts = [_text(completion) for completion in completions]
        lines = columns.get(LINE) or [0] * len(texts)
        graded = grade_many(self.grader, texts, [json.loads(row) for row in item],
                            judge=self._judge)
        sums = self._sums[self.training()]
        for one in graded:
            for name, score in (one.sub_rewards or {self.grader.name: one.reward}).items():
                total = sums.setdefault(name, [0.0, 0.0])
                total[0] += score
                total[1] += 1
        self._report_failures(graded, lines)
        return [one.reward for one in graded]

    def take(self, *, training: bool = True) -> dict[str, float]:
        """Each grader's mean score since the last call (of training's answers, or of the
        evaluation's), by name; empty when none was scored."""
        sums, self._sums[training] = self._sums[training], {}
        return {name: round(total / count, 4) for name, (total, count) in sums.items()
                if count}

    def _report_failures(self, graded: list[Graded], lines: list[int]) -> None:
        failed = [(line, _reason(one)) for one, line in zip(graded, lines, strict=True)
                  if one.errors]
        fresh = [(line, why) for line, why in dict.fromkeys(failed)
                 if (line, why) not in self._reported]
        for line, why in fresh[:_REPORTED_A_STEP]:
            self._reported.add((line, why))
            self._out(Log(text=f"Line {line}: the grader scored an answer 0: {why}"))
        if len(fresh) > _REPORTED_A_STEP:
            self._out(Log(text=f"... and {len(fresh) - _REPORTED_A_STEP} more lines whose "
                               "answers the grader scored 0 for a failure"))


def _text(completion: Any) -> str:
    """An answer's text: TRL gives a conversational prompt's completion as messages."""
    if isinstance(completion, list):
        return "".join(str(message.get("content", "")) for message in completion)
    return str(completion)


def _reason(graded: Graded) -> str:
    """Why an answer scored 0, in a line that is the same for the same cause (a judge's
    answer without a number is not quoted: each would make its own line)."""
    if graded.errors.get("model_grader_parse_error"):
        return "the score_model grader's judge answered no number"
    details = [str(value) for key, value in graded.errors.items()
               if key.endswith("_details") and value]
    flags = [key for key, value in graded.errors.items() if value is True]
    return (details[0] if details else ", ".join(flags) or "an error")[:300]


def grpo_trainer(config: TrainerConfig, model: Any, tokenizer: Any,
                 datasets: tuple[Any, Any], common: dict[str, Any], peft_config: Any,
                 callbacks: list[Any], out: ProtocolOut, *, longest_prompt: int,
                 max_length: int) -> Any:
    """TRL's ``GRPOTrainer`` for the job: ``batch_size`` prompts a step, each answered
    ``num_generations`` times (the step trains on all the answers), answers up to
    ``max_completion_length`` tokens (less when the longest prompt leaves less of the
    context), evaluated on ``eval_samples`` answers a validation prompt. The reward function
    is :class:`GraderReward`, given to the progress callback as ``callbacks[0].reward``."""
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    dataset, eval_dataset = datasets
    answer = min(config.max_completion_length, max_length - longest_prompt)
    if answer < config.max_completion_length:
        out(Log(text=f"Answers are sampled up to {answer} tokens: the longest prompt is "
                     f"{longest_prompt} of the model's {max_length}"))
    group = config.num_generations
    ranks = world_size()
    args = {key: value for key, value in common.items() if key != "max_length"} | dict(
        per_device_train_batch_size=max(1, config.batch_size // ranks) * group,
        num_generations=group, max_completion_length=answer, shuffle_dataset=True,
        beta=0.0, temperature=1.0)
    if eval_dataset is not None:
        args |= dict(num_generations_eval=config.eval_samples,
                     per_device_eval_batch_size=max(1, config.batch_size // ranks)
                     * config.eval_samples)
    judge = LocalJudge(config.judges, out, model.device) if config.judges else None
    reward = GraderReward(config.grader or {}, out, judge=judge)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=GRPOConfig(**args),
                          train_dataset=dataset, eval_dataset=eval_dataset,
                          processing_class=tokenizer, peft_config=peft_config,
                          callbacks=callbacks)
    reward.training = lambda: bool(trainer.model.training)
    callbacks[0].reward = reward
    return trainer
