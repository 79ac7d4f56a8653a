"""``GET /v1/account``: the caller's own account, its balance, billing limit and spend.

A key (or a dashboard session) reads its own account only: the route takes no id, so
there is no other account to name. Creating accounts and changing their money stays
the operator's, on the store (``alallo accounts``; :mod:`alallo.cli._accounts` says why).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from ._auth import account_of, runtime_of

__all__ = ["get_account"]


async def get_account(request: Request) -> JSONResponse:
    """``GET /v1/account`` → :class:`alallo.api.Account` (401 without a valid key or session)."""
    account = await account_of(request)
    return JSONResponse(await runtime_of(request).accounts.summary(account))
