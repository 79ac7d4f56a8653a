"""Checkpoint models shared with other accounts (issue 32).

``checkpoint_permissions``: one row per (checkpoint, account it is shared with), as
OpenAI's ``/v1/fine_tuning/checkpoints/{id}/permissions`` answers them; a checkpoint is a
job and a step. The account it is shared with may chat with the checkpoint model and
train from it (alallo.runtime._checkpoint_models).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "checkpoint_permissions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("owner_id", sa.String(64), nullable=False),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Integer, nullable=False),
    )
    op.create_index("ix_checkpoint_permissions_owner_id", "checkpoint_permissions",
                    ["owner_id"])
    op.create_index("ix_checkpoint_permissions_project_id", "checkpoint_permissions",
                    ["project_id"])
    op.create_index("checkpoint_permissions_grant", "checkpoint_permissions",
                    ["job_id", "step", "project_id"], unique=True)


def downgrade() -> None:
    op.drop_index("checkpoint_permissions_grant", "checkpoint_permissions")
    op.drop_index("ix_checkpoint_permissions_project_id", "checkpoint_permissions")
    op.drop_index("ix_checkpoint_permissions_owner_id", "checkpoint_permissions")
    op.drop_table("checkpoint_permissions")
