"""W&B in OpenAI's form: ``integrations: [{"type": "wandb", "wandb": {"project", "entity",
"name", "tags"}}]`` with no key in the request, logging in with the key the operator stored
for the account (``alallo accounts set ACCOUNT --wandb-key``), which no answer shows."""

from __future__ import annotations

import base64
import json
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import openai
import pytest
import trio
from support import EXAMPLES, LiveServer, read_stream
from typer.testing import CliRunner

from alallo import LOCAL_ACCOUNT
from alallo.cli import app

WANDB_KEY = "fedcba9876543210fedcba9876543210fedcba98"
OPENAI_FORM = [{"type": "wandb", "wandb": {"project": "demo", "entity": "team",
                                           "name": "first run", "tags": ["a", "b"]}}]


@contextmanager
def wandb_recording_logins(keys: list[str], seen: threading.Event) -> Iterator[str]:
    """A W&B server stand-in on loopback: records the key of each login (HTTP basic auth,
    user ``api``) and refuses it."""

    class Record(BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            scheme, _, token = (self.headers.get("authorization") or "").partition(" ")
            if scheme.lower() == "basic":
                keys.append(base64.b64decode(token).decode().partition(":")[2])
                seen.set()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"errors": [{"message": "user is not logged in"}]}')

        do_GET = do_POST = _refuse

        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Record)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def set_account(server: LiveServer, *args: str) -> dict[str, object]:
    """``alallo accounts set acct-local ARGS --json`` on the server's store (the command
    runs a Trio loop of its own: in a thread)."""
    return await trio.to_thread.run_sync(_set_account, server, *args)


def _set_account(server: LiveServer, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["accounts", "set", LOCAL_ACCOUNT, *args, "--json",
                                      "--data-dir", str(server.data_dir)])
    assert result.exit_code == 0, result.output
    assert WANDB_KEY not in result.output
    return json.loads(result.stdout)


async def test_openais_wandb_form_logs_in_with_the_stored_key(
        server_factory: Callable[..., LiveServer]) -> None:
    keys: list[str] = []
    seen = threading.Event()
    with wandb_recording_logins(keys, seen) as url:
        server = server_factory(ALALLO_WANDB_BASE_URL=url)
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.api_key,
                            max_retries=0, timeout=30)
        with (EXAMPLES / "sample.jsonl").open("rb") as f:
            file = sdk.files.create(file=f, purpose="fine-tune")
        spec = {"model": "alallo/tiny-gpt2", "training_file": file.id,
                "integrations": OPENAI_FORM,
                "extra_body": {"hyperparameters": {"max_steps": 3},
                               "trainer": {"type": "simulated", "step_delay_s": 0}}}

        with pytest.raises(openai.BadRequestError) as refused:
            sdk.fine_tuning.jobs.create(**spec)  # type: ignore[arg-type]
        assert refused.value.body["param"] == "integrations"  # type: ignore[index]
        assert "alallo accounts set" in refused.value.body["message"]  # type: ignore[index]

        assert (await set_account(server, "--wandb-key", WANDB_KEY))["wandb_key_stored"]
        created = sdk.fine_tuning.jobs.with_raw_response.create(**spec)  # type: ignore[arg-type]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            job = created.parse()
        assert WANDB_KEY not in created.text
        wandb = job.integrations[0].wandb  # type: ignore[index]
        assert (wandb.project, wandb.entity, wandb.name, wandb.tags) == (
            "demo", "team", "first run", ["a", "b"])

        async with httpx.AsyncClient(base_url=server.url, headers=server.headers,
                                     timeout=30) as client:
            with trio.fail_after(120):
                items = await read_stream(client, job.id)
            everything = (await client.get("/v1/fine_tuning/jobs", params={"limit": 100})).text
        assert WANDB_KEY not in everything + json.dumps([item[2] for item in items])
        assert seen.is_set() and set(keys) == {WANDB_KEY}  # the stored key logged in
        final = sdk.fine_tuning.jobs.retrieve(job.id)
        assert final.status == "cancelled"  # the stand-in refused it: the seed's auto-cancel

        assert (await set_account(server, "--forget-wandb-key"))["wandb_key_stored"] is False
        with pytest.raises(openai.BadRequestError):
            sdk.fine_tuning.jobs.create(**spec)  # type: ignore[arg-type]
        sdk.close()


@pytest.mark.parametrize(("args", "why"), [
    (["--wandb-key", "short"], "a W&B API key has 40 characters; this one has 5"),
    (["--wandb-key", WANDB_KEY, "--forget-wandb-key"], "not both"),
])
def test_a_bad_wandb_key_is_refused_by_the_command(live_server: LiveServer, args: list[str],
                                                   why: str) -> None:
    result = CliRunner().invoke(app, ["accounts", "set", LOCAL_ACCOUNT, *args,
                                      "--data-dir", str(live_server.data_dir)])
    assert result.exit_code != 0 and why in result.output
