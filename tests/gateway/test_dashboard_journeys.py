"""What a new user met in the browser (Debian's Chromium through Playwright, live server):
the estimate form for a model that cannot run, no 404 on any page, jobs of one second in
the API's order, and a page on another origin following a job with ``EventSource``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from browser import TIMEOUT_MS
from playwright.sync_api import Browser, BrowserContext, Page, Response, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from support import EXAMPLES, LiveServer

pytestmark = pytest.mark.any_backend  # the page in a browser is the subject

@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    yield context
    context.close()


def signed_in(context: BrowserContext, api: httpx.Client) -> tuple[Page, list[str]]:
    """A signed-in page on the Jobs tab, and every answer of 400 or more it got."""
    page = context.new_page()
    failed: list[str] = []

    def check(response: Response) -> None:
        if response.status >= 400:
            failed.append(f"{response.status} {response.url}")

    page.on("response", check)
    link = api.post("/v1/dashboard/links").json()["path"]
    page.goto(f"{api.base_url}".rstrip("/") + link)
    expect(page.get_by_role("button", name="Estimate time and price")).to_be_visible()
    return page, failed


def upload(api: httpx.Client) -> str:
    file = api.post("/v1/files", files={"file": ("sample.jsonl",
                                                 (EXAMPLES / "sample.jsonl").read_bytes())})
    assert file.status_code == 200, file.text
    return str(file.json()["id"])


def create_job(api: httpx.Client, file_id: str, *, steps: int = 5,
               name: str = "journey") -> dict[str, Any]:
    response = api.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id, "name": name,
        "hyperparameters": {"max_steps": steps},
        "trainer": {"type": "simulated", "step_delay_s": 0.01}})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_estimate_form_says_why_a_model_cannot_run_and_no_page_gets_a_404(
        context: BrowserContext, api: httpx.Client) -> None:
    file_id = upload(api)
    page, failed = signed_in(context, api)
    result = page.locator("#estimate-result")
    # The account's files are listed, none chosen: a file uploaded before the page opened
    # (by the API, another tab) is no file the user picked. No estimate until one is.
    training = page.get_by_label("Training file")
    expect(training.locator(f'option[value="{file_id}"]')).to_have_count(1)
    expect(training.locator("option").first).to_have_text("Choose a file…")
    expect(training).to_have_value("")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.get_by_role("button", name="Estimate time and price").click()
    expect(result).to_have_text("Choose a training file first: upload one above, or pick "
                                 "one of your files.")
    expect(training).to_be_focused()
    assert [url for url in asked if "/estimates" in url] == []
    training.select_option(file_id)
    page.get_by_label("Model").fill("meta-llama/Llama-3.1-70B")
    page.get_by_role("button", name="Estimate time and price").click()
    expect(result).to_contain_text("Not available right now.")
    expect(result).to_contain_text("The job needs about 181 GB of memory; the most one node "
                                   "here can give a job is 14 GB (cpu).")
    page.get_by_label("Model").fill("alallo/tiny-gpt2")
    page.get_by_label("Precision").select_option("4-bit")
    page.get_by_role("button", name="Estimate time and price").click()
    expect(result).to_contain_text("Time:")  # 4-bit (QLoRA) trains on the CPU too
    page.get_by_label("Precision").select_option("16-bit")
    page.get_by_role("button", name="Estimate time and price").click()
    expect(result).to_contain_text("Time:")
    expect(result).not_to_contain_text("Cannot read")
    page.goto(f"{api.base_url}".rstrip("/") + "/jobs/" + create_job(api, upload(api))["id"])
    expect(page.locator('dd[data-field="Status"] .status')).to_have_text("succeeded")
    assert failed == []


def test_jobs_are_listed_newest_first_as_the_api_lists_them(
        context: BrowserContext, api: httpx.Client) -> None:
    file_id = upload(api)
    before = [create_job(api, file_id, name=f"before {i}")["id"] for i in range(4)]
    page, _ = signed_in(context, api)
    after = [create_job(api, file_id, name=f"after {i}")["id"] for i in range(4)]
    ours = set(before + after)
    listed = [j["id"] for j in api.get("/v1/fine_tuning/jobs", params={"limit": 50}).json()["data"]
              if j["id"] in ours]
    assert listed == after[::-1] + before[::-1]
    shown_in_order(page, listed)  # the jobs created while the page was open
    page.reload()
    shown_in_order(page, listed)  # all of them, on a fresh page


SHOWN = """(ids) => [...document.querySelectorAll("tr.job")].map(r => r.dataset.id)
  .filter(id => ids.includes(id))"""
"""The ids of ``ids`` the Jobs tab shows, top to bottom."""


def shown_in_order(page: Page, ids: list[str]) -> None:
    """Wait until the Jobs tab shows ``ids`` in this order (among its other rows)."""
    try:
        page.wait_for_function(f"(ids) => JSON.stringify(({SHOWN})(ids)) === JSON.stringify(ids)",
                               arg=ids)
    except PlaywrightTimeout:
        raise AssertionError(f"shown: {page.evaluate(SHOWN, ids)}, listed: {ids}") from None


FOLLOW = """([url, token]) => new Promise((resolve, reject) => {
  const statuses = [];
  const source = new EventSource(`${url}?access_token=${encodeURIComponent(token)}`);
  source.addEventListener("job", (e) => statuses.push(JSON.parse(e.data).status));
  source.addEventListener("done", (e) => { source.close(); resolve({ done: JSON.parse(e.data), statuses }); });
  source.onerror = () => { source.close(); reject(new Error(`the stream failed after ${statuses}`)); };
})"""
"""What a page elsewhere runs: follow one job to its ``done`` frame."""

WITH_COOKIE = """(url) => fetch(url, { credentials: "include" }).then(
  (r) => r.status, () => "blocked")"""


@pytest.fixture
def elsewhere() -> Iterator[str]:
    """A page on another origin (``localhost``, another port), served by the standard library."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            body = b"<!doctype html><title>elsewhere</title><p>elsewhere"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_page_on_another_origin_follows_a_job_with_eventsource(
        context: BrowserContext, api: httpx.Client, live_server: LiveServer,
        elsewhere: str) -> None:
    signed_in(context, api)  # the browser holds the dashboard's cookie too
    page = context.new_page()
    page.goto(f"{elsewhere}/")
    job = create_job(api, upload(api), steps=20)
    url = f"{live_server.url}/v1/fine_tuning/jobs/{job['id']}/stream"
    followed = page.evaluate(FOLLOW, [url, live_server.api_key])
    assert followed["done"] == {"id": job["id"], "status": "succeeded",
                                "seq": followed["done"]["seq"]}
    assert followed["statuses"][-1] == "succeeded"
    # The dashboard's cookie is no way in from elsewhere: no answer reaches the page.
    assert page.evaluate(WITH_COOKIE, f"{live_server.url}/v1/fine_tuning/jobs") in (401, "blocked")
