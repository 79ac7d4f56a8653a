"""OpenAI's graders (issue 34): what each one is (:mod:`._spec`), its score of a model's sample
for a row of data (:mod:`._grade`), and the python grader's sandbox (:mod:`._python`,
:mod:`._sandbox`, :mod:`._landlock`). Used by the server (``/v1/fine_tuning/alpha/graders/run``
and ``/validate``) and by the trainer that trains on their rewards, so that both give the same
score.
"""

from __future__ import annotations

from ._grade import Graded, Judge, check, grade, grade_many, sample_namespace, similarity
from ._python import Limits, PythonScore, run_python
from ._spec import (GRADER, Grader, GraderRunRequest, GraderValidateRequest, MultiGrader, PythonGrader, ScoreModelGrader,
                    StringCheckGrader, SubGrader, TextSimilarityGrader)

__all__ = ["GRADER", "Graded", "Grader", "GraderRunRequest", "GraderValidateRequest", "Judge", "Limits", "MultiGrader", "PythonGrader",
           "PythonScore", "ScoreModelGrader", "StringCheckGrader", "SubGrader",
           "TextSimilarityGrader", "check", "grade", "grade_many", "run_python", "sample_namespace",
           "similarity"]
