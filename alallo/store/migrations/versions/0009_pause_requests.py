"""A pause or resume asked through a process that does not own the job.

``jobs.pause_request`` records it (``"pause"`` or ``"resume"``, the latest asked; NULL
once the owner has taken it), as ``jobs.cancel_requested`` records a cancel (0004): the
owner, or whoever adopts the job, acts on it (alallo.runtime._relocation).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("pause_request", sa.String(8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("pause_request")
