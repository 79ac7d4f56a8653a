"""Jobs get a creation number: their order when several are created in one second.

``created_at`` is in whole seconds and job ids are random, so jobs created in
the same second had no order: the jobs list (newest first) and the recovery
of queued jobs after a restart (oldest first) could put them either way.
The number comes from the database: an identity column on PostgreSQL (jobs
created by several processes at once), the next one after the largest on
SQLite (one writer at a time). Existing jobs are numbered by
``(created_at, id)``, the order they had.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.add_column("jobs", sa.Column("number", sa.BigInteger(), sa.Identity(),
                                        nullable=False))
        op.execute("UPDATE jobs SET number = ordered.n FROM (SELECT id, row_number() "
                   "OVER (ORDER BY created_at, id) AS n FROM jobs) AS ordered "
                   "WHERE jobs.id = ordered.id")
        op.execute("SELECT setval(pg_get_serial_sequence('jobs', 'number'), "
                   "(SELECT coalesce(max(number), 0) + 1 FROM jobs), false)")
    else:
        with op.batch_alter_table("jobs") as batch:
            batch.add_column(sa.Column("number", sa.BigInteger(), nullable=True))
        op.execute("UPDATE jobs SET number = (SELECT count(*) FROM jobs AS earlier "
                   "WHERE earlier.created_at < jobs.created_at OR "
                   "(earlier.created_at = jobs.created_at AND earlier.id <= jobs.id))")
        with op.batch_alter_table("jobs") as batch:
            batch.alter_column("number", existing_type=sa.BigInteger(), nullable=False)
    op.create_index("ix_jobs_number", "jobs", ["number"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_jobs_number", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("number")
