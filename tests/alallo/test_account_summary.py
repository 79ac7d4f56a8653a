"""An account's own figures from the embedded runtime (``rt.accounts.summary``, what
``GET /v1/account`` answers): sums of its ledger, its completions' charges included,
written as the ledger has them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alallo import NotFound, Runtime, Settings


async def test_the_summary_sums_the_ledger_and_reads_to_its_digit(tmp_path: Path) -> None:
    async with Runtime(Settings(data_dir=tmp_path)) as rt:
        store = rt.store
        await store.ensure_account("acct-a", "A", 0.3, 1_700_000_000, billing_limit=0.5)
        await store.ensure_account("acct-b", "B", 9.0, 1_700_000_001)
        for n in range(3):  # 0.1 three times: 0.30000000000000004 in floats
            await store.charge_usage("acct-a", f"chatcmpl-{n}", 100, 0.1)
        await store.charge_usage("acct-b", "chatcmpl-b", 100, 2.5)
        mine = await rt.accounts.summary("acct-a")
        theirs = await rt.accounts.summary("acct-b")
        with pytest.raises(NotFound) as unknown:
            await rt.accounts.summary("acct-nobody")
    assert mine == {
        "id": "acct-a", "object": "account", "name": "A", "created_at": 1_700_000_000,
        "balance": 0.0, "billing_limit": 0.5, "available": 0.5, "currency": "USD",
        "spend": {"charged": 0.3, "refunded": 0.0, "gross": 0.3},
    }
    assert "-0.0" not in json.dumps(mine), "a balance spent to the last digit reads 0, not -0"
    assert (theirs["balance"], theirs["spend"]["gross"]) == (6.5, 2.5)
    assert unknown.value.param == "account"
