"""The dashboard: the Jobs tab (``/``) and a job's page (``/jobs/{id}``).

One static page does both; it reads the API with the user's key, which it
keeps in the browser's local storage (a link ending in ``#key=<api key>``
stores it, then drops it from the address bar).
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
