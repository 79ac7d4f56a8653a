"""API keys keep their prefix (to be named and revoked by it) and when they were revoked.

Keys registered before this revision have no prefix: they can still be
revoked by giving the whole key (``alallo keys revoke``). A database that
``metadata.create_all`` made with these columns already (an alallo between
the columns and the migrations) is adopted as it is.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    columns = {c["name"] for c in inspector.get_columns("api_keys")}
    indexes = {i["name"] for i in inspector.get_indexes("api_keys")}
    with op.batch_alter_table("api_keys") as batch:
        if "prefix" not in columns:
            batch.add_column(sa.Column("prefix", sa.String(32), nullable=True))
        if "revoked_at" not in columns:
            batch.add_column(sa.Column("revoked_at", sa.Integer(), nullable=True))
        if "ix_api_keys_prefix" not in indexes:
            batch.create_index("ix_api_keys_prefix", ["prefix"])


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_index("ix_api_keys_prefix")
        batch.drop_column("revoked_at")
        batch.drop_column("prefix")
