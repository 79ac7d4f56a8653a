"""The dashboard's look at a phone's width (390 px) and a laptop's (1280 px), light and
dark: no page (sign-in, the Jobs tab with the new-job form, a job's, a job not found) is
wider than the screen, axe-core finds no serious or critical
accessibility violation, and each page's screenshot is saved (docs/dashboard.md shows
them: ``make screenshots`` refreshes docs/screenshots/ from this module)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import TIMEOUT_MS
from playwright.sync_api import Browser, Page, expect
from support import EXAMPLES, LiveServer
from test_tenants import new_account, wait_final
from tools import axe

pytestmark = pytest.mark.any_backend  # the page in a browser is the subject

WIDTHS = {"phone": (390, 844), "laptop": (1280, 800)}
NARROWEST = 360
"""The narrowest screen the pages are made for (px): a job's page narrowed to it still fits."""
SHOT_HEIGHT = 2200
"""A screenshot's height at most (px): a job page's events go on below it."""
SCREENSHOTS = "ALALLO_SCREENSHOTS"
"""A folder for the screenshots (``make screenshots``: docs/screenshots); else the run's
temporary folder."""


@pytest.fixture(scope="module")
def account(live_server: LiveServer) -> Iterator[httpx.Client]:
    """An account of its own with the jobs a user meets first: a finished one with a long
    name, one unnamed (its id is its title), and one that failed on a bad line."""
    _, key = new_account(live_server, "Ada Lovelace's research group")
    with httpx.Client(base_url=live_server.url, timeout=30,
                      headers={"Authorization": f"Bearer {key}"}) as api:
        sample = (EXAMPLES / "sample.jsonl").read_bytes()
        training = api.post("/v1/files", files={"file": ("support-conversations-2026-q4.jsonl",
                                                         sample)}).json()["id"]
        validation = api.post("/v1/files", files={"file": ("held-out.jsonl", sample)}).json()["id"]
        simulated = {"type": "simulated", "step_delay_s": 0.01}
        named = api.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": training, "validation_file": validation,
            "name": "customer-support-assistant-with-a-long-descriptive-name",
            "hyperparameters": {"max_steps": 40, "eval_steps": 10}, "trainer": simulated})
        unnamed = api.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": training, "adapter": "full",
            "hyperparameters": {"max_steps": 20}, "trainer": simulated})
        for created in (named, unnamed):
            assert created.status_code == 200, created.text
            assert wait_final(api, created.json()["id"])["status"] == "succeeded"
        api.job = named.json()  # type: ignore[attr-defined]
        yield api


def sign_in(browser: Browser, api: httpx.Client, width: int, height: int,
            scheme: str) -> Page:
    context = browser.new_context(viewport={"width": width, "height": height},
                                  color_scheme=scheme)  # type: ignore[arg-type]
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    link = api.post("/v1/dashboard/links").json()["path"]
    page.goto(str(api.base_url).rstrip("/") + link)
    return page


def fits(page: Page, name: str) -> None:
    """No horizontal overflow: the page is no wider than the screen (what is wider is named)."""
    inner, scroll = page.evaluate("[innerWidth, document.documentElement.scrollWidth]")
    wide = page.evaluate("""() => [...document.querySelectorAll("body *")]
        .filter(e => e.getBoundingClientRect().right > innerWidth + 1)
        .slice(0, 5).map(e => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`)""")
    assert scroll <= inner, f"{name}: {scroll} px wide on a {inner} px screen: {wide}"


def check(page: Page, name: str, folder: Path) -> None:
    """It fits, no serious or critical axe-core violation; a screenshot."""
    fits(page, name)
    page.add_script_tag(path=str(axe.ensure()))
    found = page.evaluate("""async () => (await axe.run(document, { resultTypes: ["violations"] }))
        .violations.filter(v => v.impact === "serious" || v.impact === "critical")
        .map(v => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(" ")).slice(0, 3).join(", ")})`)""")
    assert found == [], f"{name}: {found}"
    width, tall = page.evaluate("[innerWidth, document.documentElement.scrollHeight]")
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True,  # the top of a long page
                    clip={"x": 0, "y": 0, "width": width, "height": min(tall, SHOT_HEIGHT)})


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(os.environ.get(SCREENSHOTS) or tmp_path_factory.mktemp("screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.parametrize(("size", "scheme"), [("phone", "light"), ("laptop", "light"),
                                               ("phone", "dark")])
def test_every_page_fits_the_screen_and_passes_axe(
        browser: Browser, account: httpx.Client, folder: Path, size: str, scheme: str) -> None:
    width, height = WIDTHS[size]
    suffix = f"{size}" if scheme == "light" else f"{size}-{scheme}"
    job: dict[str, Any] = account.job  # type: ignore[attr-defined]

    signed_out = browser.new_context(viewport={"width": width, "height": height},
                                     color_scheme=scheme)  # type: ignore[arg-type]
    page = signed_out.new_page()
    page.goto(str(account.base_url))
    expect(page.locator("#sign-in")).to_contain_text("Sign in with the link")
    check(page, f"sign-in-{suffix}", folder)
    signed_out.close()

    page = sign_in(browser, account, width, height, scheme)
    expect(page.locator(f'tr[data-id="{job["id"]}"] .status')).to_have_text("succeeded")
    expect(page.locator("#account [data-field=limit]")).to_have_text("$0.00")
    page.get_by_label("Training file").select_option(job["training_file"])
    page.get_by_role("button", name="Estimate time and price").click()
    expect(page.locator("#estimate-result")).to_contain_text("Price: $")
    check(page, f"jobs-{suffix}", folder)

    page.locator(f'tr[data-id="{job["id"]}"] a').click()
    expect(page.locator('dd[data-field="Status"] .status')).to_have_text("succeeded")
    expect(page.locator("#chart")).to_have_attribute("data-valid-points", "4")
    expect(page.locator("#chart canvas")).to_have_count(1)
    expect(page.locator("#try")).to_be_visible()
    expect(page.locator("#events")).to_contain_text("JOB_COMPLETE")
    check(page, f"job-{suffix}", folder)
    # Try it while the model loads (its answer held back here): the loading line wraps.
    page.route("**/v1/chat/completions", lambda route: None)
    page.locator("#chat-input").fill("Hello there")
    page.locator("#chat-input").press("Enter")
    expect(page.locator("#chat-answer")).to_have_attribute("aria-busy", "true")
    expect(page.locator("#chat-answer")).to_contain_text("Loading the model")
    fits(page, f"try-it-loading-{suffix}")
    if size == "laptop":  # the chart follows a window narrowed to the smallest phones'
        page.set_viewport_size({"width": NARROWEST, "height": WIDTHS["phone"][1]})
        expect(page.locator("#chart canvas")).to_have_js_property(
            "clientWidth", page.evaluate("document.getElementById('chart').clientWidth"))
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
        page.set_viewport_size({"width": width, "height": height})

    page.goto(str(account.base_url).rstrip("/") + "/jobs/ft-nobody-has-this-one")
    expect(page.locator("#not-found")).to_have_text("no job 'ft-nobody-has-this-one'")
    check(page, f"not-found-{suffix}", folder)
    page.context.close()
