"""A reinforcement job's page in the browser (Debian's Chromium through Playwright, live
server, real tiny TRL GRPO training; issue 34): the reward chart beside the loss chart,
its legend at the latest figures, the grader among the job's facts; a supervised job's page
as before, with no reward chart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import TIMEOUT_MS
from playwright.sync_api import Browser, Page, expect
from support import EXAMPLES

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # real training, in a browser

EXACT = {"type": "string_check", "name": "exact", "input": "{{ sample.output_text }}",
         "reference": "{{ item.answer }}", "operation": "eq"}


@pytest.fixture
def page(browser: Browser, api: httpx.Client) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(str(api.base_url).rstrip("/") + api.post("/v1/dashboard/links").json()["path"])
    expect(page.get_by_role("button", name="Estimate time and price")).to_be_visible()
    yield page
    context.close()


def upload(api: httpx.Client, name: str, content: bytes) -> str:
    file = api.post("/v1/files", files={"file": (name, content)})
    assert file.status_code == 200, file.text
    return str(file.json()["id"])


def prompts(count: int) -> bytes:
    return b"".join(json.dumps({"messages": [{"role": "user", "content": f"Say {i}."}],
                                "answer": str(i)}).encode() + b"\n" for i in range(count))


def job_page(page: Page, api: httpx.Client, job: dict[str, Any]) -> None:
    page.goto(str(api.base_url).rstrip("/") + f"/jobs/{job['id']}")


def test_a_reinforcement_jobs_page_charts_the_reward_beside_the_loss(
        page: Page, api: httpx.Client, tmp_path: Path) -> None:
    created = api.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": upload(api, "prompts.jsonl", prompts(8)),
        "validation_file": upload(api, "validation.jsonl", prompts(2)), "seed": 0,
        "method": {"type": "reinforcement", "reinforcement": {"grader": EXACT, "hyperparameters": {
            "max_steps": 4, "batch_size": 2, "max_completion_tokens": 8, "logging_steps": 1,
            "eval_interval": 2, "eval_samples": 2}}}})
    assert created.status_code == 200, created.text
    job = created.json()
    job_page(page, api, job)
    expect(page.locator('dd[data-field="Grader"]')).to_have_text('string_check "exact"')
    expect(page.locator('dd[data-field="Status"] .status')).to_have_text("succeeded",
                                                                          timeout=300_000)

    series = api.get(f"/v1/fine_tuning/jobs/{job['id']}/metrics",
                     params={"limit": 1000}).json()["data"]
    rewarded = [row for row in series if row["reward"] is not None]
    validated = [row for row in series if row["valid_reward"] is not None]
    assert [row["step"] for row in rewarded] == [1, 2, 3, 4], series  # logging_steps 1
    assert [row["step"] for row in validated] == [2, 4], series  # eval_interval 2
    chart = page.locator("#reward-chart")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).to_have_attribute("data-points", "4")
    expect(chart).to_have_attribute("data-valid-points", "2")

    # Off the chart, the legend reads the latest figures, as the page writes them.
    last = rewarded[-1]
    figures = [last["reward"], validated[-1]["valid_reward"],
               last["reward"] - last["reward_std"], last["reward"] + last["reward_std"]]
    written = page.evaluate("xs => xs.map(x => x.toFixed(4))", figures)
    legend = chart.locator(".u-legend tr.u-series")
    expect(legend.locator("th")).to_have_text(
        ["step", "reward", "validation reward", "reward − std", "reward + std"])
    expect(legend.locator(".u-value")).to_have_text(["4", *written])

    # Beside the loss chart, as wide as it, on one line.
    loss = page.locator("#chart canvas").bounding_box()
    reward = chart.locator("canvas").bounding_box()
    assert loss is not None and reward is not None
    assert reward["y"] == loss["y"] and reward["x"] >= loss["x"] + loss["width"], (loss, reward)
    assert reward["width"] == loss["width"]
    page.screenshot(path=str(tmp_path / "reward-page.png"), full_page=True)


def test_a_supervised_jobs_page_has_no_reward_chart(page: Page, api: httpx.Client) -> None:
    file_id = upload(api, "sample.jsonl", (EXAMPLES / "sample.jsonl").read_bytes())
    created = api.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file_id, "hyperparameters": {
            "max_steps": 20}, "trainer": {"type": "simulated", "step_delay_s": 0.01}})
    assert created.status_code == 200, created.text
    job_page(page, api, created.json())
    expect(page.locator('dd[data-field="Status"] .status')).to_have_text("succeeded")
    expect(page.locator("#chart")).to_have_attribute("data-points", "2")  # steps 10 and 20
    expect(page.locator("#chart canvas")).to_have_count(1)
    # Off the chart, the loss legend reads the latest figures as the reward's does (uPlot's
    # own reads "--"); a job without a validation file has no validation loss series.
    series = api.get(f"/v1/fine_tuning/jobs/{created.json()['id']}/metrics").json()["data"]
    latest = page.evaluate("x => x.toFixed(4)", series[-1]["train_loss"])
    legend = page.locator("#chart .u-legend tr.u-series")
    expect(legend.locator("th")).to_have_text(["step", "training loss"])  # no validation file
    expect(legend.locator(".u-value")).to_have_text(["20", latest])
    assert page.locator("#reward-chart").count() == 0
    assert page.locator('dd[data-field="Grader"]').count() == 0
    expect(page.locator("main h3")).to_have_text(
        ["Details", "Hyperparameters", "Try it", "Loss", "Training log", "Events"])
    width = page.evaluate("document.querySelector('.charts').clientWidth")
    box = page.locator("#chart canvas").bounding_box()
    assert box is not None and box["width"] == width  # the loss chart alone: the whole row


def test_a_multi_graders_graders_are_named(page: Page) -> None:
    multi = {"type": "multi", "name": "both", "calculate_output": "exact + inverse",
             "graders": {"exact": EXACT, "inverse": {"type": "python", "name": "inverse",
                                                     "source": "def grade(s, i): return 1"}}}
    assert page.evaluate("graderText", multi) == \
        'multi "both": exact (string_check), inverse (python)'
    assert page.evaluate("graderText", EXACT) == 'string_check "exact"'
