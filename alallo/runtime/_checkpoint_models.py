"""Checkpoint models: a job's kept checkpoints as models, and sharing them (issue 32).

A checkpoint a job's trainer saved, while the server keeps it (the last three saves of a
job, as OpenAI keeps: :data:`~alallo.runtime._launch.KEPT_CHECKPOINTS`), is a model of its
own, ``ft:BASE:ACCOUNT:SUFFIX:JOB:ckpt-step-N`` (:func:`checkpoint_model_id`), as OpenAI's are:
its account may chat with it (``/v1/chat/completions``, ``/v1/completions``), start a job
from it (``model``), retrieve it and delete it (``/v1/models/{id}``).

Its account may share it with other accounts (OpenAI's checkpoint permissions, whose
``project_id`` is an alallo account id): an account it is shared with may chat with it and
train from it, and nothing else: it does not see it in ``/v1/models``, may not retrieve,
download or delete it, nor see or change its permissions, nor anything of the job it came
from. To every account but its own and those it is shared with, a checkpoint model answers
in the very words of an id nobody has (404, ``param="model"``); revoking a permission takes
all of it away at once.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import trio
from pydantic import BaseModel, ConfigDict, Field

from .._errors import Conflict, InvalidRequest, NotFound, shown
from .._ids import new_id
from ..jobs import Job
from ..store import Store
from ._checkpoint_list import checkpoint_dir
from ._model_ids import checkpoint_model_id, parse_model_id

__all__ = ["MAX_PERMISSIONS_PAGE", "MAX_SHARED_PER_REQUEST", "PERMISSION_ID_PREFIX",
           "CheckpointModel", "CheckpointModels", "ShareRequest"]

PERMISSION_ID_PREFIX = "cp_"
"""The prefix of a permission's id (OpenAI's)."""
MAX_SHARED_PER_REQUEST = 100
"""Accounts one request may share a checkpoint with."""
MAX_PERMISSIONS_PAGE = 100
"""Permissions one page lists at most."""


class ShareRequest(BaseModel):
    """The body of ``POST /v1/fine_tuning/checkpoints/{id}/permissions`` (OpenAI's)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    project_ids: list[str] = Field(min_length=1, max_length=MAX_SHARED_PER_REQUEST)
    """The accounts to share the checkpoint model with (alallo account ids, ``acct-…``)."""


@dataclass(frozen=True)
class CheckpointModel:
    """A checkpoint model as found: the job it came from, the step, its directory."""

    id: str
    """``ft:…:ckpt-step-N``."""
    job: Job
    """The job that saved it (of the account that owns it)."""
    step: int
    path: Path
    """Its directory: a LoRA adapter (``adapter_config.json``) or whole weights."""


class CheckpointModels:
    """Checkpoint models and their permissions (see the module).

    Args:
        store: the permissions.
        get_job: an account's job by id (raises :class:`NotFound`).
    """

    def __init__(self, store: Store, get_job: Callable[[str, str], Awaitable[Job]]) -> None:
        self._store = store
        self._get_job = get_job

    async def find(self, account_id: str, model: str, *, shared: bool = False,
                   ) -> CheckpointModel:
        """The checkpoint model ``model`` of the account (or, with ``shared``, one shared
        with it), while the server keeps it.

        Raises:
            NotFound: no such checkpoint model for this account (``param="model"``), in the
                same words whether it never was, was pruned, deleted, or is another
                account's and not shared with this one.
        """
        missing = NotFound(f"no model {shown(model)}", param="model")
        ref = parse_model_id(model)
        if ref is None or ref.step is None:
            raise missing
        try:
            job = await self._get_job(account_id, ref.job_id)
        except NotFound:
            owner = (await self._store.shared_checkpoint_owner(ref.job_id, ref.step, account_id)
                     if shared else None)
            if owner is None:
                raise missing from None
            try:
                job = await self._get_job(owner, ref.job_id)
            except NotFound:
                raise missing from None
        if checkpoint_model_id(job, ref.step) != model:
            raise missing
        path = await trio.to_thread.run_sync(checkpoint_dir, job, ref.step)
        if path is None:
            raise missing
        return CheckpointModel(id=model, job=job, step=ref.step, path=path)

    async def delete(self, account_id: str, model: str) -> None:
        """Delete the checkpoint's files and its permissions (the job keeps its events).

        Raises:
            NotFound: no such checkpoint model of the account.
            Conflict: the job has not ended: it may resume from this checkpoint.
        """
        found = await self.find(account_id, model)
        if not found.job.status.is_final:
            raise Conflict(f"{model} is a checkpoint of {found.job.id}, which has not ended "
                           "(it may resume from it): delete it once the job has ended",
                           param="model")
        await trio.to_thread.run_sync(shutil.rmtree, found.path)
        await self._store.revoke_job_checkpoints(found.job.id, found.step)

    async def share(self, account_id: str, model: str, body: dict[str, Any],
                    ) -> list[dict[str, Any]]:
        """Share the account's checkpoint model with the accounts of ``body`` (a
        :class:`ShareRequest`: 1 to :data:`MAX_SHARED_PER_REQUEST` account ids); sharing
        again with an account keeps its permission as it was.

        Returns:
            A permission row per account (:class:`~alallo.store._permissions.PermissionRows`).

        Raises:
            pydantic.ValidationError: a malformed body (422 naming the field).
            NotFound: no such checkpoint model of the account.
            InvalidRequest: ``project_ids`` names no account here, or the checkpoint's own
                account (``param="project_ids"``).
        """
        found = await self.find(account_id, model)
        wanted = list(dict.fromkeys(ShareRequest.model_validate(body).project_ids))
        for project in wanted:
            if project == account_id:
                raise InvalidRequest(f"project_ids names {shown(project)}, the checkpoint's "
                                     "own account", param="project_ids")
            if await self._store.get_account(project) is None:
                raise InvalidRequest(f"project_ids names {shown(project)}, which is no "
                                     "account here", param="project_ids")
        return await self._store.grant_checkpoint(
            account_id, found.job.id, found.step,
            [(new_id(PERMISSION_ID_PREFIX), project) for project in wanted], int(time.time()))

    async def permissions(self, account_id: str, model: str, *, project_id: str | None = None,
                          after: str | None = None, limit: int = 10,
                          order: Literal["ascending", "descending"] = "descending",
                          ) -> tuple[list[dict[str, Any]], bool]:
        """A page of the checkpoint's permissions (of ``project_id`` only, if given), by
        creation in ``order``, starting after the permission ``after``; and whether more
        follow.

        Raises:
            NotFound: no such checkpoint model of the account.
            InvalidRequest: ``after`` is no permission of this checkpoint (``param="after"``).
        """
        found = await self.find(account_id, model)
        rows = await self._store.checkpoint_grants(found.job.id, found.step, project_id)
        if order == "descending":
            rows.reverse()
        if after:
            at = next((i for i, row in enumerate(rows) if row["id"] == after), None)
            if at is None:
                raise InvalidRequest(f"after must be a permission id of {model}, got "
                                     f"{shown(after)}", param="after")
            rows = rows[at + 1:]
        return rows[:limit], len(rows) > limit

    async def revoke(self, account_id: str, model: str, permission_id: str) -> None:
        """Delete one permission of the account's checkpoint model: the account it named
        can no longer use the checkpoint.

        Raises:
            NotFound: no such checkpoint model of the account (``param="model"``), or no
                such permission of it (``param="permission_id"``).
        """
        found = await self.find(account_id, model)
        if not await self._store.revoke_checkpoint(found.job.id, found.step, permission_id):
            raise NotFound(f"no permission {shown(permission_id)} of {model}",
                           param="permission_id")
