"""The clients' grader calls (OpenAI's ``/v1/fine_tuning/alpha/graders``, issue 34), mixed
into :class:`~alallo.client.Client` and :class:`~alallo.client.AsyncClient`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from alallo import api
from alallo.client._calls import Calls
from alallo.client._drivers import AsyncDriver, SyncDriver

__all__ = ["AsyncGraders", "SyncGraders"]


class SyncGraders:
    """``validate_grader`` and ``run_grader``, blocking."""

    _calls: Calls
    _driver: SyncDriver

    def validate_grader(self, grader: Mapping[str, Any]) -> api.GraderValidated:
        """Check a grader as a job would run it (``POST …/graders/validate``): ``{"grader"}``.

        Raises:
            InvalidRequest: what is wrong, naming the field (``grader.source``...).
        """
        return self._driver.run(self._calls.validate_grader(grader))

    def run_grader(self, grader: Mapping[str, Any], model_sample: str,
                   item: Mapping[str, Any] | None = None) -> api.GraderRun:
        """The grader's score of ``model_sample`` for the data row ``item`` (``POST
        …/graders/run``), the one a job's trainer would use: ``reward``, ``sub_rewards``,
        ``metadata`` (its ``errors`` say why a part scored 0).

        Raises:
            InvalidRequest: the grader is not valid.
        """
        return self._driver.run(self._calls.run_grader(grader, model_sample, item))


class AsyncGraders:
    """``validate_grader`` and ``run_grader``, to ``await`` (:class:`SyncGraders`)."""

    _calls: Calls
    _driver: AsyncDriver

    async def validate_grader(self, grader: Mapping[str, Any]) -> api.GraderValidated:
        """Check a grader (:meth:`SyncGraders.validate_grader`)."""
        return await self._driver.run(self._calls.validate_grader(grader))

    async def run_grader(self, grader: Mapping[str, Any], model_sample: str,
                         item: Mapping[str, Any] | None = None) -> api.GraderRun:
        """A grader's score of a sample (:meth:`SyncGraders.run_grader`)."""
        return await self._driver.run(self._calls.run_grader(grader, model_sample, item))
