"""Files that expire, and secrets an account stores for its jobs.

``files.expires_at``: when an upload sent with ``expires_after`` (OpenAI's
``{"anchor": "created_at", "seconds": N}``) expires, in Unix seconds; null for
a file kept until deleted. The runtime's sweep deletes expired files
(alallo.runtime._file_expiry).

``account_secrets``: values an account's jobs use and no answer shows, one row
per (account, name); today the W&B API key its W&B integrations log in with
(``alallo accounts set --wandb-key``), so that a job spec may name a W&B project
without a key, as OpenAI's does.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("files") as batch:
        batch.add_column(sa.Column("expires_at", sa.Integer(), nullable=True))
    op.create_index("ix_files_expires_at", "files", ["expires_at"])
    op.create_table(
        "account_secrets",
        sa.Column("account_id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(1000), nullable=False),
        sa.Column("updated_at", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("account_secrets")
    op.drop_index("ix_files_expires_at", "files")
    with op.batch_alter_table("files") as batch:
        batch.drop_column("expires_at")
