"""The shapes of checkpoint permissions (OpenAI's ``checkpoint.permission``, issue 32)."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

__all__ = ["CheckpointPermission", "CheckpointPermissionDeleted", "CheckpointPermissionList"]


class CheckpointPermission(TypedDict):
    """A checkpoint model shared with one account (``share_checkpoint``)."""

    id: str
    """``cp_…``: what ``delete_checkpoint_permission`` takes."""
    object: Literal["checkpoint.permission"]
    created_at: int
    """Unix seconds."""
    project_id: str
    """The account it is shared with (OpenAI's project: an alallo account id, ``acct-…``)."""


class CheckpointPermissionList(TypedDict):
    """A page of a checkpoint model's permissions (``list_checkpoint_permissions``), or the
    permissions a share made."""

    object: Literal["list"]
    data: list[CheckpointPermission]
    has_more: bool
    first_id: str | None
    last_id: str | None


class CheckpointPermissionDeleted(TypedDict):
    """The answer to ``DELETE …/permissions/{id}`` (OpenAI's)."""

    id: str
    object: Literal["checkpoint.permission"]
    deleted: bool
