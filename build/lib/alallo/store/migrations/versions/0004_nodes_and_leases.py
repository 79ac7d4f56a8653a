"""Processes register as nodes; each live job has a lease: an owner and an epoch.

``nodes`` holds one row per ``alallo serve`` process (or embedded runtime):
its id, host, pid, gateway address, when it started and when it last
heartbeat (seconds since the epoch, by the database's clock). A job's lease
is ``jobs.owner`` (the node that runs its actor) and ``jobs.epoch``, a
fencing token that grows by one at every acquisition: the owner writes the
job only while the row still carries its epoch. ``jobs.cancel_requested``
records a cancel asked through a process that does not own the job, so that
the owner (or whoever adopts the job) acts on it. Existing jobs get no owner
and epoch 0: the first process to start adopts them.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(255), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("owner", sa.String(64), nullable=True))
        batch.add_column(sa.Column("epoch", sa.BigInteger(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("cancel_requested", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
        batch.create_index("ix_jobs_owner", ["owner"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_owner")
        batch.drop_column("cancel_requested")
        batch.drop_column("epoch")
        batch.drop_column("owner")
    op.drop_table("nodes")
