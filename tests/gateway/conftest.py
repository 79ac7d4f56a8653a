"""Fixtures of the gateway tests: HTTP clients of the live server, and Chromium
(tests/browser.py) driven by Playwright for the dashboard's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from browser import CHROMIUM_ARGS, chromium
from support import EXAMPLES, LiveServer, upload


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless Chromium for the module's tests."""
    executable = chromium()  # before Playwright starts: finding one may ask Playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def api(live_server: LiveServer) -> Iterator[httpx.Client]:
    """A client of the live server, signed in with its API key."""
    with httpx.Client(base_url=live_server.url, headers=live_server.headers, timeout=30) as c:
        yield c


@pytest.fixture
async def client(live_server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    """An async client of the live server, signed in with its API key; its timeout (120 s)
    only bounds a hang: a download or a first completion on a loaded CPU takes tens of
    seconds."""
    async with httpx.AsyncClient(base_url=live_server.url, headers=live_server.headers,
                                 timeout=120) as c:
        yield c


@pytest.fixture
async def file_id(client: httpx.AsyncClient) -> str:
    """The id of ``examples/sample.jsonl`` uploaded to the live server."""
    response = await upload(client, EXAMPLES / "sample.jsonl")
    assert response.status_code == 200, response.text
    return str(response.json()["id"])
