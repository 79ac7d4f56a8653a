"""The dashboard: the Jobs tab (``/``) and a job's page (``/jobs/{id}``).

One static page (no build step) does both. It reads the API with the
session cookie that a one-time sign-in link sets (:mod:`gateway._signin`),
follows the account stream on the Jobs tab and the job's stream on its page,
and puts every text from the server in with ``textContent``.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse

__all__ = ["dashboard"]

_PAGE = Path(__file__).with_name("static") / "dashboard.html"


async def dashboard(request: Request) -> HTMLResponse:
    """``GET /`` and ``GET /jobs/{job_id}``: the dashboard page."""
    return HTMLResponse(_PAGE.read_text(encoding="utf-8"),
                        headers={"Cache-Control": "no-store"})
