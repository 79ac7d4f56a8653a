"""The dashboard's sessions, and the secret that signs their cookies.

A browser's cookie used to hold the account's API key. It now holds a signed
session id (gateway/_sessions.py): ``sessions`` keeps each session's id as a
SHA-256 hash, the key it stands for and when it ends; ``server_secrets`` keeps the
signing key, made once and shared by every process on the store. Cookies
set before this revision are refused (their holders sign in again).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("key_hash", sa.String(64), sa.ForeignKey("api_keys.key_hash"),
                  nullable=False),
        sa.Column("created_at", sa.Integer, nullable=False),
        sa.Column("expires_at", sa.Integer, nullable=False),
    )
    op.create_index("ix_sessions_key_hash", "sessions", ["key_hash"])
    op.create_index("ix_sessions_expires_at", "sessions", ["expires_at"])
    op.create_table(
        "server_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("server_secrets")
    op.drop_index("ix_sessions_expires_at", "sessions")
    op.drop_index("ix_sessions_key_hash", "sessions")
    op.drop_table("sessions")
