"""Tenant isolation on every route, and keys made and revoked by ``alallo accounts|keys``.

Two accounts made with the operator's commands on the live server's store:
``owner`` has a file, a finished job and a running one; ``other`` tries
each route with the owner's ids. Every such answer must be the 404 that an
id nobody has gets (same status, code and message but for the id), and
nothing of the owner's may change. A revoked key answers 401 on every route.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from httpx_sse import connect_sse
from httpx_ws import WebSocketDisconnect, WebSocketSession, connect_ws
from starlette.routing import Route, WebSocketRoute
from typer.testing import CliRunner, Result

from alallo.runtime._key_cache import KEY_CACHE_TTL_S
from alallo.cli import app
from gateway.app import ROUTES
from support import EXAMPLES, FINAL, LiveServer, server_env, wait_until_sync


def operator(server: LiveServer, *args: str, check: bool = True) -> Result:
    """``alallo ARGS --data-dir …`` on the server's store, in this process (it starts
    in milliseconds, not the second a new interpreter takes)."""
    env = server_env(server.data_dir, COLUMNS="200")
    result = CliRunner().invoke(app, [*args, "--data-dir", str(server.data_dir)], env=env)
    if check:
        assert result.exit_code == 0, result.output
    return result


def new_account(server: LiveServer, name: str) -> tuple[str, str]:
    """A new account with a balance and its first key: ``(account_id, key)``."""
    account = json.loads(operator(server, "accounts", "create", name, "--balance", "100",
                                  "--json").stdout)
    key = json.loads(operator(server, "keys", "create", "--account", account["id"],
                              "--json").stdout)
    assert key["account_id"] == account["id"] and key["prefix"] == key["key"][:18]
    return account["id"], key["key"]


def simulated(file_id: str, steps: int, delay: float = 0.0) -> dict[str, Any]:
    return {"model": "alallo/tiny-gpt2", "training_file": file_id,
            "hyperparameters": {"max_steps": steps},
            "trainer": {"type": "simulated", "step_delay_s": delay}}


def wait_final(client: httpx.Client, job_id: str) -> dict[str, Any]:
    """The job's final state: the last job item of its stream, which ends after it."""
    deadline = time.monotonic() + 60
    job: dict[str, Any] | None = None
    with connect_sse(client, "GET", f"/v1/fine_tuning/jobs/{job_id}/stream",
                     timeout=httpx.Timeout(60)) as source:
        assert source.response.status_code == 200, source.response.status_code
        for sse in source.iter_sse():  # a keep-alive comes every 15 s at least
            assert time.monotonic() < deadline, f"{job_id} did not finish in 60 s"
            if sse.event == "done":
                break
            if sse.event == "job":
                job = json.loads(sse.data)
    assert job is not None and job["status"] in FINAL, job
    return job


@dataclass
class Tenants:
    server: LiveServer
    owner: httpx.Client
    other: httpx.Client
    other_key: str
    file: str
    done: str
    running: str
    other_job: str
    model: str
    """The model the owner's finished job trained."""


@pytest.fixture(scope="module")
def tenants(live_server: LiveServer) -> Iterator[Tenants]:
    owner_id, owner_key = new_account(live_server, "owner")
    _, other_key = new_account(live_server, "other")
    with (httpx.Client(base_url=live_server.url, timeout=30,
                       headers={"Authorization": f"Bearer {owner_key}"}) as owner,
          httpx.Client(base_url=live_server.url, timeout=30,
                       headers={"Authorization": f"Bearer {other_key}"}) as other):
        with (EXAMPLES / "sample.jsonl").open("rb") as f:
            file = owner.post("/v1/files", files={"file": ("secret.jsonl", f)}).json()["id"]
        done = owner.post("/v1/fine_tuning/jobs", json=simulated(file, 3) | {
            "name": "owner's finished job"}).json()["id"]
        running = owner.post("/v1/fine_tuning/jobs", json=simulated(file, 100_000, 0.05) | {
            "name": "owner's running job"}).json()["id"]
        with (EXAMPLES / "sample.jsonl").open("rb") as f:
            other_file = other.post("/v1/files", files={"file": ("mine.jsonl", f)}).json()["id"]
        other_job = other.post("/v1/fine_tuning/jobs",
                               json=simulated(other_file, 2)).json()["id"]
        finished = wait_final(owner, done)
        assert finished["status"] == "succeeded"
        assert wait_final(other, other_job)["status"] == "succeeded"
        yield Tenants(live_server, owner, other, other_key, file, done, running, other_job,
                      finished["fine_tuned_model"])
        owner.post(f"/v1/fine_tuning/jobs/{running}/cancel")
        wait_final(owner, running)


# Every route of the app, and how it keeps accounts apart. A new route fails
# test_every_route_is_in_this_table until it is added here (and checked).
BY_ID = "another account's id answers 404, as an unknown id does"
OWN_ONLY = "lists, streams and pages show the caller's own things only"
BODY_REF = "another account's id in the body answers as an unknown id does"
PUBLIC = "no account data"
PAGE_BY_ID = ("another account's job page answers 404 as an unknown id's page does; without "
              "a session, the sign-in page (test_a_job_page_of_another_account_is_an_unknown_ids)")
OPERATOR = "the local (operator's) account only: others answer 403"
OWN_ACCOUNT = ("takes no id: a key reads its own account only "
               "(test_account.py::test_a_key_sees_its_own_account_only)")
ISOLATION: dict[tuple[str, str], str] = {
    ("GET", "/"): PUBLIC,
    ("GET", "/jobs/{job_id}"): PAGE_BY_ID,
    ("GET", "/signin/{token}"): PUBLIC,
    ("POST", "/signout"): PUBLIC,  # ends the caller's own session, if any
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    ("GET", "/openapi.json"): PUBLIC,
    ("POST", "/v1/chat/completions"): BODY_REF,  # test_another_accounts_model_cannot_be_asked
    ("POST", "/v1/completions"): BODY_REF,
    ("GET", "/v1/models"): OWN_ONLY,  # the catalogue, and the caller's fine-tuned models
    ("GET", "/v1/models/{model_id:model}"): BY_ID,
    ("DELETE", "/v1/models/{model_id:model}"): BY_ID,
    # A checkpoint model: another account's answers as an unknown id unless it is shared
    # with the caller, who may then chat and train with it only
    # (test_checkpoint_permissions.py); its permissions are its own account's alone.
    ("POST", "/v1/fine_tuning/checkpoints/{checkpoint}/permissions"): BY_ID,
    ("GET", "/v1/fine_tuning/checkpoints/{checkpoint}/permissions"): BY_ID,
    ("DELETE", "/v1/fine_tuning/checkpoints/{checkpoint}/permissions/{permission_id}"): BY_ID,
    ("GET", "/v1/models/{model_id}/content"): BY_ID,
    ("GET", "/v1/trainers"): PUBLIC,
    ("POST", "/v1/fine_tuning/alpha/graders/validate"): PUBLIC,  # reads the body only
    # A score_model grader asks its model through the caller's chat completions: another
    # account's model fails it as an unknown one does (test_another_accounts_model_...).
    ("POST", "/v1/fine_tuning/alpha/graders/run"): BODY_REF,
    ("GET", "/v1/account"): OWN_ACCOUNT,
    ("POST", "/v1/dashboard/links"): OWN_ONLY,
    ("GET", "/v1/capacity"): OWN_ONLY,
    ("POST", "/v1/capacity/nodes/{node}/drain"): OPERATOR,
    ("POST", "/v1/capacity/nodes/{node}/undrain"): OPERATOR,
    ("POST", "/v1/files"): OWN_ONLY,
    ("GET", "/v1/files"): OWN_ONLY,
    ("GET", "/v1/files/{file_id}"): BY_ID,
    ("DELETE", "/v1/files/{file_id}"): BY_ID,
    ("GET", "/v1/files/{file_id}/content"): BY_ID,
    ("POST", "/v1/fine_tuning/estimates"): BODY_REF,
    ("POST", "/v1/fine-tunes/estimate-price"): BODY_REF,  # test_anothers_file_in_togethers_...
    ("POST", "/v1/fine_tuning/jobs"): BODY_REF,
    ("GET", "/v1/fine_tuning/jobs"): OWN_ONLY,
    ("GET", "/v1/fine_tuning/stream"): OWN_ONLY,
    ("GET", "/v1/fine_tuning/jobs/{job_id}"): BY_ID,
    ("POST", "/v1/fine_tuning/jobs/{job_id}/cancel"): BY_ID,
    ("POST", "/v1/fine_tuning/jobs/{job_id}/pause"): BY_ID,
    ("POST", "/v1/fine_tuning/jobs/{job_id}/resume"): BY_ID,
    ("GET", "/v1/fine_tuning/jobs/{job_id}/events"): BY_ID,
    ("GET", "/v1/fine_tuning/jobs/{job_id}/checkpoints"): BY_ID,
    ("GET", "/v1/fine_tuning/jobs/{job_id}/log"): BY_ID,
    ("GET", "/v1/fine_tuning/jobs/{job_id}/metrics"): BY_ID,
    ("GET", "/v1/fine_tuning/jobs/{job_id}/stream"): BY_ID,
    ("WEBSOCKET", "/v1/ws"): OWN_ONLY,
}


def test_every_route_is_in_this_table() -> None:
    routes: set[tuple[str, str]] = set()
    for route in ROUTES:
        if isinstance(route, WebSocketRoute):
            routes.add(("WEBSOCKET", route.path))
        elif isinstance(route, Route):
            routes |= {(m, route.path) for m in route.methods or () if m != "HEAD"}
    assert routes == set(ISOLATION)


BY_ID_ROUTES = sorted(k for k, v in ISOLATION.items() if v == BY_ID and k[0] != "WEBSOCKET")


UNKNOWN_MODEL = "ft:alallo--tiny-gpt2:acct-0:" + "0" * 24


def _path(template: str, t: Tenants, *, unknown: bool = False) -> str:
    job = "ft-" + "0" * 24 if unknown else t.running
    file = "file-" + "0" * 24 if unknown else t.file
    model = UNKNOWN_MODEL if unknown else t.model
    return template.replace(":model}", "}").format(
        job_id=job, file_id=file, model_id=model, checkpoint=f"{model}:ckpt-step-3",
        permission_id="cp_" + "0" * 24)


@pytest.mark.parametrize("action", ["drain", "undrain"])
def test_only_the_operators_account_drains_nodes(tenants: Tenants, action: str) -> None:
    node = tenants.other.get("/v1/capacity").json()["nodes"][0]["name"]
    response = tenants.other.post(f"/v1/capacity/nodes/{node}/{action}")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert tenants.other.get("/v1/capacity").json()["nodes"][0]["draining"] is False


@pytest.mark.parametrize(("method", "template"), BY_ID_ROUTES)
def test_another_accounts_id_answers_as_an_unknown_one(tenants: Tenants, method: str,
                                                       template: str) -> None:
    theirs = tenants.other.request(method, _path(template, tenants))
    nobodys = tenants.other.request(method, _path(template, tenants, unknown=True))
    assert theirs.status_code == nobodys.status_code == 404, theirs.text
    error = theirs.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    unknown_error = nobodys.json()["error"]
    for owned, unknown in ((tenants.running, "ft-" + "0" * 24), (tenants.file, "file-" + "0" * 24),
                           (tenants.model, UNKNOWN_MODEL)):
        error["message"] = error["message"].replace(owned, unknown)
    assert error == unknown_error


def test_nothing_of_the_owners_changes(tenants: Tenants) -> None:
    for template in ("/v1/files/{file_id}", "/v1/fine_tuning/jobs/{job_id}/cancel",
                     "/v1/fine_tuning/jobs/{job_id}/pause", "/v1/models/{model_id}"):
        method = "POST" if template.endswith(("cancel", "pause")) else "DELETE"
        assert tenants.other.request(method, _path(template, tenants)).status_code == 404
    assert tenants.owner.get(f"/v1/files/{tenants.file}").status_code == 200
    assert tenants.owner.get(f"/v1/models/{tenants.model}").status_code == 200
    others = [m["id"] for m in tenants.other.get("/v1/models").json()["data"]]
    assert tenants.model not in others
    job = tenants.owner.get(f"/v1/fine_tuning/jobs/{tenants.running}").json()
    assert job["status"] in {"queued", "running"}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_another_accounts_model_cannot_be_asked(tenants: Tenants, path: str) -> None:
    asked = ({"messages": [{"role": "user", "content": "Hi"}]} if "chat" in path
             else {"prompt": "Hi"})

    def ask(model: str) -> httpx.Response:
        return tenants.other.post(path, json={"model": model, "max_tokens": 2, **asked})

    theirs, nobodys = ask(tenants.model), ask(UNKNOWN_MODEL)
    assert theirs.status_code == nobodys.status_code == 404, theirs.text
    error = theirs.json()["error"]
    error["message"] = error["message"].replace(tenants.model, UNKNOWN_MODEL)
    assert error == nobodys.json()["error"]


def test_lists_show_the_callers_own_only(tenants: Tenants) -> None:
    listed = tenants.other.get("/v1/files").json()["data"]
    files = [f["id"] for f in listed]
    jobs = [j["id"] for j in tenants.other.get("/v1/fine_tuning/jobs",
                                               params={"limit": 1000}).json()["data"]]
    # Its upload, and the metrics CSV its succeeded job made; nothing of the owner's.
    assert tenants.file not in files and len(files) == 2
    assert {f["purpose"] for f in listed} == {"fine-tune", "fine-tune-results"}
    assert not any(tenants.done.removeprefix("ft-") in file for file in files)
    assert jobs == [tenants.other_job]
    # Paging from the owner's job id does not reach into the owner's jobs.
    after = tenants.other.get("/v1/fine_tuning/jobs", params={"after": tenants.running}).json()
    assert [j["id"] for j in after["data"]] in ([], [tenants.other_job])


def test_the_account_stream_shows_only_the_callers_jobs(tenants: Tenants) -> None:
    seen: list[str] = []
    with connect_sse(tenants.other, "GET", "/v1/fine_tuning/stream",
                     timeout=httpx.Timeout(10)) as source:
        for sse in source.iter_sse():
            if sse.data:
                seen.append(json.loads(sse.data)["id"])
            if tenants.other_job in seen:
                break
    assert seen == [tenants.other_job]


def test_the_websocket_refuses_anothers_job_and_shows_only_the_callers(
        tenants: Tenants) -> None:
    ws: WebSocketSession
    with connect_ws("/v1/ws", tenants.other) as ws:
        ws.send_json({"subscribe": [tenants.running, tenants.done]})
        frames: list[dict[str, Any]] = [ws.receive_json(timeout=10) for _ in range(2)]
    assert {f["data"]["job_id"] for f in frames} == {tenants.running, tenants.done}
    assert all(f["stream"] == "error" and f["data"]["error"]["code"] == "not_found"
               for f in frames)

    with connect_ws("/v1/ws", tenants.other) as ws:
        ws.send_json({"subscribe": "*"})
        first: dict[str, Any] = ws.receive_json(timeout=10)
        with pytest.raises(queue.Empty):  # nothing of the owner's follows
            ws.receive_json(timeout=0.5)
    assert (first["stream"], first["data"]["id"]) == ("job", tenants.other_job)


@pytest.mark.parametrize("path", ["/v1/fine_tuning/jobs", "/v1/fine_tuning/estimates"])
@pytest.mark.parametrize("field", ["training_file", "validation_file"])
def test_anothers_file_in_a_job_spec_answers_as_an_unknown_file(
        tenants: Tenants, path: str, field: str) -> None:
    own = next(f["id"] for f in tenants.other.get("/v1/files").json()["data"]
               if f["purpose"] == "fine-tune")
    unknown = "file-" + "0" * 24
    theirs = tenants.other.post(path, json=simulated(own, 2) | {field: tenants.file})
    nobodys = tenants.other.post(path, json=simulated(own, 2) | {field: unknown})
    assert theirs.status_code == nobodys.status_code == 400
    error = theirs.json()["error"]
    assert error["param"] == field
    assert error["message"].replace(tenants.file, unknown) == nobodys.json()["error"]["message"]


@pytest.mark.parametrize("field", ["training_file", "validation_file"])
def test_anothers_file_in_togethers_estimate_answers_as_an_unknown_file(
        tenants: Tenants, field: str) -> None:
    own = next(f["id"] for f in tenants.other.get("/v1/files").json()["data"]
               if f["purpose"] == "fine-tune")
    unknown = "file-" + "0" * 24
    request = {"model": "alallo/tiny-gpt2", "training_file": own}
    theirs = tenants.other.post("/v1/fine-tunes/estimate-price",
                                json=request | {field: tenants.file})
    nobodys = tenants.other.post("/v1/fine-tunes/estimate-price", json=request | {field: unknown})
    assert theirs.status_code == nobodys.status_code == 400
    assert theirs.json()["error"]["param"] == field
    assert (theirs.json()["error"]["message"].replace(tenants.file, unknown)
            == nobodys.json()["error"]["message"])


@pytest.mark.parametrize("path", ["/v1/fine_tuning/jobs", "/v1/fine_tuning/estimates"])
def test_anothers_model_or_checkpoint_to_continue_answers_as_an_unknown_one(
        tenants: Tenants, path: str) -> None:
    own = next(f["id"] for f in tenants.other.get("/v1/files").json()["data"]
               if f["purpose"] == "fine-tune")
    steps = [c["step_number"] for c in tenants.owner.get(
        f"/v1/fine_tuning/jobs/{tenants.done}/checkpoints").json()["data"]]
    checkpoint, unknown = f"{tenants.done}:{steps[0]}", "ft-" + "0" * 24 + f":{steps[0]}"
    owners_file = tenants.file
    for field, theirs_value, nobodys_value in (("model", tenants.model, UNKNOWN_MODEL),
                                               ("from_checkpoint", checkpoint, unknown)):
        mine = tenants.owner.post("/v1/fine_tuning/estimates",
                                  json=simulated(owners_file, 2) | {field: theirs_value})
        assert mine.status_code == 200, mine.text  # the owner may continue it
        theirs = tenants.other.post(path, json=simulated(own, 2) | {field: theirs_value})
        nobodys = tenants.other.post(path, json=simulated(own, 2) | {field: nobodys_value})
        assert theirs.status_code == nobodys.status_code == 400, theirs.text
        error = theirs.json()["error"]
        assert error["param"] == field
        assert (error["message"].replace(theirs_value, nobodys_value)
                == nobodys.json()["error"]["message"])


def test_capacity_hides_other_accounts_job_ids(tenants: Tenants) -> None:
    owner_view = tenants.owner.get("/v1/capacity").json()
    other_view = tenants.other.get("/v1/capacity").json()
    text = json.dumps(other_view)
    assert tenants.running not in text
    assert owner_view["queue_length"] == other_view["queue_length"]
    for mine, theirs in zip(owner_view["nodes"], other_view["nodes"], strict=True):
        assert sum(mine["busy"].values()) == sum(theirs["busy"].values())
        assert sorted(i for ix in mine["device_indices"].values() for i in ix) == \
            theirs["device_indices"].get("others", [])


def test_dashboard_pages_carry_no_account_data(tenants: Tenants) -> None:
    link = tenants.other.post("/v1/dashboard/links").json()["path"]
    with httpx.Client(base_url=tenants.server.url, timeout=30) as browser:
        assert browser.get(link).status_code == 303  # to the Jobs tab, signed in
        assert "owner's" not in browser.get("/").text
        # The page's own requests carry the cookie: the owner's job stays a 404.
        assert browser.get(f"/v1/fine_tuning/jobs/{tenants.running}").status_code == 404
        mine = browser.get("/v1/fine_tuning/jobs").json()["data"]
        assert [j["id"] for j in mine] == [tenants.other_job]


def test_a_job_page_of_another_account_is_an_unknown_ids(tenants: Tenants) -> None:
    link = tenants.other.post("/v1/dashboard/links").json()["path"]
    unknown_id = "ft-" + "0" * 24
    with httpx.Client(base_url=tenants.server.url, timeout=30) as browser:
        assert browser.get(link).status_code == 303
        theirs = browser.get(f"/jobs/{tenants.running}")
        nobodys = browser.get(f"/jobs/{unknown_id}")
        assert theirs.status_code == nobodys.status_code == 404
        assert theirs.text == nobodys.text and "owner's" not in theirs.text
        assert browser.get(f"/jobs/{tenants.other_job}").status_code == 200
    for client in (tenants.other, tenants.owner):  # a key works as the cookie does
        assert client.get(f"/jobs/{unknown_id}").status_code == 404
    assert tenants.other.get(f"/jobs/{tenants.running}").status_code == 404
    assert tenants.owner.get(f"/jobs/{tenants.running}").status_code == 200


# -- revoked keys ------------------------------------------------------------------

AUTHENTICATED = sorted(k for k, v in ISOLATION.items()
                       if v not in (PUBLIC, PAGE_BY_ID) and k[0] != "WEBSOCKET")


def _request(client: httpx.Client, method: str, template: str, t: Tenants) -> httpx.Response:
    path = template.replace(":model}", "}").format(
        job_id=t.other_job, file_id="file-" + "0" * 24, node="cpu", model_id=UNKNOWN_MODEL,
        checkpoint=f"{UNKNOWN_MODEL}:ckpt-step-3", permission_id="cp_" + "0" * 24)
    if (method, template) == ("POST", "/v1/files"):
        return client.post(path, files={"file": ("a.jsonl", b'{"text": "hi"}\n')})
    if path in ("/v1/fine_tuning/jobs", "/v1/fine_tuning/estimates"):
        return client.post(path, json=simulated("file-" + "0" * 24, 2))
    return client.request(method, path)


def test_a_revoked_key_answers_401_everywhere(tenants: Tenants) -> None:
    server = tenants.server
    accounts = json.loads(operator(server, "accounts", "list", "--json").stdout)["data"]
    other_id = next(a["id"] for a in accounts if a["name"] == "other")
    created = json.loads(operator(server, "keys", "create", "--account", other_id,
                                  "--json").stdout)
    key = created["key"]
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.url, timeout=30, headers=headers) as client:
        assert client.get(f"/v1/fine_tuning/jobs/{tenants.other_job}").status_code == 200
        link = client.post("/v1/dashboard/links").json()["path"]

        revoked = operator(server, "keys", "revoke", created["prefix"])
        assert f"Revoked key {created['prefix']}… of {other_id}." in revoked.stdout
        # The CLI is another process: the server trusts a key it found for
        # KEY_CACHE_TTL_S seconds (docs/performance.md), then reads the store again; the
        # expiry of its cache gives no event.
        wait_until_sync(
            lambda: client.get(f"/v1/fine_tuning/jobs/{tenants.other_job}").status_code != 200,
            timeout=KEY_CACHE_TTL_S + 10, what="the revoked key refused")

        for method, template in AUTHENTICATED:
            response = _request(client, method, template, tenants)
            assert response.status_code == 401, (method, template, response.text)
            assert response.json()["error"]["code"] == "unauthorized"
        stream = client.get(f"/v1/fine_tuning/jobs/{tenants.other_job}/stream",
                            params={"access_token": key}, headers={"Authorization": ""})
        assert stream.status_code == 401
        ws: WebSocketSession
        with pytest.raises(WebSocketDisconnect) as closed, connect_ws("/v1/ws", client) as ws:
            ws.receive_json(timeout=10)
            ws.receive_json(timeout=10)
        assert closed.value.code == 4401
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        browser.get(link)  # a link made before the revocation signs in with a dead key
        assert browser.get("/v1/fine_tuning/jobs").status_code == 401

    # The account's other key is untouched; a second revoke says so.
    assert tenants.other.get("/v1/fine_tuning/jobs").status_code == 200
    again = operator(server, "keys", "revoke", key)
    assert "was revoked already" in again.stdout and key not in again.stdout
    listed = json.loads(operator(server, "keys", "list", "--account", other_id,
                                 "--json").stdout)["data"]
    # Keys made in the same second list in no set order (created_at is in seconds).
    assert sorted((k["prefix"] == created["prefix"], k["revoked_at"] is not None)
                  for k in listed) == [(False, False), (True, True)]
    assert all(tenants.other_key not in json.dumps(k) and key not in json.dumps(k)
               for k in listed)


def test_operator_commands_refuse_what_they_cannot_do(tenants: Tenants,
                                                      tmp_path: Path) -> None:
    server = tenants.server
    unknown = operator(server, "keys", "create", "--account", "acct-nobody", check=False)
    assert unknown.exit_code == 1 and "no account 'acct-nobody'" in unknown.stderr
    short = operator(server, "keys", "revoke", "sk-alallo-", check=False)
    assert short.exit_code == 1 and "give the whole key" in short.stderr
    missing = operator(server, "keys", "revoke", "sk-alallo-doesnotexist", check=False)
    assert missing.exit_code == 1 and "no API key" in missing.stderr
    env = {k: v for k, v in os.environ.items() if k != "ALALLO_DATABASE_URL"}
    empty = subprocess.run([sys.executable, "-m", "alallo", "accounts", "list", "--data-dir",
                            str(tmp_path / "nothing")], capture_output=True, text=True,
                           timeout=60, env=env)
    assert empty.returncode == 1 and "no alallo store in" in empty.stderr
    assert not (tmp_path / "nothing").exists()
    assert "Traceback" not in empty.stderr
    assert all(r.exception is None or isinstance(r.exception, SystemExit)
               for r in (unknown, short, missing))


def test_revoke_by_prefix_is_literal_and_refuses_an_ambiguous_one(tmp_path: Path) -> None:
    from alallo import Settings
    from alallo.store._store import Store

    settings = Settings(data_dir=tmp_path)
    store = Store(settings.resolved_database_url)
    store.open()
    try:
        trio.run(partial(store.ensure_account, "acct-a", "a", 0.0, 1))
        for n, prefix in enumerate(("sk-alallo-ab_x", "sk-alallo-abcx", "sk-alallo-abcy")):
            trio.run(store.create_api_key, f"hash-{n}", "acct-a", prefix, n)
    finally:
        store.close()

    def revoke(given: str) -> Result:
        return CliRunner().invoke(app, ["keys", "revoke", given, "--data-dir", str(tmp_path)])

    ambiguous = revoke("sk-alallo-abc")
    assert ambiguous.exit_code == 1
    assert "2 keys start with 'sk-alallo-abc'" in ambiguous.stderr
    underscore = revoke("sk-alallo-ab_")  # "_" is no LIKE wildcard here
    assert underscore.exit_code == 0 and "Revoked key sk-alallo-ab_x…" in underscore.stdout
    listed = CliRunner().invoke(app, ["keys", "list", "--json", "--data-dir", str(tmp_path)])
    revoked = {k["prefix"]: k["revoked_at"] is not None
               for k in json.loads(listed.stdout)["data"]}
    assert revoked == {"sk-alallo-ab_x": True, "sk-alallo-abcx": False, "sk-alallo-abcy": False}


def test_files_page_with_after_and_limit_within_the_account(tenants: Tenants) -> None:
    from alallo import Client

    _, key = new_account(tenants.server, "pager")
    with Client(tenants.server.url, api_key=key) as client:
        uploaded = [client.upload_file(EXAMPLES / "sample.jsonl")["id"] for _ in range(3)]
        newest_first = [f["id"] for f in client.list_files()["data"]]  # same second: by id
        assert sorted(newest_first) == sorted(uploaded)
        first = client.list_files(limit=2)
        assert [f["id"] for f in first["data"]] == newest_first[:2] and first["has_more"]
        rest = client.list_files(limit=2, after=first["data"][-1]["id"])
        assert [f["id"] for f in rest["data"]] == newest_first[2:] and not rest["has_more"]
        assert [f["id"] for f in client.iter_files(page_size=1)] == newest_first

    pager = httpx.Client(base_url=tenants.server.url, timeout=30,
                         headers={"Authorization": f"Bearer {key}"})
    with pager:
        theirs = pager.get("/v1/files", params={"after": tenants.file})
        nobodys = pager.get("/v1/files", params={"after": "file-" + "0" * 24})
    assert theirs.status_code == nobodys.status_code == 400
    assert theirs.json()["error"]["param"] == "after"
    assert (theirs.json()["error"]["message"].replace(tenants.file, "file-" + "0" * 24)
            == nobodys.json()["error"]["message"])


def test_an_operator_funds_an_account_and_lists_whole_ids_on_80_columns(
        live_server: LiveServer) -> None:
    created = operator(live_server, "accounts", "create", "Team with a long name")
    assert "starting balance $0.00" in created.stdout
    assert "It has no money yet: its jobs are refused until it has some" in created.stdout
    account = created.stdout.split("Created account ", 1)[1].split()[0]
    funded = operator(live_server, "accounts", "set", account, "--add-balance", "12.5",
                      "--billing-limit", "2")
    assert f"Account {account}: balance $12.50, billing limit $2.00." in funded.stdout
    again = json.loads(operator(live_server, "accounts", "set", account, "--add-balance",
                                "-0.5", "--json").stdout)
    assert (again["balance"], again["billing_limit"]) == (12.0, 2.0)
    nothing = operator(live_server, "accounts", "set", account, check=False)
    assert nothing.exit_code == 1 and "say what to change" in nothing.stderr
    env = server_env(live_server.data_dir, COLUMNS="80")
    listed = CliRunner().invoke(app, ["accounts", "list", "--data-dir",
                                      str(live_server.data_dir)], env=env)
    assert listed.exit_code == 0 and account in listed.stdout  # whole, not cut
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
