"""The store's checkpoint permissions (a part of :class:`alallo._store.Store`).

A permission shares one checkpoint of a job (the job and the step) with one other
account (OpenAI's ``project_id``). What it allows and who may see it:
:mod:`alallo.runtime._checkpoint_models`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from ._accounts import insert_new
from ._schema import checkpoint_permissions as grants

__all__ = ["PermissionRows"]

T = TypeVar("T")


class PermissionRows:
    """Checkpoint permissions; :class:`~alallo._store.Store` has these methods.

    Every method runs in a worker thread and raises ``StoreUnavailable`` when the
    database fails. A row is a dict of the table's columns (``id``, ``job_id``, ``step``,
    ``owner_id``, ``project_id``, ``created_at``: Unix seconds).
    """

    if TYPE_CHECKING:
        async def _read(self, fn: Callable[[sa.Connection], T]) -> T: ...
        async def _write(self, fn: Callable[[sa.Connection], T]) -> T: ...

    async def grant_checkpoint(self, owner_id: str, job_id: str, step: int,
                               projects: Sequence[tuple[str, str]], now: int,
                               ) -> list[dict[str, Any]]:
        """Share the checkpoint with each account of ``projects`` (``(new permission id,
        account id)`` pairs): an account it is shared with already keeps its permission.

        Returns:
            The permission of each account, in the order given.
        """
        def run(c: sa.Connection) -> list[dict[str, Any]]:
            for permission_id, project_id in projects:
                c.execute(insert_new(c, grants).values(
                    id=permission_id, job_id=job_id, step=step, owner_id=owner_id,
                    project_id=project_id, created_at=now))
            wanted = [project for _, project in projects]
            rows = {row["project_id"]: dict(row) for row in c.execute(
                sa.select(grants).where(grants.c.job_id == job_id, grants.c.step == step,
                                        grants.c.project_id.in_(wanted))).mappings()}
            return [rows[project] for project in wanted]
        return await self._write(run)

    async def checkpoint_grants(self, job_id: str, step: int,
                                project_id: str | None = None) -> list[dict[str, Any]]:
        """The checkpoint's permissions, oldest first (of ``project_id`` only, if given)."""
        def run(c: sa.Connection) -> list[dict[str, Any]]:
            query = sa.select(grants).where(grants.c.job_id == job_id, grants.c.step == step)
            if project_id is not None:
                query = query.where(grants.c.project_id == project_id)
            return [dict(row) for row in c.execute(
                query.order_by(grants.c.created_at, grants.c.id)).mappings()]
        return await self._read(run)

    async def shared_checkpoint_owner(self, job_id: str, step: int,
                                      project_id: str) -> str | None:
        """The account that shared the checkpoint with ``project_id``; None if it did not."""
        def run(c: sa.Connection) -> str | None:
            owner = c.execute(sa.select(grants.c.owner_id).where(
                grants.c.job_id == job_id, grants.c.step == step,
                grants.c.project_id == project_id)).scalar()
            return None if owner is None else str(owner)
        return await self._read(run)

    async def revoke_checkpoint(self, job_id: str, step: int, permission_id: str) -> bool:
        """Delete one permission of the checkpoint; False if it has none of that id."""
        def run(c: sa.Connection) -> bool:
            return bool(c.execute(grants.delete().where(
                grants.c.id == permission_id, grants.c.job_id == job_id,
                grants.c.step == step)).rowcount)
        return await self._write(run)

    async def revoke_job_checkpoints(self, job_id: str, step: int | None = None) -> int:
        """Delete the permissions of the job's checkpoints (of ``step`` only, if given):
        the checkpoint, or the job's model, was deleted. Returns how many were."""
        def run(c: sa.Connection) -> int:
            query = grants.delete().where(grants.c.job_id == job_id)
            if step is not None:
                query = query.where(grants.c.step == step)
            return int(c.execute(query).rowcount)
        return await self._write(run)
