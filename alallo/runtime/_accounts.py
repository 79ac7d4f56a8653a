"""Who is calling, and what an account may do: API keys to accounts (with the
:class:`~alallo.runtime._key_cache.KeyCache`), revocation, the local account of an embedded or
single-user server, the right to send a trainer command of one's own, and the account's
own page (its balance and spend)."""

from __future__ import annotations

import time
from pathlib import Path

from .. import api
from .._errors import Forbidden, NotFound, Unauthorized
from .._keys import hash_key, new_key, read_key_file, write_key_file
from .._trainer_registry import TrainerRegistry
from ..jobs import CommandTrainer, JobSpec, NamedTrainer, SimulatedTrainer
from ..settings import Settings
from ..store import Store
from ._key_cache import KeyCache
from ._launch import COMMANDS_NOT_ALLOWED, failure_switch_refusal, model_refusal
from ._views import account_view

__all__ = ["LOCAL_ACCOUNT", "Accounts"]

LOCAL_ACCOUNT = "acct-local"
"""The account of the server's own key (``data_dir/api-key``): the one ``make run`` uses."""


class Accounts:
    """API keys and accounts, for one runtime.

    Args:
        settings: ``data_dir`` (its ``api-key`` file), ``api_key``, the default balance
            and billing limit of the local account.
        store: the ``accounts`` and ``api_keys`` rows.
    """

    def __init__(self, settings: Settings, store: Store) -> None:
        self._settings = settings
        self._store = store
        self.key_cache = KeyCache()
        """API key -> account for a few seconds (:mod:`alallo.runtime._key_cache`)."""

    async def ensure_local(self) -> tuple[str, bool]:
        """Make the local account and its key if they do not exist (idempotent, also when
        several servers start at once on one database).

        Returns:
            The key (``settings.api_key``, else the ``api-key`` file's, else a new one
            written there) and whether it was made now.
        """
        now = int(time.time())
        settings = self._settings
        await self._store.ensure_account(LOCAL_ACCOUNT, "local", settings.default_balance, now,
                                         billing_limit=settings.default_billing_limit,
                                         allow_commands=True)
        key_file = settings.data_dir / "api-key"
        configured = settings.api_key.get_secret_value() if settings.api_key else None
        key = configured or read_key_file(key_file)
        created = key is None
        if key is None:
            key = new_key()
            write_key_file(key_file, key)
        await self._store.add_api_key(hash_key(key), LOCAL_ACCOUNT, now)
        return key, created

    async def authenticate(self, api_key: str | None) -> str:
        """The account id of an API key.

        A key found in the store is remembered for
        :data:`alallo.runtime._key_cache.KEY_CACHE_TTL_S` seconds: one revoked with
        :meth:`revoke_api_key` stops working at once, one revoked by another
        process within that time.

        Raises:
            Unauthorized: no key, or one that belongs to no account.
        """
        if not api_key:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        key_hash = hash_key(api_key)
        account = self.key_cache.get(key_hash)
        if account is not None:
            return account
        revocations = self.key_cache.revocations
        account = await self._store.account_for_key(key_hash)
        if account is None:
            raise Unauthorized("invalid API key")
        self.key_cache.put(key_hash, account, revocations=revocations)
        return account

    async def summary(self, account_id: str) -> api.Account:
        """The account's own page (``GET /v1/account``): who it is, its balance, billing
        limit, what it may still spend and what it has spent (:class:`alallo.api.Account`),
        read afresh from the store (``alallo accounts set`` may change it from elsewhere).

        Raises:
            NotFound: no such account (``param="account"``).
        """
        row = await self._store.account_summary(account_id)
        if row is None:
            raise NotFound(f"no account {account_id!r}", param="account")
        return account_view(row)

    async def revoke_api_key(self, key_hash: str) -> bool:
        """Revoke a key by its hash (:func:`alallo._keys.hash_key`); it answers 401 at once.

        Returns False if it was revoked already (or is unknown).
        """
        self.key_cache.forget(key_hash)
        try:
            return await self._store.revoke_api_key(key_hash, int(time.time()))
        finally:
            self.key_cache.forget(key_hash)

    async def may_run_commands(self, account_id: str) -> bool:
        """Whether the account may send a command of its own as a trainer: the local
        account, and those the operator allowed (``alallo accounts create --allow-commands``)."""
        return await self._store.allows_commands(account_id)

    async def check_spec(self, account_id: str, spec: JobSpec,
                         trainers: TrainerRegistry) -> None:
        """Refuse what of a job spec the account may not use, before anything is stored,
        looked up or run: a trainer command of its own, a model directory of the server, a
        simulated trainer's failure switch (:data:`alallo.jobs.FAILURE_SWITCHES`).

        Raises:
            Forbidden: the account sent a command (``param="trainer.command"``), a model
                path (``param="model"``) or a failure switch (``param="trainer.<switch>"``)
                and may not.
            InvalidRequest: no trainer of the given name here (``param="trainer.name"``).
        """
        trusted: bool | None = None
        if isinstance(spec.trainer, NamedTrainer):
            trainers.command(spec.trainer.name)
        elif isinstance(spec.trainer, CommandTrainer):
            trusted = await self.may_run_commands(account_id)
            if not trusted:
                raise Forbidden(COMMANDS_NOT_ALLOWED, param="trainer.command")
        elif isinstance(spec.trainer, SimulatedTrainer) and spec.trainer.failure_switch():
            trusted = await self.may_run_commands(account_id)
            switch = failure_switch_refusal(spec.trainer, allow_commands=trusted)
            if switch is not None:
                raise Forbidden(switch[1], param=switch[0])
        if Path(spec.model).is_absolute():
            if trusted is None:
                trusted = await self.may_run_commands(account_id)
            refusal = model_refusal(spec.model, allow_commands=trusted)
            if refusal is not None:
                raise Forbidden(refusal, param="model")
