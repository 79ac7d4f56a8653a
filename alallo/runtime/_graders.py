"""OpenAI's grader endpoints, ``/v1/fine_tuning/alpha/graders/validate`` and ``/run``, so that a
user tries a grader before paying for a job (issue 34). The score is the one the trainer
would use: the same :func:`alallo.trainers.graders.grade`. A ``score_model`` grader asks one of
the account's models through this server's own chat completions (charged as any). A python
grader runs in its sandbox, as the trainer user on a root server.
"""

from __future__ import annotations

import re
from typing import Any

import trio
from .._errors import InvalidRequest
from ..executors import TrainerUser
from ..serving import Completions
from ..trainers.graders import Grader, GraderRunRequest, GraderValidateRequest, check, grade

__all__ = ["GraderRuns"]

_PARAM = re.compile(r"^(grader(?:\.[\w.]+)?): ")


class GraderRuns:
    """Validate and run graders for an account.

    Args:
        completions: the server's completions (a ``score_model`` grader's judge).
        user: the trainer user, whom the python grader runs as (None: this process's user).
    """

    def __init__(self, completions: Completions, user: TrainerUser | None) -> None:
        self._completions = completions
        self._user = (user.uid, user.gid) if user is not None else None

    def validate(self, body: dict[str, Any]) -> dict[str, Any]:
        """``{"grader": {...}}`` → ``{"grader": {...}}``, the grader as it will run.

        Raises:
            pydantic.ValidationError: a field is not OpenAI's (400 naming it).
            InvalidRequest: what the JSON cannot say is wrong (a source without ``grade``,
                a formula naming no grader, a metric this server lacks), naming the field.
        """
        request = GraderValidateRequest.model_validate(body)
        _check(request.grader)
        return {"grader": request.grader.model_dump(exclude_none=True)}

    async def run(self, account_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """``{"grader", "model_sample", "item"}`` → OpenAI's ``GraderRunResponse``:
        ``reward``, ``sub_rewards``, ``metadata`` (``errors``: the user's grader or data
        failing is a 0 with its flag, not an error of the request).

        Raises:
            pydantic.ValidationError, InvalidRequest: as :meth:`validate`, and for
                ``model_sample`` (text) and ``item`` (an object).
        """
        request = GraderRunRequest.model_validate(body)
        _check(request.grader)
        grader, sample, item = request.grader, request.model_sample, request.item
        token = trio.lowlevel.current_trio_token()

        def judge(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
            async def ask() -> str:
                answer = await self._completions.start(
                    account_id, {**params, "model": model, "messages": messages}, chat=True)
                return str((await answer.body())["choices"][0]["message"]["content"] or "")
            return trio.from_thread.run(ask, trio_token=token)

        graded = await trio.to_thread.run_sync(
            lambda: grade(grader, sample, item, judge=judge, user=self._user))
        return graded.as_run()


def _check(grader: Grader) -> None:
    try:
        check(grader)
    except ValueError as exc:
        named = _PARAM.match(str(exc))
        raise InvalidRequest(str(exc), param=named.group(1) if named else "grader") from None
