"""The clients' calls on a checkpoint model's permissions (OpenAI's
``/v1/fine_tuning/checkpoints/{model}/permissions``), mixed into
:class:`~alallo.client.Client` and :class:`~alallo.client.AsyncClient`."""

from __future__ import annotations

from alallo import api
from alallo.client._calls import Calls
from alallo.client._drivers import AsyncDriver, SyncDriver

__all__ = ["AsyncPermissions", "SyncPermissions"]


class SyncPermissions:
    """``share_checkpoint``, ``list_checkpoint_permissions`` and
    ``delete_checkpoint_permission``, blocking."""

    _calls: Calls
    _driver: SyncDriver

    def share_checkpoint(self, checkpoint: str,
                         accounts: list[str]) -> api.CheckpointPermissionList:
        """Share a checkpoint model (``ft:…:ckpt-step-N``) with other accounts (ids): they
        may chat with it and train from it, nothing else. Returns a permission per account.
        Raises :class:`~alallo.NotFound` (no such checkpoint model of the account) or
        :class:`~alallo.InvalidRequest` (an id that is no account here, or its own)."""
        return self._driver.run(self._calls.share_checkpoint(checkpoint, accounts))

    def list_checkpoint_permissions(self, checkpoint: str, *, account: str | None = None,
                                    after: str | None = None, limit: int | None = None,
                                    order: str | None = None,
                                    ) -> api.CheckpointPermissionList:
        """One page of a checkpoint model's permissions, newest first unless ``order`` is
        ``ascending``; ``account``: only the permission of that account; ``after``: the last
        permission id of the previous page."""
        return self._driver.run(self._calls.list_checkpoint_permissions(
            checkpoint, account, after, limit, order))

    def delete_checkpoint_permission(self, checkpoint: str,
                                     permission_id: str) -> api.CheckpointPermissionDeleted:
        """Revoke a permission (``cp_…``): its account can no longer use the checkpoint.
        Raises :class:`~alallo.NotFound` for no such checkpoint model or permission."""
        return self._driver.run(self._calls.delete_checkpoint_permission(
            checkpoint, permission_id))


class AsyncPermissions:
    """The calls of :class:`SyncPermissions`, to ``await``."""

    _calls: Calls
    _driver: AsyncDriver

    async def share_checkpoint(self, checkpoint: str,
                               accounts: list[str]) -> api.CheckpointPermissionList:
        """Share a checkpoint model with other accounts (:meth:`Client.share_checkpoint`)."""
        return await self._driver.run(self._calls.share_checkpoint(checkpoint, accounts))

    async def list_checkpoint_permissions(
            self, checkpoint: str, *, account: str | None = None, after: str | None = None,
            limit: int | None = None, order: str | None = None,
    ) -> api.CheckpointPermissionList:
        """A page of a checkpoint model's permissions
        (:meth:`Client.list_checkpoint_permissions`)."""
        return await self._driver.run(self._calls.list_checkpoint_permissions(
            checkpoint, account, after, limit, order))

    async def delete_checkpoint_permission(
            self, checkpoint: str, permission_id: str) -> api.CheckpointPermissionDeleted:
        """Revoke a permission (:meth:`Client.delete_checkpoint_permission`)."""
        return await self._driver.run(self._calls.delete_checkpoint_permission(
            checkpoint, permission_id))
