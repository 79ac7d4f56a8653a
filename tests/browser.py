"""The Chromium the dashboard's tests drive through Playwright, and how."""

from __future__ import annotations

import functools
import os

from tools.ensure_browser import CHROMIUM_VARIABLE, NoBrowser, find

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 30_000
"""How long a page waits for what a test expects (ms)."""


@functools.cache
def chromium() -> str:
    """The executable: ``ALALLO_TEST_CHROMIUM`` (``make test`` sets it, see
    tests/tools/ensure_browser.py), else one already installed (nothing is installed here).

    Raises RuntimeError saying what to install when there is none."""
    try:
        return find(dict(os.environ), install=False).path
    except NoBrowser as error:
        raise RuntimeError(f"{error}; the dashboard's tests need Chromium: run them with "
                           f"`make test`, or set {CHROMIUM_VARIABLE}") from None
