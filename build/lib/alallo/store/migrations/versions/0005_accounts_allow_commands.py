"""Accounts say whether they may run a command of their own as a trainer.

An account never chooses an executable on the server unless the operator
allowed it (``alallo accounts create --allow-commands``); every account is
created without that right, except the embedded default's local account
(``acct-local``, the operator's own), which has always been able to.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("allow_commands", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    accounts = sa.table("accounts", sa.column("id", sa.String),
                        sa.column("allow_commands", sa.Boolean))
    op.execute(accounts.update().where(accounts.c.id == "acct-local")
               .values(allow_commands=True))


def downgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("allow_commands")
