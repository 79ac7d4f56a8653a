"""A first job from the browser, as a new user clicks it (Debian's Chromium through
Playwright, live server, real tiny TRL training; issue 19): a bad file dropped on the page
is refused by its line, a good one chosen with the picker is uploaded, the model comes from
the list, the estimate shows, the job is created and its page follows it: the loss chart
fills live, the current loss sits beside the progress bar, and once it succeeded the model
answers in "Try it" and downloads."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from browser import TIMEOUT_MS
from playwright.sync_api import Browser, BrowserContext, expect
from support import EXAMPLES

pytestmark = [pytest.mark.slow, pytest.mark.any_backend]  # the page in a browser

DROP = """([name, text]) => {
  const data = new DataTransfer();
  data.items.add(new File([text], name, { type: "application/jsonl" }));
  document.getElementById("drop").dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true }));
}"""
"""What a browser does when a file is dropped on the page's drop zone."""


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    yield context
    context.close()


def test_a_first_job_from_upload_to_chatting_with_the_model(
        context: BrowserContext, api: httpx.Client) -> None:
    page = context.new_page()
    page.goto(str(api.base_url).rstrip("/") + api.post("/v1/dashboard/links").json()["path"])
    expect(page.get_by_role("heading", name="New job")).to_be_visible()

    page.evaluate(DROP, ["broken.jsonl", '{"text": "fine"}\n{"text": unquoted}\n'])
    expect(page.locator("#upload-error")).to_contain_text("broken.jsonl: line 2")
    page.set_input_files("#file-picker", str(EXAMPLES / "sample.jsonl"))
    expect(page.locator("#upload-result")).to_contain_text("Uploaded sample.jsonl: 48 lines, "
                                                           "format text")
    uploaded = page.locator("#upload-result").inner_text().rsplit("(", 1)[1].rstrip(")")
    expect(page.get_by_label("Training file")).to_have_value(uploaded)
    page.get_by_label("Validation file").select_option(uploaded)
    listed = page.evaluate("[...document.querySelectorAll('#models option')].map(o => o.value)")
    assert "alallo/tiny-gpt2" in listed
    page.get_by_label("Model").fill("alallo/tiny-gpt2")
    page.get_by_label("Max steps").fill("20")
    page.get_by_label("Name (optional)").fill("my first job")
    page.get_by_role("button", name="Estimate time and price").click()
    expect(page.locator("#estimate-result")).to_contain_text("Price: $")
    page.get_by_role("button", name="Create job").click()
    page.wait_for_url("**/jobs/ft-*")
    job_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#job-name")).to_have_text("my first job")  # the id under it
    expect(page.locator("#job-id")).to_have_text(job_id)

    expect(page.locator('dd[data-field="Status"] .status')).to_have_text("succeeded",
                                                                          timeout=120_000)
    expect(page.locator("#step-loss")).to_contain_text("step 20 of 20 · loss ")
    chart = page.locator("#chart")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).to_have_attribute("data-points", "2")  # the loss at steps 10 and 20
    expect(chart).to_have_attribute("data-valid-points", "2")  # evaluated at 10 and 20
    series = api.get(f"/v1/fine_tuning/jobs/{job_id}/metrics").json()["data"]
    assert [row["step"] for row in series] == [10, 20]
    # Off the chart, its legend reads the step 20 figures (uPlot's own reads "--").
    latest = page.evaluate("xs => xs.map(x => x.toFixed(4))",
                           [series[-1]["train_loss"], series[-1]["valid_loss"]])
    expect(chart.locator(".u-legend .u-value")).to_have_text(["20", *latest])

    expect(page.locator("#demo-note")).to_contain_text("alallo/tiny-gpt2 is a tiny demo model")
    page.locator("#chat-input").fill("Hello there")
    page.locator("#chat-input").press("Enter")  # sends, as Send does
    expect(page.locator("#chat-input")).to_have_value("")  # sent: the box is free again
    expect(page.locator("#chat-prompt")).to_have_text("You: Hello there")
    output = page.locator("#chat-output")
    expect(output).to_have_attribute("data-done", "true", timeout=90_000)  # a worker loads it
    assert "failed" not in (output.get_attribute("class") or "")
    answer = page.locator("#chat-answer")
    assert answer.get_attribute("aria-busy") is None  # no longer "Loading the model…"
    assert answer.inner_text() and "Loading the model" not in answer.inner_text()
    adapter = page.get_by_role("link", name="Download adapter")
    with page.expect_download() as download:
        adapter.click()
    assert download.value.suggested_filename.endswith(".tar.gz")
    expect(page.get_by_role("link", name="Download merged model")).to_have_attribute(
        "href", f"/v1/models/{page.locator('#try-model').inner_text().replace(':', '%3A')}"
                "/content?format=merged")

    page.reload()  # a fresh page gets the whole series from the stream's backlog
    expect(page.locator("#chart")).to_have_attribute("data-points", "2")
