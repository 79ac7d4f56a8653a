"""``/v1/fine_tuning/alpha/graders/validate`` and ``/run``: OpenAI's, as the ``openai``
package's ``fine_tuning.alpha.graders.validate / run`` send and read them
(:mod:`alallo.runtime._graders`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from alallo.runtime import GraderRuns

from ._auth import account_of, runtime_of
from ._body import json_object

__all__ = ["run_grader", "validate_grader"]


async def validate_grader(request: Request) -> JSONResponse:
    """``POST …/graders/validate`` with ``{"grader"}`` → ``{"grader"}``; 400 naming what is
    wrong."""
    await account_of(request)
    return JSONResponse(_graders(request).validate(await json_object(request)))


async def run_grader(request: Request) -> JSONResponse:
    """``POST …/graders/run`` with ``{"grader", "model_sample", "item"}`` → ``{"reward",
    "sub_rewards", "metadata", "model_grader_token_usage_per_model"}``."""
    account = await account_of(request)
    return JSONResponse(await _graders(request).run(account, await json_object(request)))


def _graders(request: Request) -> GraderRuns:
    runtime = runtime_of(request)
    return GraderRuns(runtime.completions, runtime.trainer_user)
