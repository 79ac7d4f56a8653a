"""The dashboard in a real browser (Debian's Chromium through Playwright) against the
live server: sign-in link, live Jobs tab, live job page, escaping, cancel."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import TIMEOUT_MS
from playwright.sync_api import Browser, Page, expect
from support import EXAMPLES, LiveServer
from test_tenants import new_account, wait_final

from alallo._money import format_money

pytestmark = pytest.mark.any_backend  # the page in a browser is the subject

def sign_in_link(api: httpx.Client) -> str:
    response = api.post("/v1/dashboard/links")
    assert response.status_code == 200, response.text
    return f"{api.base_url}".rstrip("/") + response.json()["path"]


@pytest.fixture
def page(browser: Browser, api: httpx.Client) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(sign_in_link(api))
    yield page
    context.close()


def create_job(api: httpx.Client, trainer: Any, *, steps: int = 20,
               **spec: Any) -> dict[str, Any]:
    file = api.post("/v1/files", files={"file": ("sample.jsonl",
                                                 (EXAMPLES / "sample.jsonl").read_bytes())})
    response = api.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file.json()["id"], "name": "dash job",
        "hyperparameters": {"max_steps": steps}, "trainer": trainer, **spec})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_sign_in_link_sets_the_session_once(browser: Browser, api: httpx.Client,
                                              live_server: LiveServer) -> None:
    link = sign_in_link(api)
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    assert page.url == f"{live_server.url}/"
    cookie = next(c for c in context.cookies() if c["name"] == "alallo_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    expect(page.get_by_role("button", name="Estimate time and price")).to_be_visible()
    again = context.new_page()
    response = again.goto(link)
    assert response is not None and response.status == 401
    context.close()
    anonymous = browser.new_page()
    asked: list[str] = []
    refused: list[str] = []
    errors: list[str] = []
    anonymous.on("request", lambda request: asked.append(request.url))
    anonymous.on("response", lambda r: refused.append(f"{r.status} {r.url}")
                 if r.status >= 400 else None)
    anonymous.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    for path in ("/", "/jobs/ft-" + "0" * 24):
        anonymous.goto(f"{live_server.url}{path}")
        expect(anonymous.locator("main")).to_contain_text("Sign in with the link")
        anonymous.wait_for_load_state("networkidle")
    # A signed-out page asks for nothing that needs a key (the account's figures, the
    # models, the jobs): it would only get 401s (errors in the console).
    assert [url for url in asked if "/v1/" in url] == []
    assert refused == [] and errors == []
    expect(anonymous.locator("#account")).to_be_hidden()
    anonymous.close()


def test_the_jobs_tab_shows_a_new_job_and_its_progress_without_reload(
        page: Page, api: httpx.Client, tmp_path: Path) -> None:
    expect(page.get_by_role("button", name="Estimate time and price")).to_be_visible()
    page.evaluate("window.notReloaded = true")
    job = create_job(api, {"type": "simulated", "step_delay_s": 0.05}, steps=20)
    row = page.locator(f'tr[data-id="{job["id"]}"]')
    expect(row).to_be_visible()
    expect(row.locator(".status")).to_have_text("succeeded")
    expect(row.locator(".progress")).to_contain_text("100%")
    assert row.locator(".bar").get_attribute("title") == "20 of 20 steps (total steps: 20)"
    assert page.evaluate("window.notReloaded") is True
    page.screenshot(path=str(tmp_path / "jobs-tab.png"), full_page=True)
    assert (tmp_path / "jobs-tab.png").stat().st_size > 0

    # A file uploaded elsewhere (here, through the API) while the page was open is listed,
    # never chosen for the user: the estimate waits until one is.
    training = page.get_by_label("Training file")
    training.focus()  # the list is read again: the file is there
    expect(training.locator(f'option[value="{job["training_file"]}"]')).to_have_count(1)
    expect(training).to_have_value("")
    page.get_by_role("button", name="Estimate time and price").click()
    expect(page.locator("#choose-file")).to_have_text(
        "Choose a training file first: upload one above, or pick one of your files.")
    training.select_option(job["training_file"])
    page.get_by_role("button", name="Estimate time and price").click()
    expect(page.locator("#estimate-result")).to_contain_text("Time:")
    expect(page.locator("#estimate-result")).to_contain_text("Price: $")


def test_the_page_writes_money_as_the_cli_does(page: Page) -> None:
    # One rule everywhere (alallo/_money.py): a small charge never reads as $0.0000.
    amounts = [0, 0.25, 12.345, 1234.5, 0.0012, 0.000018, 0.0099999, -0.0012, -0.25, 1e-12]
    assert page.evaluate("xs => xs.map(usd)", amounts) == [format_money(x) for x in amounts]


TRAINER = r"""
import json, os, sys, time
print("hello <script>window.pwned = 1</script> <b>bold</b>", flush=True)
for i in range(60):
    print(f"early line {i}", flush=True)
while not os.path.exists("../go"):  # in the job's directory, which it may read as root's
    time.sleep(0.05)  # not the test's wait: the fake trainer's poll of the flag it waits for
print("after the flag", flush=True)
config = json.load(open(sys.argv[-1]))
os.makedirs(config["output_dir"], exist_ok=True)
for line in ({"type": "progress", "step": 10, "max_steps": 20, "loss": 0.5},
             {"type": "done", "model_path": config["output_dir"], "stopped_at": 10,
              "best_step": 5}):
    print(json.dumps(line), flush=True)
"""
"""A trainer whose log has markup in it and goes on when the test says (a file ``go`` in its
job's directory: a trainer of a root server runs as another user, who reaches no folder of
the test's); then it stops early, at step 10 of 20, its model the checkpoint of step 5 (as
TRL's early stopping reports it)."""


def test_the_job_page_follows_the_log_live_and_shows_markup_as_text(
        page: Page, api: httpx.Client, live_server: LiveServer, tmp_path: Path) -> None:
    validation = api.post("/v1/files", files={"file": ("valid.jsonl", b'{"text": "a"}\n' * 3)})
    assert validation.status_code == 200, validation.text
    job = create_job(api, {"command": [sys.executable, "-c", TRAINER]},
                     validation_file=validation.json()["id"],
                     early_stopping={"patience": 2, "min_delta": 0.001})
    flag = live_server.data_dir / "jobs" / job["id"] / "go"
    page.goto(f"{api.base_url}".rstrip("/") + f"/jobs/{job['id']}")
    # What a user checks first: the job's name (its id under it), its files, and the
    # hyperparameters as they run (the server's, "auto" resolved), each as the API has it.
    expect(page.locator("#job-name")).to_have_text("dash job")
    expect(page.locator("#job-id")).to_have_text(job["id"])
    expect(page.locator('dd[data-field="Training file"]')).to_have_text(
        f"sample.jsonl (48 lines, text) · {job['training_file']}")
    expect(page.locator('dd[data-field="Validation file"]')).to_have_text(
        f"valid.jsonl (3 lines, text) · {job['validation_file']}")
    ran = job["hyperparameters"]
    assert ran["max_steps"] == 20 and "auto" not in ran.values() and ran["n_epochs"] >= 1
    listed = page.locator("#hyperparameters")
    expect(listed.locator("dt")).to_have_text(list(ran))
    expect(listed.locator("dd")).to_have_text(
        page.evaluate("hp => Object.values(hp).map(hyperparameterText)", ran))
    expect(listed.locator('dd[data-field="max_steps"]')).to_have_text("20")
    expect(listed.locator('dd[data-field="learning_rate"]')).to_have_text(
        page.evaluate("String", ran["learning_rate"]))
    log = page.locator("#log")
    expect(log).to_contain_text("hello <script>window.pwned = 1</script> <b>bold</b>")
    expect(log).to_contain_text("early line 59")
    assert page.locator("#log script, #log b").count() == 0
    assert page.evaluate("window.pwned") is None
    at_bottom = "el => el.scrollHeight - el.scrollTop - el.clientHeight < 8"
    assert log.evaluate(at_bottom), "the log follows while the reader is at the bottom"
    expect(page.locator('dd[data-field="Time left (estimate)"]')).to_be_visible()
    expect(page.locator('dd[data-field="Price"]')).to_contain_text("$")
    page.screenshot(path=str(tmp_path / "job-page.png"), full_page=True)

    log.evaluate("el => { el.scrollTop = 0; }")  # the reader scrolls up: no more following
    flag.touch()
    expect(log).to_contain_text("after the flag")
    assert log.evaluate("el => el.scrollTop") == 0
    expect(page.locator("#events")).to_contain_text("JOB_PENDING")

    # Stopped early: the page says at which step of how many, and that the model is the
    # best checkpoint's (the API's progress reads "10 of 10": the run ended there).
    expect(page.locator('dd[data-field="Status"] .status')).to_have_text("succeeded")
    done = api.get(f"/v1/fine_tuning/jobs/{job['id']}").json()
    assert done["progress"]["step"] == done["progress"]["max_steps"] == 10, done["progress"]
    expect(page.locator("#step-loss")).to_have_text(" stopped early at step 10 of 20 · loss 0.5000")
    expect(page.locator('dd[data-field="Fine-tuned model"]')).to_have_text(
        f"{done['fine_tuned_model']}the checkpoint of step 5 (the best validation loss)")
    expect(page.locator('dd[data-field="Early stopping"]')).to_have_text(
        "after 2 evaluations without improvement of at least 0.001: stopped at step 10 of 20; "
        "the model is step 5's checkpoint")


def test_a_job_is_cancelled_from_its_page_after_confirmation(page: Page,
                                                             api: httpx.Client) -> None:
    job = create_job(api, {"type": "simulated", "step_delay_s": 0.2}, steps=10_000)
    page.goto(f"{api.base_url}".rstrip("/") + f"/jobs/{job['id']}")
    status = page.locator('dd[data-field="Status"] .status')
    expect(status).to_have_text("running")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Cancel job").click()
    assert api.get(f"/v1/fine_tuning/jobs/{job['id']}").json()["status"] == "running"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel job").click()
    expect(status).to_have_text("cancelled")
    expect(page.get_by_role("button", name="Cancel job")).to_be_hidden()
    expect(page.locator("#events")).to_contain_text("CANCEL_REQUESTED")


def test_a_job_is_paused_and_resumed_from_its_page(page: Page, api: httpx.Client) -> None:
    job = create_job(api, {"type": "simulated", "step_delay_s": 0.2}, steps=10_000)
    page.goto(f"{api.base_url}".rstrip("/") + f"/jobs/{job['id']}")
    status = page.locator('dd[data-field="Status"]')
    expect(status.locator(".status")).to_have_text("running")
    expect(page.get_by_role("button", name="Resume")).to_be_hidden()
    page.get_by_role("button", name="Pause").click()
    expect(status.locator(".status")).to_have_text("paused")
    expect(status).to_contain_text("Resume it to continue from step")
    expect(page.get_by_role("button", name="Pause")).to_be_hidden()
    page.get_by_role("button", name="Resume").click()
    expect(status.locator(".status")).to_have_text("running")
    expect(page.get_by_role("button", name="Resume")).to_be_hidden()
    expect(page.locator("#events")).to_contain_text("JOB_RESUMED")
    api.post(f"/v1/fine_tuning/jobs/{job['id']}/cancel")


def test_serve_prints_a_sign_in_link_and_alallo_dashboard_makes_new_ones(
        browser: Browser, live_server: LiveServer) -> None:
    port = live_server.url.rsplit(":", 1)[1]
    printed = (live_server.data_dir.parent / f"server-{port}.log").read_text()
    assert f"Dashboard (a one-time sign-in link): {live_server.url}/signin/" in printed
    result = subprocess.run(
        [sys.executable, "-m", "alallo", "dashboard", "--url", live_server.url,
         "--api-key", live_server.api_key], capture_output=True, text=True, timeout=60,
        check=False, env={**os.environ, "COLUMNS": "300"})
    assert result.returncode == 0, result.stderr
    link = result.stdout.split("Open the dashboard: ", 1)[1].strip()
    page = browser.new_page()
    page.goto(link)
    expect(page.get_by_role("button", name="Estimate time and price")).to_be_visible()
    page.close()


def test_another_accounts_job_page_shows_what_an_unknown_ids_page_shows(
        browser: Browser, api: httpx.Client, live_server: LiveServer) -> None:
    owners = create_job(api, {"type": "simulated", "step_delay_s": 0.01}, steps=5)
    _, key = new_account(live_server, "stranger")
    link = httpx.post(f"{live_server.url}/v1/dashboard/links", timeout=30,
                      headers={"Authorization": f"Bearer {key}"}).json()["path"]
    unknown_id = "ft-" + "0" * 24
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{live_server.url}{link}")
    # The header shows the signed-in account's own money, and follows its charges live.
    header = page.locator("#account")
    expect(header.locator('[data-field="name"]')).to_have_text("stranger")
    expect(header.locator('[data-field="balance"]')).to_have_text("$100.00")
    expect(header.locator('[data-field="spent"]')).to_have_text("$0.00")
    with httpx.Client(base_url=live_server.url, timeout=30,
                      headers={"Authorization": f"Bearer {key}"}) as stranger:
        job = create_job(stranger, {"type": "simulated", "step_delay_s": 0.02}, steps=20)
        done = wait_final(stranger, job["id"])
        account = stranger.get("/v1/account").json()
    assert done["status"] == "succeeded", done["message"]
    assert 0 < account["spend"]["charged"] < 0.01, "small: its money reads past the cents"
    # Read again at most every 3 s (dashboard.md): a wait longer than expect's 5 s default.
    expect(header.locator('[data-field="spent"]')).to_have_text(
        format_money(account["spend"]["charged"]), timeout=TIMEOUT_MS)
    expect(header.locator('[data-field="balance"]')).to_have_text(
        format_money(account["balance"]))
    seen = []
    for job_id in (owners["id"], unknown_id):
        response = page.goto(f"{live_server.url}/jobs/{job_id}")
        assert response is not None
        expect(page.get_by_role("heading", name="Job not found")).to_be_visible()
        seen.append((response.status, page.title(),
                     page.locator("body").inner_text().replace(job_id, "<id>")))
    context.close()
    assert seen[0] == seen[1]
    status, title, text = seen[0]
    assert status == 404 and title == "alallo — job not found"
    assert "no job '<id>'" in text and "Cancel job" not in text and "dash job" not in text


def test_sign_out_ends_the_session_and_the_page_asks_to_sign_in_again(
        browser: Browser, api: httpx.Client, live_server: LiveServer) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(sign_in_link(api))
    expect(page.get_by_role("button", name="Estimate time and price")).to_be_visible()
    session = next(c for c in context.cookies() if c["name"] == "alallo_session")["value"]
    assert live_server.api_key not in session
    refused: list[str] = []
    page.on("response", lambda r: refused.append(f"{r.status} {r.url}")
            if r.status >= 400 else None)
    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("main")).to_contain_text("Sign in with the link")
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    page.reload()  # signed out, the page remembers it: no request answers 401 then either
    expect(page.locator("main")).to_contain_text("Sign in with the link")
    page.wait_for_load_state("networkidle")
    assert refused == []
    assert [c for c in context.cookies() if c["name"] == "alallo_session"] == []
    context.close()
    replayed = httpx.get(f"{live_server.url}/v1/fine_tuning/jobs", timeout=30,
                         cookies={"alallo_session": session})
    assert replayed.status_code == 401
