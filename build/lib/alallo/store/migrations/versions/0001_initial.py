"""The schema as it was before migrations: accounts, keys, files, jobs, items, ledger, feed.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("balance", sa.Float(), nullable=False),
        sa.Column("billing_limit", sa.Float(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.Integer(), nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("key_hash", sa.String(64), primary_key=True),
        sa.Column("account_id", sa.String(64), sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("created_at", sa.Integer(), nullable=False),
    )
    op.create_table(
        "files",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("filename", sa.String(500), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(32), nullable=False),
        sa.Column("created_at", sa.Integer(), nullable=False),
        sa.Column("line_count", sa.Integer(), nullable=False),
        sa.Column("format", sa.String(32), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("path", sa.String(1000), nullable=False),
    )
    op.create_index("ix_files_account_id", "files", ["account_id"])
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("training_file", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
    )
    op.create_index("ix_jobs_account_id", "jobs", ["account_id"])
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_index("ix_jobs_training_file", "jobs", ["training_file"])
    op.create_table(
        "job_items",
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_table(
        "ledger",
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("first_step", sa.Integer(), primary_key=True),
        sa.Column("last_step", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("amount", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Integer(), nullable=False),
    )
    op.create_index("ix_ledger_account_id", "ledger", ["account_id"])
    op.create_table(
        "job_feed",
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("state_seq", sa.Integer(), nullable=False),
    )
    op.create_index("job_feed_account_position", "job_feed", ["account_id", "position"],
                    unique=True)


def downgrade() -> None:
    for table in ("job_feed", "ledger", "job_items", "jobs", "files", "api_keys", "accounts"):
        op.drop_table(table)
