"""OpenAI's graders (issue 34): what each one is (:mod:`._spec`), its score of a model's sample
for a row of data (:mod:`._grade`), and the python grader's sandbox (:mod:`._python`,
:mod:`._sandbox`, :mod:`._landlock`). Used by the server (``/v1/fine_tuning/alpha/graders/run``
and ``/validate``) and by the trainer that trains on their rewards, so that both give the same
score.

Names load on first use (PEP 562, :mod:`alallo._lazy`): the sandbox process
(``python -m alallo.trainers.graders._sandbox``, one per batch of answers) imports this package
first, and must not pay for pydantic, Jinja and the metric libraries it never uses (~0.35 s
of imports on a step of a reinforcement job, where the sandbox itself starts in ~50 ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from ._grade import Graded as Graded
    from ._grade import Judge as Judge
    from ._grade import check as check
    from ._grade import grade as grade
    from ._grade import grade_many as grade_many
    from ._grade import sample_namespace as sample_namespace
    from ._grade import similarity as similarity
    from ._python import Limits as Limits
    from ._python import PythonScore as PythonScore
    from ._python import run_python as run_python
    from ._spec import GRADER as GRADER
    from ._spec import Grader as Grader
    from ._spec import GraderRunRequest as GraderRunRequest
    from ._spec import GraderValidateRequest as GraderValidateRequest
    from ._spec import MultiGrader as MultiGrader
    from ._spec import PythonGrader as PythonGrader
    from ._spec import ScoreModelGrader as ScoreModelGrader
    from ._spec import StringCheckGrader as StringCheckGrader
    from ._spec import SamplingParams as SamplingParams
    from ._spec import SubGrader as SubGrader
    from ._spec import TextSimilarityGrader as TextSimilarityGrader
    from ._spec import judge_models as judge_models

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "Graded": ("._grade", "Graded"),
    "Judge": ("._grade", "Judge"),
    "check": ("._grade", "check"),
    "grade": ("._grade", "grade"),
    "grade_many": ("._grade", "grade_many"),
    "sample_namespace": ("._grade", "sample_namespace"),
    "similarity": ("._grade", "similarity"),
    "Limits": ("._python", "Limits"),
    "PythonScore": ("._python", "PythonScore"),
    "run_python": ("._python", "run_python"),
    "GRADER": ("._spec", "GRADER"),
    "Grader": ("._spec", "Grader"),
    "GraderRunRequest": ("._spec", "GraderRunRequest"),
    "GraderValidateRequest": ("._spec", "GraderValidateRequest"),
    "MultiGrader": ("._spec", "MultiGrader"),
    "PythonGrader": ("._spec", "PythonGrader"),
    "ScoreModelGrader": ("._spec", "ScoreModelGrader"),
    "StringCheckGrader": ("._spec", "StringCheckGrader"),
    "SamplingParams": ("._spec", "SamplingParams"),
    "SubGrader": ("._spec", "SubGrader"),
    "TextSimilarityGrader": ("._spec", "TextSimilarityGrader"),
    "judge_models": ("._spec", "judge_models"),
}

__all__ = ["GRADER", "Graded", "Grader", "GraderRunRequest", "GraderValidateRequest",
           "Judge", "Limits", "MultiGrader", "PythonGrader", "PythonScore",
           "SamplingParams", "ScoreModelGrader", "StringCheckGrader", "SubGrader", "TextSimilarityGrader",
           "check", "grade", "grade_many", "judge_models", "run_python", "sample_namespace",
           "similarity"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
