"""A request answered with an error changes nothing (issue 31, "Atomic requests").

Every POST route of the app, found in its routes (a new one is covered without a word
here), gets malformed requests: no key or a wrong one, bodies that are not JSON, not an
object, too deep, too large, with ``NaN``/``Infinity``, a lone surrogate or an unknown
field; each route also gets the bad requests of its own kind (:func:`route_cases`: job specs
with non-finite numbers, booleans for numbers, unknown nested fields, suffixes, a
tenant's failure switches; uploads; completions...). The sign-in link (a GET that starts
a session) is sent a bad token too. Each error answer must be a 4xx and leave every row
of the store as it was (jobs, their events and log, files, the ledger and balances,
accounts, keys, sessions), and the uploads on disk; at the end, the lists of the API
(jobs, their events, files, models) too. A request that is no error at its route (a body
sent to a route that reads none) may change what it changes; the state is taken again.

Before issue 31, ``early_stopping.min_delta: Infinity`` stored and started a job and
answered 500; a tenant's ``fail_at_step`` and ``max_steps: true`` made jobs; an unknown
field under ``method`` was dropped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import sqlalchemy as sa
import trio
from starlette.applications import Starlette
from starlette.routing import Route

from actors import ActorStopped
from alallo import Runtime, Settings
from alallo._keys import hash_key, key_id, new_key
from gateway import build_app
from gateway._limits import MAX_JSON_BODY_BYTES

SAMPLE = Path(__file__).parents[2] / "examples" / "sample.jsonl"
UPLOAD_LIMIT = 64 * 1024
"""``max_upload_bytes`` of the test's runtime: a file just over it is cheap to send."""
VOLATILE_TABLES = {"nodes", "server_secrets", "alembic_version"}
"""Rows that change by themselves (heartbeats) or are the server's own, not a caller's."""

Who = Literal["local", "tenant", "nobody", "wrong key"]


@dataclass(frozen=True)
class Bad:
    """One bad request to a route, and the status it must be answered with (None: any;
    a request that is no error there, such as a malformed body to a route that reads
    none, is let through and the state taken again)."""

    what: str
    who: Who = "local"
    status: int | None = None
    json: Any = None
    content: bytes | None = None
    files: dict[str, Any] | None = None
    data: dict[str, str] | None = None


@dataclass
class World:
    """An open runtime with two accounts: the local one (the operator's, trusted with
    commands) and a tenant's, each with a training file; the local one with a finished
    job whose model exists."""

    runtime: Runtime
    app: Starlette
    clients: dict[str, httpx.AsyncClient]
    ids: dict[str, str] = field(default_factory=dict)
    tables: list[sa.Table] = field(default_factory=list)


def client(app: Starlette, key: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                             base_url="http://alallo", headers=headers, timeout=60)


async def upload(c: httpx.AsyncClient, path: Path) -> str:
    answer = await c.post("/v1/files", files={"file": (path.name, path.read_bytes())},
                          data={"purpose": "fine-tune"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with Runtime(Settings(data_dir=tmp_path / "data",
                                max_upload_bytes=UPLOAD_LIMIT)) as runtime:
        await runtime.store.ensure_account("acct-tenant", "tenant", 100.0, 1)
        tenant_key = new_key()
        await runtime.store.create_api_key(hash_key(tenant_key), "acct-tenant",
                                           key_id(tenant_key), 1)
        app = build_app(runtime)
        async with client(app, runtime.api_key) as local, client(app, tenant_key) as tenant, \
                client(app, None) as nobody, client(app, "sk-not-a-key") as wrong:
            world = World(runtime, app, {"local": local, "tenant": tenant, "nobody": nobody,
                                         "wrong key": wrong})
            world.ids["file"] = await upload(local, SAMPLE)
            world.ids["tenant_file"] = await upload(tenant, SAMPLE)
            job = (await local.post("/v1/fine_tuning/jobs", json={
                "model": "alallo/tiny-gpt2", "training_file": world.ids["file"],
                "hyperparameters": {"max_steps": 2}, "suffix": "my-model_2",
                "trainer": {"type": "simulated", "step_delay_s": 0}})).json()
            done = await runtime.wait_for_final(await runtime.authenticate(runtime.api_key),
                                                job["id"])
            assert done.status.value == "succeeded", done
            world.ids["job"] = job["id"]
            world.ids["model"] = (await local.get(f"/v1/fine_tuning/jobs/{job['id']}")
                                  ).json()["fine_tuned_model"]
            world.ids["node"] = (await local.get("/v1/capacity")).json()["nodes"][0]["name"]
            yield world


def _rows(engine: sa.Engine, tables: list[sa.Table]) -> dict[str, list[str]]:
    with engine.connect() as c:
        return {table.name: sorted(repr(tuple(row)) for row in c.execute(sa.select(table)))
                for table in tables}


async def stored(world: World) -> dict[str, Any]:
    """Every row of the store but :data:`VOLATILE_TABLES` (jobs, their events and log,
    files, the ledger, balances, keys, sessions), and the uploads on disk."""
    engine = world.runtime.store.engine
    if not world.tables:
        metadata = sa.MetaData()
        await trio.to_thread.run_sync(metadata.reflect, engine)
        world.tables = [t for name, t in metadata.tables.items() if name not in VOLATILE_TABLES]
    files_dir = world.runtime.settings.data_dir / "files"
    return {"rows": await trio.to_thread.run_sync(_rows, engine, world.tables),
            "on disk": sorted(p.name for p in files_dir.iterdir())}


async def listed(world: World) -> dict[str, Any]:
    """What each account's lists say: jobs, their events, files, models."""
    seen: dict[str, Any] = {}
    for who in ("local", "tenant"):
        c = world.clients[who]
        jobs = (await c.get("/v1/fine_tuning/jobs", params={"limit": 1000})).json()["data"]
        seen[who] = {
            "jobs": [(j["id"], j["status"], j["seq"]) for j in jobs],
            "events": {j["id"]: (await c.get(f"/v1/fine_tuning/jobs/{j['id']}/events",
                                             params={"limit": 1000})).json()["data"]
                       for j in jobs},
            "files": (await c.get("/v1/files")).json()["data"],
            "models": (await c.get("/v1/models")).json()["data"],
        }
    return seen


def _raw(text: str) -> bytes:
    return text.encode()


GENERIC = [
    Bad("no API key", who="nobody", json={}),
    Bad("a wrong API key", who="wrong key", json={}),
    Bad("a tenant, no body", who="tenant"),
    Bad("not JSON", content=b"{oops"),
    Bad("a JSON array", content=b"[1, 2]"),
    Bad("a lone surrogate", content=b'{"model": "\\ud800", "prompt": "\\udc00"}'),
    Bad("NaN and Infinity", content=b'{"model": NaN, "temperature": Infinity, "n": -Infinity}'),
    Bad("nested too deep", content=b"[" * 100 + b"]" * 100),
    Bad("over the size limit", content=b'{"pad": "' + b"x" * MAX_JSON_BODY_BYTES + b'"}'),
    Bad("an unknown field", json={"surprise": True}),
]
"""Sent to every POST route, whatever it reads."""


def spec_cases(ids: dict[str, str]) -> list[Bad]:
    """Bad job specs, for ``/v1/fine_tuning/jobs`` and ``/v1/fine_tuning/estimates``."""
    base = {"model": "alallo/tiny-gpt2", "training_file": ids["file"],
            "trainer": {"type": "simulated", "step_delay_s": 0},
            "hyperparameters": {"max_steps": 2}}
    mine = json.dumps(base)[:-1]  # to add fields that json.dumps cannot write

    def with_(**fields: Any) -> dict[str, Any]:
        return {**base, **fields}

    tenant = {**base, "training_file": ids["tenant_file"]}
    return [
        Bad("min_delta: Infinity", status=400, content=_raw(
            mine + f', "validation_file": "{ids["file"]}", '
            '"early_stopping": {"patience": 1, "min_delta": Infinity}}')),
        Bad("min_delta: 1e400", status=400, content=_raw(
            mine + f', "validation_file": "{ids["file"]}", '
            '"early_stopping": {"patience": 1, "min_delta": 1e400}}')),
        Bad("learning_rate: NaN", status=400, content=_raw(
            mine.replace('"max_steps": 2', '"max_steps": 2, "learning_rate": NaN') + "}")),
        Bad("max_steps: true", status=400, json=with_(hyperparameters={"max_steps": True})),
        Bad("seed: false", status=400, json=with_(seed=False)),
        Bad("n_epochs: '3'", status=400, json=with_(hyperparameters={"n_epochs": "3"})),
        Bad("suffix a/b", status=400, json=with_(suffix="a/b")),
        Bad("a 65-character suffix", status=400, json=with_(suffix="x" * 65)),
        Bad("method.supervised.trainer", status=400, json=with_(method={
            "type": "supervised", "supervised": {"trainer": {"command": ["sh", "-c", "id"]}}})),
        Bad("training_method.trainer", status=400, json=with_(training_method={
            "method": "sft", "trainer": {"command": ["sh"]}})),
        Bad("metadata with a lone surrogate", status=400,
            content=_raw(mine + ', "metadata": {"a": "\\udc00"}}')),
        Bad("a tenant's fail_at_step", who="tenant", status=403, json={
            **tenant, "trainer": {"type": "simulated", "fail_at_step": 1}}),
        Bad("a tenant's memory_surprise", who="tenant", status=403, json={
            **tenant, "trainer": {"type": "simulated", "memory_surprise": 3}}),
        Bad("a tenant's command", who="tenant", status=403, json={
            **tenant, "trainer": {"command": ["sh", "-c", "id"]}}),
        Bad("a tenant's model path", who="tenant", status=403, json={**tenant, "model": "/etc"}),
        Bad("another account's file", who="tenant", status=400, json=base),
        Bad("an unknown model", status=400, json=with_(model="no/such-model")),
        Bad("too many steps", status=400, json=with_(hyperparameters={"max_steps": 10**9})),
        Bad("dpo on examples", status=400, json=with_(method="dpo")),
        Bad("a short W&B key", status=400, json=with_(integrations=[
            {"type": "wandb", "wandb": {"project": "p", "api_key": "short"}}])),
    ]


def completion_cases(ids: dict[str, str], chat: bool) -> list[Bad]:
    """Bad completion requests (refused before any model is loaded)."""
    ask: dict[str, Any] = ({"messages": [{"role": "user", "content": "hi"}]} if chat
                           else {"prompt": "hi"})
    base = {"model": "alallo/tiny-gpt2", **ask}
    mine = json.dumps(base)[:-1]
    return [
        Bad("temperature: Infinity", status=400, content=_raw(mine + ', "temperature": Infinity}')),
        Bad("top_p: NaN", status=400, content=_raw(mine + ', "top_p": NaN}')),
        Bad("max_tokens: true", status=400, json={**base, "max_tokens": True}),
        Bad("n: true", status=400, json={**base, "n": True}),
        Bad("stream: 'yes'", status=400, json={**base, "stream": "yes"}),
        Bad("an unknown model", status=404, json={**base, "model": "no/such-model"}),
        Bad("another account's model", who="tenant", status=404,
            json={**base, "model": ids["model"]}),
    ]


def route_cases(ids: dict[str, str]) -> dict[str, list[Bad]]:
    """The bad requests of each POST route's own kind, by its path."""
    specs = spec_cases(ids)
    sample = SAMPLE.read_bytes()
    return {
        "/v1/fine_tuning/jobs": specs,
        "/v1/fine_tuning/estimates": specs,
        "/v1/files": [
            Bad("JSON, not multipart", status=400, json={"file": "x"}),
            Bad("no file field", status=400, files={"other": ("a.jsonl", sample)}),
            Bad("purpose batch", status=400, files={"file": ("a.jsonl", sample)},
                data={"purpose": "batch"}),
            Bad("a bad line", status=400, files={"file": ("a.jsonl", b'{"text": "a"}\n[1]\n')}),
            Bad("over the upload limit", status=413,
                files={"file": ("a.jsonl", b'{"text": "' + b"x" * UPLOAD_LIMIT + b'"}\n')}),
            Bad("a 600-character name", status=400, files={"file": ("a" * 600, sample)}),
        ],
        "/v1/chat/completions": completion_cases(ids, chat=True),
        "/v1/completions": completion_cases(ids, chat=False),
        "/v1/fine_tuning/jobs/{job_id}/cancel": [
            Bad("a finished job", status=409),
            Bad("another account's job", who="tenant", status=404),
        ],
        **{f"/v1/fine_tuning/jobs/{{job_id}}/{action}": [
            Bad("a finished job", status=409),
            Bad("another account's job", who="tenant", status=404),
        ] for action in ("pause", "resume")},
        "/v1/capacity/nodes/{node}/drain": [Bad("a tenant", who="tenant", status=403)],
        "/v1/capacity/nodes/{node}/undrain": [Bad("a tenant", who="tenant", status=403)],
        "/v1/dashboard/links": [],
        "/signout": [],
    }


def post_routes(app: Starlette) -> list[Route]:
    return [r for r in app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]


async def test_error_answers_of_every_post_route_change_nothing(world: World) -> None:
    cases = route_cases(world.ids)
    paths = [route.path for route in post_routes(world.app)]
    assert set(cases) <= set(paths), f"no such POST routes: {sorted(set(cases) - set(paths))}"
    params = {"job_id": world.ids["job"], "node": world.ids["node"],
              "checkpoint": f"{world.ids['model']}:ckpt-step-2"}  # its job's last step
    lists, before = await listed(world), await stored(world)
    problems: list[str] = []  # all of them, not the first only
    refused = 0
    for path in paths:
        for bad in [*GENERIC, *cases.get(path, [])]:  # a new route: the generic ones
            url = path.format(**params)
            answer = await world.clients[bad.who].post(
                url, json=bad.json, content=bad.content, files=bad.files, data=bad.data,
                headers={} if bad.files or bad.json is not None or bad.content is None
                else {"Content-Type": "application/json"})
            where = (f"POST {url} with {bad.what} ({bad.who}): "
                     f"{answer.status_code} {answer.text[:200]}")
            if bad.status is not None and answer.status_code != bad.status:
                problems.append(f"expected {bad.status}: {where}")
            if answer.status_code < 400:  # no error: what it changed is its right
                lists, before = await listed(world), await stored(world)
                continue
            refused += 1
            if answer.status_code >= 500 or "error" not in answer.json():
                problems.append(f"not a 4xx error: {where}")
            if (now := await stored(world)) != before:
                problems.append(f"changed the store: {where}")
                lists, before = await listed(world), now
    # The sign-in link: a GET that starts a session.
    for token in ("no-such-token", "x" * 500):
        answer = await world.clients["nobody"].get(f"/signin/{token}")
        if answer.status_code != 401 or await stored(world) != before:
            problems.append(f"GET /signin/{token[:20]}: {answer.status_code}, or it changed")
    if await listed(world) != lists:
        problems.append("the lists of jobs, events, files or models changed")
    assert not problems, "\n".join(problems)
    assert refused > 10 * len(paths)


async def test_a_job_accepted_while_the_runtime_closes_is_answered_not_refused(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job is stored before its actor starts; a runtime that closes meanwhile leaves it
    to the next process. Answering that as an error (a 500, before) made a retrying client
    create it twice."""

    async def closing(*args: object, **kwargs: object) -> bool:
        raise ActorStopped("the runtime is closing")

    monkeypatch.setattr(world.runtime.starter, "start", closing)
    answer = await world.clients["local"].post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": world.ids["file"],
        "trainer": {"type": "simulated", "step_delay_s": 0}})
    assert answer.status_code == 200, answer.text
    jobs = (await world.clients["local"].get("/v1/fine_tuning/jobs")).json()["data"]
    assert answer.json()["id"] in [job["id"] for job in jobs]


async def test_a_suffixed_model_can_be_fetched_and_a_slash_is_refused(world: World) -> None:
    local = world.clients["local"]
    model = world.ids["model"]
    assert ":acct-local:my-model_2:" in model
    assert (await local.get(f"/v1/models/{model}")).status_code == 200
    answer = await local.post("/v1/fine_tuning/estimates", json={
        "model": "alallo/tiny-gpt2", "training_file": world.ids["file"], "suffix": "a/b"})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "suffix"


@pytest.mark.parametrize("switch", [{"fail_at_step": 1}, {"memory_surprise": 2.5}])
async def test_a_failure_switch_is_the_operators(world: World, switch: dict[str, float]) -> None:
    """A tenant may not make the platform fail (and raise the operator's alert); the local
    account, whose key the operator holds, may; the pace is anyone's."""
    spec = {"model": "alallo/tiny-gpt2", "training_file": world.ids["tenant_file"],
            "trainer": {"type": "simulated", **switch}}
    name = next(iter(switch))
    for path in ("/v1/fine_tuning/estimates", "/v1/fine_tuning/jobs"):
        answer = await world.clients["tenant"].post(path, json=spec)
        assert answer.status_code == 403, answer.text
        error = answer.json()["error"]
        assert error["param"] == f"trainer.{name}"
        assert error["message"].startswith(f"{name} makes the simulated trainer fail on purpose")
    pace = {**spec, "trainer": {"type": "simulated", "step_delay_s": 0.5, "step_noise": 0.2}}
    assert (await world.clients["tenant"].post("/v1/fine_tuning/estimates",
                                               json=pace)).status_code == 200
    mine = {**spec, "training_file": world.ids["file"]}
    assert (await world.clients["local"].post("/v1/fine_tuning/estimates",
                                              json=mine)).status_code == 200
