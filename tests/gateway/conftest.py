"""Fixtures of the gateway tests: an HTTP client of the live server, and Debian's
Chromium driven by Playwright for the dashboard's tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from browser import CHROMIUM, CHROMIUM_ARGS
from support import LiveServer


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless Chromium for the module's tests."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def api(live_server: LiveServer) -> Iterator[httpx.Client]:
    """A client of the live server, signed in with its API key."""
    with httpx.Client(base_url=live_server.url, headers=live_server.headers, timeout=30) as c:
        yield c
