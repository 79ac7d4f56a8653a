"""``GET /v1/account``: the caller's balance, billing limit and spend, as the ledger has them.

Accounts of their own on the session's live server (made with the operator's
``alallo accounts create``), so that no other test's jobs move their figures: one job
charged (it succeeds), one charged and then refunded (its own trainer command fails with
a user error after a checkpoint was charged). The answer is checked against the ledger
rows in the store, to the ledger's last digit, and against the jobs' own prices.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import trio
from sqlalchemy.pool import NullPool
from support import EXAMPLES, LiveServer
from test_stored_rows import store_url
from test_tenants import operator, simulated, wait_final

from alallo import AsyncClient, Client, Unauthorized

# The route and the money are the subject; the store's sums run on both backends in
# tests/alallo/test_account_summary.py.
pytestmark = pytest.mark.any_backend

DIGITS = 9
"""The ledger keeps nano-dollars (alallo/jobs/_billing.py); the API rounds to them."""

FAILING_TRAINER = """
import json
for step in range(1, 6):
    print(json.dumps({"type": "progress", "step": step, "max_steps": 10}), flush=True)
print(json.dumps({"type": "checkpoint", "step": 5, "path": "checkpoint-5"}), flush=True)
print(json.dumps({"type": "error", "kind": "user", "message": "line 3: no text"}), flush=True)
raise SystemExit(1)
"""
"""A trainer of the account's own: 5 steps, a checkpoint (charged), then the user's error
(the job fails, and what was charged is refunded)."""


def account_with_key(server: LiveServer, name: str, *args: str) -> tuple[dict[str, Any], str]:
    """A new account (``alallo accounts create NAME ARGS``) and a key of it."""
    account = json.loads(operator(server, "accounts", "create", name, *args, "--json").stdout)
    key = json.loads(operator(server, "keys", "create", "--account", account["id"],
                              "--json").stdout)["key"]
    return account, key


def ledger_sums(server: LiveServer, account_id: str) -> dict[str, float]:
    """The account's ledger rows in the server's store, summed by kind."""
    engine = sa.create_engine(store_url(server.data_dir), poolclass=NullPool)
    try:
        with engine.connect() as c:
            rows = c.execute(sa.text("SELECT kind, SUM(amount) FROM ledger "
                                     "WHERE account_id = :a GROUP BY kind"), {"a": account_id})
            return {kind: float(total) for kind, total in rows}
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def spender(live_server: LiveServer) -> Iterator[tuple[dict[str, Any], httpx.Client,
                                                        list[dict[str, Any]]]]:
    """An account (balance $100, billing limit $5, its own trainer commands allowed) with
    a client, after one job that was charged and one that was refunded: their final states."""
    account, key = account_with_key(live_server, "Spender Ltd", "--balance", "100",
                                    "--billing-limit", "5", "--allow-commands")
    with httpx.Client(base_url=live_server.url, timeout=30,
                      headers={"Authorization": f"Bearer {key}"}) as client:
        file = client.post("/v1/files", files={"file": (
            "a.jsonl", (EXAMPLES / "sample.jsonl").read_bytes())}).json()["id"]
        charged = client.post("/v1/fine_tuning/jobs", json=simulated(file, 20, 0.02)).json()
        refunded = client.post("/v1/fine_tuning/jobs", json={
            "model": "alallo/tiny-gpt2", "training_file": file,
            "trainer": {"command": [sys.executable, "-c", FAILING_TRAINER]}}).json()
        jobs = [wait_final(client, charged["id"]), wait_final(client, refunded["id"])]
        yield account, client, jobs


def test_the_figures_are_the_ledgers_to_the_last_digit(
        live_server: LiveServer,
        spender: tuple[dict[str, Any], httpx.Client, list[dict[str, Any]]]) -> None:
    account, client, (charged, refunded) = spender
    assert charged["status"] == "succeeded" and charged["price"]["charged"] > 0
    assert refunded["status"] == "failed", refunded["message"]
    assert refunded["price"]["gross"] > 0 and refunded["price"]["refunded"] == (
        refunded["price"]["gross"])

    response = client.get("/v1/account")
    assert response.status_code == 200, response.text
    got = response.json()
    ledger = ledger_sums(live_server, account["id"])
    gross, given_back = round(ledger["charge"], DIGITS), round(ledger["refund"], DIGITS)
    net = round(gross - given_back, DIGITS)
    assert got == {
        "object": "account", "id": account["id"], "name": "Spender Ltd",
        "created_at": account["created_at"], "currency": "USD",
        "balance": round(100 - net, DIGITS), "billing_limit": 5.0,
        "available": round(105 - net, DIGITS),
        "spend": {"charged": net, "gross": gross, "refunded": given_back},
    }
    # The same money as the jobs' prices: the refunded job costs nothing, the other its price.
    jobs = (charged["price"], refunded["price"])
    assert got["spend"]["gross"] == round(sum(p["gross"] for p in jobs), DIGITS)
    assert got["spend"]["refunded"] == refunded["price"]["refunded"]
    assert got["spend"]["charged"] == charged["price"]["charged"]
    # The operator's view of the same account agrees.
    listed = json.loads(operator(live_server, "accounts", "list", "--json").stdout)["data"]
    row = next(r for r in listed if r["id"] == account["id"])
    assert round(row["balance"], DIGITS) == got["balance"]


def test_a_key_sees_its_own_account_only(
        live_server: LiveServer,
        spender: tuple[dict[str, Any], httpx.Client, list[dict[str, Any]]]) -> None:
    spenders, _, _ = spender
    account, key = account_with_key(live_server, "Other Co", "--balance", "7")
    got = httpx.get(f"{live_server.url}/v1/account", timeout=30,
                    headers={"Authorization": f"Bearer {key}"}).json()
    assert (got["id"], got["name"], got["balance"], got["billing_limit"], got["available"]) == (
        account["id"], "Other Co", 7.0, 0.0, 7.0)
    assert got["spend"] == {"charged": 0, "gross": 0, "refunded": 0}
    assert spenders["id"] not in json.dumps(got)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer sk-alallo-nobody"}])
def test_without_a_valid_key_it_answers_401(live_server: LiveServer,
                                            headers: dict[str, str]) -> None:
    response = httpx.get(f"{live_server.url}/v1/account", headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_both_clients_read_the_same_account(
        live_server: LiveServer,
        spender: tuple[dict[str, Any], httpx.Client, list[dict[str, Any]]]) -> None:
    _, client, _ = spender
    key = client.headers["authorization"].removeprefix("Bearer ")
    expected = client.get("/v1/account").json()
    with Client(live_server.url, api_key=key) as sync_client:
        assert sync_client.account() == expected

    async def read() -> Any:
        async with AsyncClient(live_server.url, api_key=key) as async_client:
            return await async_client.account()

    assert trio.run(read) == expected
    with Client(live_server.url, api_key="sk-alallo-nobody") as stranger, \
            pytest.raises(Unauthorized):
        stranger.account()
