"""A grader's score for one sample of a model and one row of data: OpenAI's graders, each one
reward function once its templates are filled (issue 34; OpenAI's "Graders" guide).

Templates are Jinja's (``{{ item.answer }}``, ``{{ sample.output_text }}``,
``{{ sample.output_json.city }}``, ``{{ sample.output_tools }}``), rendered in Jinja's sandbox
with every name required: a name the row lacks is an ``invalid_variable_error`` and scores 0.
Metrics come from their libraries: rapidfuzz (``fuzzy_match``: its normalised Indel
similarity), NLTK (``bleu``: sentence BLEU re-weighted to the sample's length, smoothing
method 1, Chen & Cherry 2014; ``gleu``: Google's sentence GLEU, Wu et al. 2016), Google's
rouge-score (``rouge_1`` … ``rouge_5``, ``rouge_l``: F-measure); words are split on white
space. ``cosine`` needs an embedding model and ``meteor`` WordNet's data: neither is on this
server, and :func:`check` says so. ``multi``'s formula is evaluated by simpleeval (a safe
evaluator over Python's ``ast``: names and the listed functions only, never ``eval``).
"""

from __future__ import annotations

import ast
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._python import Limits, run_python
from ._spec import (Grader, MultiGrader, PythonGrader, ScoreModelGrader, StringCheckGrader,
                    TextSimilarityGrader)

__all__ = ["Graded", "Judge", "check", "grade", "grade_many", "sample_namespace", "similarity"]

Judge = Callable[[str, list[dict[str, Any]], dict[str, Any]], str]
"""``judge(model, messages, sampling_params)`` → the model's answer (``score_model``)."""

_FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min, "max": max, "abs": abs, "floor": math.floor, "ceil": math.ceil,
    "exp": math.exp, "sqrt": math.sqrt, "log": math.log}
_UNAVAILABLE = {"cosine": "cosine similarity needs an embedding model, and this server has "
                          "none: use fuzzy_match, bleu, gleu or rouge_*",
                "meteor": "meteor needs WordNet's data, which this server does not have: use "
                          "fuzzy_match, bleu, gleu or rouge_*"}


@dataclass
class Graded:
    """A grader's answer, in OpenAI's ``graders/run`` shape (:meth:`as_run`)."""

    name: str
    type: str
    reward: float
    sub_rewards: dict[str, float] = field(default_factory=dict)
    errors: dict[str, Any] = field(default_factory=dict)
    """Which of OpenAI's error flags are set (``python_grader_runtime_error``...), and their
    details."""
    output: str = ""
    """What a python grader printed (its first KiB)."""
    execution_time: float = 0.0

    def as_run(self) -> dict[str, Any]:
        """``{"reward", "sub_rewards", "metadata": {...}, "model_grader_token_usage_per_model"}``."""
        flags = ("formula_parse_error", "invalid_variable_error", "model_grader_parse_error",
                 "model_grader_refusal_error", "model_grader_server_error", "other_error",
                 "python_grader_runtime_error", "python_grader_server_error",
                 "sample_parse_error", "truncated_observation_error",
                 "unresponsive_reward_error")
        errors: dict[str, Any] = {flag: bool(self.errors.get(flag)) for flag in flags}
        errors.update({k: v for k, v in self.errors.items() if k.endswith(("_details", "_type"))})
        return {"reward": self.reward, "sub_rewards": self.sub_rewards,
                "model_grader_token_usage_per_model": {},
                "metadata": {"name": self.name, "type": self.type, "errors": errors,
                             "execution_time": self.execution_time,
                             "scores": {self.name: self.reward, **self.sub_rewards},
                             "sampled_model_name": None, "token_usage": None}}


def sample_namespace(model_sample: str) -> dict[str, Any]:
    """``sample`` for the templates: ``output_text``, ``output_json`` (the sample parsed,
    None when it is no JSON), ``output_tools`` (none: the sample is text)."""
    try:
        parsed = json.loads(model_sample)
    except ValueError:
        parsed = None
    return {"output_text": model_sample, "output_json": parsed, "output_tools": []}


def check(grader: Grader) -> None:
    """What a grader's JSON cannot say: its python source parses and defines ``grade``, its
    formula parses and names only its graders, its metric is here.

    Raises:
        ValueError: what is wrong, with the field's path first (``grader.source: ...``).
    """
    if isinstance(grader, MultiGrader):
        names = _formula_names(grader.calculate_output)
        if unknown := sorted(names - set(grader.graders) - set(_FUNCTIONS)):
            raise ValueError(f"grader.calculate_output: {unknown[0]!r} names no grader "
                             f"(graders: {', '.join(sorted(grader.graders))})")
        for name, sub in grader.graders.items():
            try:
                check(sub)
            except ValueError as exc:
                raise ValueError(str(exc).replace("grader.", f"grader.graders.{name}.", 1)) \
                    from None
    elif isinstance(grader, PythonGrader):
        try:
            tree = ast.parse(grader.source)
        except SyntaxError as exc:
            raise ValueError(f"grader.source: line {exc.lineno}: {exc.msg}") from None
        if not any(isinstance(n, ast.FunctionDef) and n.name == "grade" for n in tree.body):
            raise ValueError("grader.source: it defines no function grade(sample, item)")
    elif isinstance(grader, TextSimilarityGrader) and grader.evaluation_metric in _UNAVAILABLE:
        raise ValueError(f"grader.evaluation_metric: {_UNAVAILABLE[grader.evaluation_metric]}")


def grade(grader: Grader, model_sample: str, item: dict[str, Any], *,
          judge: Judge | None = None, limits: Limits = Limits(),
          user: tuple[int, int] | None = None) -> Graded:
    """``grader``'s score of ``model_sample`` for the data row ``item``. Blocking (a python
    grader runs a sandbox process; a score model calls ``judge``). Never raises for the
    user's grader or data: a failure scores 0 and sets its error flag.

    Args:
        judge: answers a ``score_model`` grader's messages (None: it scores 0, saying so).
        limits, user: the python grader's sandbox (:func:`run_python`).
    """
    started = time.perf_counter()
    (result,) = grade_many(grader, [model_sample], [item], judge=judge, limits=limits,
                           user=user)
    result.execution_time = time.perf_counter() - started
    return result


def grade_many(grader: Grader, samples: list[str], items: list[dict[str, Any]], *,
               judge: Judge | None = None, limits: Limits = Limits(),
               user: tuple[int, int] | None = None) -> list[Graded]:
    """:func:`grade` of each ``(samples[i], items[i])``, in order: what a trainer's step
    asks. A python grader (alone or in a ``multi``) grades the whole batch in one sandbox
    process (~50 ms, where one a sample would take that each). Never raises for the user's
    grader or data."""
    if isinstance(grader, MultiGrader):
        columns = [grade_many(sub, samples, items, judge=judge, limits=limits, user=user)
                   for sub in grader.graders.values()]
        return [_combined(grader, list(row)) for row in zip(*columns, strict=True)]
    if isinstance(grader, PythonGrader):
        rows = [{"sample": sample_namespace(sample), "item": item}
                for sample, item in zip(samples, items, strict=True)]
        scored, output = run_python(grader.source, rows, limits, user)
        return [Graded(grader.name, "python", one.score, errors={
                    "python_grader_runtime_error": True,
                    "python_grader_runtime_error_details": one.error} if one.error else {},
                    output=output) for one in scored]
    return [_one(grader, sample_namespace(sample), item, judge)
            for sample, item in zip(samples, items, strict=True)]


def _combined(grader: MultiGrader, graded: list[Graded]) -> Graded:
    """A ``multi`` grader's answer from its sub-graders' (in its ``graders``' order)."""
    scores = {name: g.reward for name, g in zip(grader.graders, graded, strict=True)}
    errors = {k: v for g in graded for k, v in g.errors.items()}
    try:
        reward = _formula(grader.calculate_output, scores)
    except Exception as exc:  # the user's formula: simpleeval's refusals, 1 / 0, ...
        errors.update(formula_parse_error=True, other_error_details=str(exc))
        reward = 0.0
    return Graded(grader.name, "multi", reward, scores, errors,
                  "".join(dict.fromkeys(g.output for g in graded)))


def _one(grader: StringCheckGrader | TextSimilarityGrader | ScoreModelGrader,
         sample: dict[str, Any], item: dict[str, Any], judge: Judge | None) -> Graded:
    try:
        if isinstance(grader, ScoreModelGrader):
            return _score_model(grader, sample, item, judge)
        text, reference = _render(grader.input, sample, item), \
            _render(grader.reference, sample, item)
    except _Undefined as exc:
        return Graded(grader.name, grader.type, 0.0, errors={
            "invalid_variable_error": True, "other_error_details": str(exc)})
    if isinstance(grader, StringCheckGrader):
        score = {"eq": text == reference, "ne": text != reference, "like": reference in text,
                 "ilike": reference.lower() in text.lower()}[grader.operation]
        return Graded(grader.name, grader.type, float(score))
    return Graded(grader.name, grader.type, similarity(grader.evaluation_metric, text, reference))


def similarity(metric: str, text: str, reference: str) -> float:
    """``text`` against ``reference`` by ``metric`` (see the module), 0 to 1.

    Raises:
        ValueError: ``cosine`` or ``meteor`` (not on this server).
    """
    if metric in _UNAVAILABLE:
        raise ValueError(_UNAVAILABLE[metric])
    if metric == "fuzzy_match":
        from rapidfuzz import fuzz

        return float(fuzz.ratio(text, reference)) / 100
    words, reference_words = text.split(), reference.split()
    if metric == "bleu":
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

        if not words:
            return 0.0
        return float(sentence_bleu([reference_words], words, auto_reweigh=True,
                                   smoothing_function=SmoothingFunction().method1))
    if metric == "gleu":
        from nltk.translate.gleu_score import sentence_gleu

        return float(sentence_gleu([reference_words], words))
    from rouge_score import rouge_scorer

    kind = "rougeL" if metric == "rouge_l" else f"rouge{metric[-1]}"
    scored = rouge_scorer.RougeScorer([kind]).score(reference, text)[kind]
    return float(scored.fmeasure)


class _Undefined(Exception):
    """A template names what the row or the sample does not have."""


def _render(template: str, sample: dict[str, Any], item: dict[str, Any]) -> str:
    from jinja2 import StrictUndefined, TemplateError
    from jinja2.sandbox import SandboxedEnvironment

    try:
        return SandboxedEnvironment(undefined=StrictUndefined).from_string(template).render(
            sample=sample, item=item)
    except TemplateError as exc:
        raise _Undefined(f"the template {template[:80]!r}: {exc}") from None


def _score_model(grader: ScoreModelGrader, sample: dict[str, Any], item: dict[str, Any],
                 judge: Judge | None) -> Graded:
    low, high = grader.range or (0.0, 1.0)
    if judge is None:
        return Graded(grader.name, grader.type, 0.0, errors={
            "model_grader_server_error": True,
            "model_grader_server_error_details": "no model to score with here"})
    messages = [{**m, "content": _render(m["content"], sample, item)}
                if isinstance(m.get("content"), str) else m for m in grader.input]
    try:
        answer = judge(grader.model, messages,
                       grader.sampling_params.as_chat() if grader.sampling_params else {})
    except Exception as exc:  # the judge's server failed: the sample is not to blame
        return Graded(grader.name, grader.type, 0.0, errors={
            "model_grader_server_error": True, "model_grader_server_error_details": str(exc)})
    number = _first_number(answer)
    if number is None:
        return Graded(grader.name, grader.type, 0.0, errors={
            "model_grader_parse_error": True,
            "other_error_details": f"the model answered {answer[:200]!r}, no number"})
    return Graded(grader.name, grader.type, min(max(number, low), high))


def _first_number(answer: str) -> float | None:
    """The score in a judge's answer: the whole answer as JSON (a number, or ``{"score":
    n}``, OpenAI's structured form), else its first number."""
    import re

    try:
        parsed = json.loads(answer)
        value = parsed.get("score") if isinstance(parsed, dict) else parsed
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    except ValueError:
        pass
    found = re.search(r"-?\d+(?:\.\d+)?", answer)
    return float(found.group()) if found else None


def _formula(formula: str, scores: dict[str, float]) -> float:
    from simpleeval import SimpleEval

    value = SimpleEval(names=dict(scores), functions=_FUNCTIONS).eval(
        formula.replace("^", "**"))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"the formula gave {value!r}, not a finite number")
    return float(value)


def _formula_names(formula: str) -> set[str]:
    try:
        tree = ast.parse(formula.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"grader.calculate_output: {exc.msg}") from None
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
