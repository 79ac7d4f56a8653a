"""Together's routes: ``POST /v1/fine-tunes/estimate-price``, the price estimate Together's
SDK asks before it creates a job (:func:`alallo.runtime.together_estimate`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from alallo.runtime import together_estimate

from ._auth import account_of, runtime_of
from ._body import json_object

__all__ = ["estimate_price"]


async def estimate_price(request: Request) -> JSONResponse:
    """``POST /v1/fine-tunes/estimate-price`` with Together's request → its
    ``AvailableEstimate`` or ``UnavailableEstimate``, from alallo's estimate."""
    account = await account_of(request)
    body = await json_object(request)
    return JSONResponse(await together_estimate(runtime_of(request), account, body))
