"""The dashboard: the Jobs tab (``/``) and a job's page (``/jobs/{id}``).

One static page (no build step) does both. It reads the API with the
session cookie that a one-time sign-in link sets (:mod:`gateway._signin`),
follows the account stream on the Jobs tab and the job's stream on its page,
and puts every text from the server in with ``textContent``.

A job's page answers 404 when the signed-in account has no such job, and
another account's job is such a job: its page is the one an id nobody has
gets, status and text (docs/security.md, "Another account's things").
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse

from alallo import NotFound, Unauthorized

from ._auth import account_of, runtime_of

__all__ = ["STATIC", "dashboard", "job_page"]

STATIC = Path(__file__).with_name("static")
"""The page and the libraries it loads (``static/vendor/<name>-<version>/``, each with its
licence), served at ``/static`` to anyone: nothing in it is an account's."""
_PAGE = STATIC / "dashboard.html"


async def dashboard(request: Request, *, status_code: int = 200) -> HTMLResponse:
    """``GET /``: the dashboard page (the Jobs tab, or the sign-in prompt)."""
    return HTMLResponse(_PAGE.read_text(encoding="utf-8"), status_code=status_code,
                        headers={"Cache-Control": "no-store"})


async def job_page(request: Request) -> HTMLResponse:
    """``GET /jobs/{job_id}``: the page, 404 when the caller's account has no such job.

    Without a session or key the page is the sign-in prompt (200), whatever the id:
    nothing tells one id from another before the caller is known.
    """
    try:
        account = await account_of(request)
        await runtime_of(request).get_job(account, request.path_params["job_id"])
    except Unauthorized:
        return await dashboard(request)
    except NotFound:
        return await dashboard(request, status_code=404)
    return await dashboard(request)
