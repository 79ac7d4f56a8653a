"""``alallo accounts`` and ``alallo keys``: the operator's commands for who may use a server.

They work on the server's store directly (``--data-dir`` for the SQLite
default, ``--database-url`` or ``ALALLO_DATABASE_URL`` for PostgreSQL), not
through HTTP. Why, of the two ways weighed:

- Creating accounts and keys is the operator's power. Whoever can open the
  database has it already; an HTTP admin route would add a second way in,
  open to the network, and an "admin" kind of key the API does not have.
- They work with no server running (set up accounts before the first
  start), and once for several servers that share one PostgreSQL database.
- A running server sees a new key at once and a revoked one within
  ``alallo.runtime._key_cache.KEY_CACHE_TTL_S`` (3 s): it remembers a key it found in
  the store that long (streams already open keep going until they end).

Keys are stored as their SHA-256 hash (:mod:`alallo._keys`) with their first
characters (``sk-alallo-AbC12x_9``), which name the key in ``keys list`` and
in ``keys revoke``; the whole key is shown once, by ``keys create``.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from alallo._keys import KEY_ID_LENGTH, KEY_PREFIX, hash_key, key_id, new_key
from alallo.cli._common import JsonOption, console, fail, money, print_json, timestamp
from alallo.cli._table import Column, fitted_table

if TYPE_CHECKING:
    from alallo.store import Store

__all__ = ["accounts_app", "keys_app"]

accounts_app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                           help="Create and list accounts (on the server's store).")
keys_app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                       help="Create, list and revoke API keys (on the server's store).")

DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", envvar="ALALLO_DATA_DIR",
                 help="The server's data directory, its SQLite store [default: ./.alallo].",
                 show_default=False),
]
DatabaseUrlOption = Annotated[
    str | None,
    typer.Option("--database-url", envvar="ALALLO_DATABASE_URL",
                 help="SQLAlchemy URL of the server's store, when it is not the SQLite "
                      "file in the data directory (e.g. postgresql://user@host/alallo).",
                 show_default=False),
]
AllowCommandsOption = Annotated[
    bool,
    typer.Option("--allow-commands",
                 help="Let the account run a command of its own as a job's trainer. Without "
                      "it, its jobs use the built-in trainers and those you register "
                      "(settings `trainers`); see docs/security.md."),
]
ACCOUNT_ID_PREFIX = "acct-"


@contextlib.contextmanager
def open_store(data_dir: Path | None, database_url: str | None) -> Iterator[Store]:
    """The server's store, opened (and migrated to this alallo's schema), closed after.

    A data directory without a store is refused rather than started afresh:
    a mistyped ``--data-dir`` must not create an account nobody serves.
    """
    from alallo import Settings
    from alallo.store import Store, StoreUnavailable

    given: dict[str, Any] = {"data_dir": data_dir, "database_url": database_url}
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    url = settings.resolved_database_url
    missing = _missing_sqlite_file(url)
    if missing is not None:
        fail(f"no alallo store in {missing.parent}: start the server there once "
             "(`alallo serve --data-dir ...`), or pass --database-url")
    try:
        store = Store(url)
    except ValueError as exc:
        fail(str(exc))
    try:
        store.open()
        yield store
    except StoreUnavailable as exc:
        fail(exc.message)
    finally:
        store.close()


def _missing_sqlite_file(url: str) -> Path | None:
    # A SQLite URL whose file does not exist: opening it would make an empty store.
    import sqlalchemy as sa
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = sa.make_url(url)
    except ArgumentError:
        return None  # the store says what is wrong with it
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database).resolve()
    return None if path.is_file() else path


def _run(fn: Any, *args: Any) -> Any:
    import trio

    from alallo import AlalloError

    try:
        return trio.run(fn, *args)
    except AlalloError as exc:
        fail(exc.message)


# -- accounts -------------------------------------------------------------------


@accounts_app.command("create")
def create_account(
    name: Annotated[str, typer.Argument(help="Who the account is for, e.g. a team's name.",
                                        show_default=False)],
    balance: Annotated[float, typer.Option(help="Starting balance (USD).")] = 0.0,
    billing_limit: Annotated[float, typer.Option(
        "--billing-limit", min=0.0, help="How far below zero (USD) the balance may go.")] = 0.0,
    allow_commands: AllowCommandsOption = False,
    data_dir: DataDirOption = None,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an account; give it a key with `alallo keys create --account ID`."""
    name = name.strip()
    if not name or len(name) > 200:
        fail("the account name must be 1 to 200 characters")
    if not math.isfinite(balance) or not math.isfinite(billing_limit):
        fail("the balance and the billing limit must be finite numbers")
    account_id = ACCOUNT_ID_PREFIX + secrets.token_hex(8)
    with open_store(data_dir, database_url) as store:
        _run(partial(store.ensure_account, account_id, name, balance, int(time.time()),
                     billing_limit=billing_limit, allow_commands=allow_commands))
        account = _run(store.get_account, account_id)
    if as_json:
        print_json(account)
        return
    unfunded = ("\nIt has no money yet: its jobs are refused until it has some "
                f"(alallo accounts set {account_id} --add-balance 10)"
                if balance + billing_limit <= 0 else "")
    console().print(
        f"Created account [bold]{account_id}[/bold] ({name}): starting balance "
        f"{money(balance)}, billing limit {money(billing_limit)}"
        f"{', may run its own trainer commands' if allow_commands else ''}.{unfunded}\n"
        f"Give it a key: alallo keys create --account {account_id}", soft_wrap=True)


@accounts_app.command("list")
def list_accounts(data_dir: DataDirOption = None, database_url: DatabaseUrlOption = None,
                  as_json: JsonOption = False) -> None:
    """List every account with its balance and billing limit."""
    with open_store(data_dir, database_url) as store:
        rows: list[dict[str, Any]] = _run(store.list_accounts)
    if as_json:
        print_json({"object": "list", "data": rows, "has_more": False})
        return
    out = console()  # ids and amounts whole on any width; the name wraps, the rest goes first
    columns = [Column("ID", keep=True), Column("Name"), Column("Balance", keep=True),
               Column("Billing limit", keep=True, drop=1), Column("Commands", drop=3),
               Column("Created at", keep=True, drop=2)]
    out.print(fitted_table(out, columns, [
        [row["id"], row["name"], money(row["balance"]), money(row["billing_limit"]),
         "allowed" if row["allow_commands"] else "-", timestamp(row["created_at"])]
        for row in rows]))


@accounts_app.command("set")
def set_account(
    account: Annotated[str, typer.Argument(help="The account's id, acct-…", show_default=False)],
    allow_commands: Annotated[bool | None, typer.Option(
        "--allow-commands/--no-allow-commands", show_default=False,
        help="Whether the account may run a command of its own as a job's trainer "
             "(otherwise only the trainers you register, docs/security.md).")] = None,
    add_balance: Annotated[float, typer.Option(
        "--add-balance", help="Add this much (USD) to its balance (negative: take).")] = 0.0,
    billing_limit: Annotated[float | None, typer.Option(
        "--billing-limit", min=0.0, help="How far below zero (USD) the balance may go.")] = None,
    wandb_key: Annotated[str | None, typer.Option(
        "--wandb-key", show_default=False,
        help="Store the W&B API key (40 characters; `-` reads it from standard input) that "
             "its jobs' W&B integrations log in with when they give none, as OpenAI's "
             "do. Never shown again.")] = None,
    forget_wandb_key: Annotated[bool, typer.Option(
        "--forget-wandb-key", help="Forget its stored W&B API key.")] = False,
    data_dir: DataDirOption = None,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change an account: its money, what it may do (its jobs that have not started yet
    obey the change), or the W&B API key its jobs use."""
    if (allow_commands is None and not add_balance and billing_limit is None
            and wandb_key is None and not forget_wandb_key):
        fail("say what to change: --add-balance, --billing-limit, --allow-commands, "
             "--wandb-key or --forget-wandb-key")
    if not math.isfinite(add_balance):
        fail("the amount must be a finite number")
    key = _wandb_key(wandb_key, forget_wandb_key)
    with open_store(data_dir, database_url) as store:
        if allow_commands is not None:
            _run(store.set_allow_commands, account, allow_commands)
        if key is not None:
            from alallo.runtime._wandb_keys import WANDB_KEY_SECRET

            _run(store.set_account_secret, account, WANDB_KEY_SECRET, key or None,
                 int(time.time()))
        if add_balance or billing_limit is not None:
            _run(partial(store.fund_account, account, add=add_balance,
                         billing_limit=billing_limit))
        row = _run(store.get_account, account)
    if key is not None:  # whether one is stored, never the key
        row = {**row, "wandb_key_stored": bool(key)}
    if as_json:
        print_json(row)
        return
    said = [f"balance {money(row['balance'])}, billing limit {money(row['billing_limit'])}"]
    if allow_commands is not None:
        said.append(f"{'may' if allow_commands else 'may not'} run its own trainer commands")
    if key is not None:
        said.append("its W&B API key is stored (it is not shown)" if key
                    else "no W&B API key stored")
    console().print(f"Account {account}: {'; '.join(said)}.", soft_wrap=True)


def _wandb_key(given: str | None, forget: bool) -> str | None:
    """The W&B key to store: "" to forget it, None to leave it; checked as W&B checks it."""
    if given is not None and forget:
        fail("give --wandb-key or --forget-wandb-key, not both")
    if forget:
        return ""
    if given is None:
        return None
    from alallo.jobs._spec import WANDB_KEY_LENGTH

    key = (sys.stdin.readline() if given == "-" else given).strip()
    if len(key) != WANDB_KEY_LENGTH:
        fail(f"a W&B API key has {WANDB_KEY_LENGTH} characters; this one has {len(key)}")
    return key


# -- keys -----------------------------------------------------------------------


@keys_app.command("create")
def create_key(
    account: Annotated[str, typer.Option("--account", help="The account's id, acct-…",
                                         show_default=False)],
    data_dir: DataDirOption = None,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a new API key for an account; it is shown once, here, and stored hashed."""
    key = new_key()
    now = int(time.time())
    with open_store(data_dir, database_url) as store:
        _run(store.create_api_key, hash_key(key), account, key_id(key), now)
    if as_json:
        print_json({"key": key, "prefix": key_id(key), "account_id": account,
                    "created_at": now})
        return
    out = console()
    out.print(f"API key for {account}: [bold]{key}[/bold]", soft_wrap=True)
    out.print("Keep it now: alallo stores only its hash and cannot show it again. "
              f"Revoke it with `alallo keys revoke {key_id(key)}`.", soft_wrap=True)


@keys_app.command("list")
def list_keys(
    account: Annotated[str | None, typer.Option("--account", help="Only this account's keys.",
                                                show_default=False)] = None,
    data_dir: DataDirOption = None,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List keys by their first characters (never the keys themselves)."""
    with open_store(data_dir, database_url) as store:
        rows: list[dict[str, Any]] = _run(partial(store.find_api_keys, account_id=account))
    shown = [_public_key(row) for row in rows]
    if as_json:
        print_json({"object": "list", "data": shown, "has_more": False})
        return
    table = Table("Key", "Account", "Created at", "Revoked at")
    for row in shown:
        table.add_row(f"{row['prefix']}…" if row["prefix"] else "(before prefixes)",
                      row["account_id"], timestamp(row["created_at"]),
                      timestamp(row["revoked_at"]) if row["revoked_at"] else "-")
    console().print(table)


@keys_app.command("revoke")
def revoke_key(
    key_or_prefix: Annotated[str, typer.Argument(
        metavar="KEY_OR_PREFIX", show_default=False,
        help=f"The whole key, or its start as `alallo keys list` shows it "
             f"(up to {KEY_ID_LENGTH} characters).")],
    data_dir: DataDirOption = None,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a key for good: from the next request on, it answers 401."""
    given = key_or_prefix.strip()
    with open_store(data_dir, database_url) as store:
        rows: list[dict[str, Any]] = _run(partial(store.find_api_keys, key_hash=hash_key(given)))
        if not rows and len(given) <= KEY_ID_LENGTH:
            if len(given) <= len(KEY_PREFIX):
                fail(f"give the whole key or its start past {KEY_PREFIX!r}, "
                     "as `alallo keys list` shows it")
            rows = _run(partial(store.find_api_keys, prefix=given))
        if not rows:
            fail(f"no API key {_shown(given)}")
        if len(rows) > 1:
            names = ", ".join(f"{row['prefix']}… ({row['account_id']})" for row in rows)
            fail(f"{len(rows)} keys start with {given!r}: {names}; give more of the key")
        row = rows[0]
        revoked = _run(store.revoke_api_key, row["key_hash"], int(time.time()))
    name = f"{row['prefix']}…" if row["prefix"] else _shown(given)
    if as_json:
        print_json({**_public_key(row), "revoked": True, "already": not revoked})
        return
    console().print(f"Revoked key {name} of {row['account_id']}." if revoked else
                    f"Key {name} of {row['account_id']} was revoked already.", soft_wrap=True)


def _public_key(row: dict[str, Any]) -> dict[str, Any]:
    return {"prefix": row["prefix"], "account_id": row["account_id"],
            "created_at": row["created_at"], "revoked_at": row["revoked_at"]}


def _shown(given: str) -> str:
    # A whole key is never echoed back in full (terminals keep scrollback).
    return f"{given[:KEY_ID_LENGTH]}…" if len(given) > KEY_ID_LENGTH else repr(given)
