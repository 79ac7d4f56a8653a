"""The server takes what ``/openapi.json`` says, and answers as HTTP says (issue 31, item 8):
each finding of schemathesis's probe, pinned at the level a client meets it. The probe
itself runs in ``test_openapi.py``.

A method a path does not take answers 405 with ``Allow`` (``gateway/_errors.py``); a query
parameter is given once (``gateway/_query.py``) and an integer is written in ASCII digits
(``gateway/_body.py``); every resume point a stream is given is checked
(``gateway/_sse.py``); a JSON number with no fraction is an integer, as JSON Schema reads it;
a cursor the server cannot read is a 400 naming it, never a 500.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support import EXAMPLES, LiveServer

pytestmark = pytest.mark.any_backend  # HTTP's answers are the subject, not the store


@pytest.fixture(scope="module")
def ids(live_server: LiveServer) -> Iterator[dict[str, str]]:
    """A file and a finished simulated job of the live server's account, by kind."""
    with httpx.Client(base_url=live_server.url, headers=live_server.headers,
                      timeout=30) as client:
        file = client.post("/v1/files", files={"file": ("a.jsonl", (EXAMPLES / "sample.jsonl")
                                                          .read_bytes())}).json()
        job = client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file["id"],
            "hyperparameters": {"max_steps": 1}, "trainer": {"type": "simulated",
                                                             "step_delay_s": 0}})
        assert job.status_code == 200, job.text
        yield {"file": file["id"], "job": job.json()["id"]}


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("TRACE", "/", "GET, HEAD"),
    ("TRACE", "/v1/files", "GET, HEAD, POST"),  # two routes: both routes' methods
    ("PUT", "/v1/files/file-x", "DELETE, GET, HEAD"),
    ("DELETE", "/v1/fine_tuning/jobs/ft-x/cancel", "POST"),
    ("POST", "/static/dashboard.html", "GET, HEAD"),  # the static files' own 405
])
def test_a_method_the_path_does_not_take_answers_405_with_allow(
        api: httpx.Client, method: str, path: str, allow: str) -> None:
    answer = api.request(method, path)
    assert answer.status_code == 405
    assert answer.headers["allow"] == allow  # RFC 9110 §15.5.6: a 405 must send it
    assert answer.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("path", ["/v1/files", "/v1/models"])
def test_a_query_parameter_given_twice_is_refused_naming_it(api: httpx.Client,
                                                           path: str) -> None:
    # Not the last one taken and the others dropped: what was meant cannot be told.
    answer = api.get(path, params=[("limit", "5"), ("limit", "7")])
    assert answer.status_code == 400
    assert answer.json()["error"] == {"code": "invalid_request", "param": "limit",
                                      "message": "limit is given 2 times: give it once",
                                      "type": "invalid_request_error"}


@pytest.mark.parametrize("raw", [" 5", "5 ", "+5", "1_0", "٣", "5.0", "0x5"])
def test_a_query_integer_is_written_in_ascii_digits(api: httpx.Client, raw: str) -> None:
    # int() takes the first four; /openapi.json says integer, and no client means " 5".
    answer = api.get("/v1/fine_tuning/jobs", params={"limit": raw})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "limit"
    # An empty one is none given (allowEmptyValue in the document).
    assert api.get("/v1/fine_tuning/jobs", params={"limit": ""}).status_code == 200


def test_a_whole_number_is_an_integer_and_a_fraction_is_not(api: httpx.Client,
                                                            ids: dict[str, str]) -> None:
    # JSON Schema's integer is any number with a zero fraction: 2.0 is 2 (the document
    # cannot say otherwise, so the server may not refuse it). true and 2.5 stay refused.
    spec = {"model": "alallo/tiny-gpt2", "training_file": ids["file"],
            "trainer": "simulated"}
    taken = api.post("/v1/fine_tuning/estimates",
                     json={**spec, "hyperparameters": {"n_epochs": 2.0, "batch_size": 4e0}})
    assert taken.status_code == 200, taken.text
    for refused in (2.5, True):
        answer = api.post("/v1/fine_tuning/estimates",
                          json={**spec, "hyperparameters": {"n_epochs": refused}})
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == "hyperparameters.n_epochs"


@pytest.mark.parametrize(("headers", "query", "param"), [
    ({"Last-Event-ID": "3"}, {"after": "abc"}, "after"),  # the header wins, but after is read
    ({"Last-Event-ID": "3"}, {"lastEventID": "-1"}, "lastEventID"),
    ({}, {"after": "+7"}, "after"),
    ({}, {"after": " 7"}, "after"),
    ({"Last-Event-ID": "007"}, {}, "Last-Event-ID"),  # an id as the server writes ids
])
def test_every_resume_point_given_is_checked(api: httpx.Client, headers: dict[str, str],
                                             query: dict[str, str], param: str) -> None:
    answer = api.get("/v1/fine_tuning/jobs/ft-nothing/stream", headers=headers, params=query)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param


@pytest.mark.parametrize(("route", "after"), [
    ("events", "{job}-event-²"),  # a digit to str.isdigit(), none to int()
    ("events", "{job}-event-99999999999999999999999"),  # past the store's 64-bit integers
    ("checkpoints", "ftckpt-{hex}-²"),
])
def test_a_cursor_the_server_cannot_read_is_a_400_not_a_server_error(
        api: httpx.Client, ids: dict[str, str], route: str, after: str) -> None:
    job = ids["job"]
    cursor = after.format(job=job, hex=job.removeprefix("ft-"))
    answer = api.get(f"/v1/fine_tuning/jobs/{job}/{route}", params={"after": cursor})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "after"


@pytest.mark.parametrize(("body", "param"), [
    ({"prompt": "Hi", "seed": 10**26}, "seed"),  # torch's generator takes 64 bits
    ({"prompt": ""}, "prompt"),  # no token to continue from
    ({"prompt": [""]}, "prompt"),
])
def test_a_completion_the_model_cannot_run_is_refused_naming_the_field(
        api: httpx.Client, body: dict[str, object], param: str) -> None:
    answer = api.post("/v1/completions", json={"model": "alallo/tiny-gpt2", **body},
                      timeout=120)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param


@pytest.mark.parametrize("path", ["/v1/files/file-{long}", "/v1/fine_tuning/jobs/ft-{long}",
                                  "/v1/models/ft:alallo--tiny-gpt2:acct-0:{long}"])
def test_a_very_long_unknown_id_answers_404_with_a_short_message(api: httpx.Client,
                                                                 path: str) -> None:
    # The 404 names the id, its start only: 10,000 characters sent back buried the sentence.
    answer = api.get(path.format(long="0" * 10_000))
    assert answer.status_code == 404, answer.text[:300]
    message = answer.json()["error"]["message"]
    assert message.endswith("…") and len(message) < 300, message[:300]
