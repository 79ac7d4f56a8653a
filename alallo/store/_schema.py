"""The store's tables (SQLAlchemy Core), in one place for the store's modules and Alembic.

Changing a table here needs a migration in :mod:`alallo.migrations` too.
"""

from __future__ import annotations

import sqlalchemy as sa

from .._status import JobStatus

SEQ_MAX = 2**31 - 1
"""The largest ``seq`` and feed ``position`` the columns hold (PostgreSQL's ``integer``): a
cursor past it (the API takes up to 2**62) is read as "after everything", never sent
to the database, which would refuse it as out of range."""

__all__ = ["LIVE_STATUSES", "NOTIFY_CHANNEL", "SEQ_MAX", "account_secrets", "accounts", "api_keys",
           "checkpoint_permissions", "files",
           "job_feed", "job_items", "jobs", "ledger", "metadata", "nodes", "server_secrets",
           "sessions"]

metadata = sa.MetaData()
accounts = sa.Table(
    "accounts", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("balance", sa.Float, nullable=False),
    sa.Column("billing_limit", sa.Float, nullable=False, server_default="0"),
    sa.Column("created_at", sa.Integer, nullable=False),
    # Whether the account may send a command of its own as a job's trainer
    # (alallo.runtime._launch): the local account, and those the operator allowed.
    sa.Column("allow_commands", sa.Boolean, nullable=False, server_default=sa.false()),
)
api_keys = sa.Table(
    "api_keys", metadata,
    sa.Column("key_hash", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(64), sa.ForeignKey("accounts.id"), nullable=False),
    sa.Column("created_at", sa.Integer, nullable=False),
    # The key's first characters (``alallo._keys.key_id``), to name it in lists and
    # revoke it without the whole key; None for keys registered before they were kept.
    sa.Column("prefix", sa.String(32), nullable=True, index=True),
    sa.Column("revoked_at", sa.Integer, nullable=True),
)
sessions = sa.Table(
    # The dashboard's sessions (gateway/_sessions.py): the browser's signed cookie names
    # a session by its id, kept here as a SHA-256 hash; the session names the key.
    "sessions", metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("key_hash", sa.String(64), sa.ForeignKey("api_keys.key_hash"), nullable=False,
              index=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("expires_at", sa.Integer, nullable=False, index=True),
)
server_secrets = sa.Table(
    # Secrets every process on the store shares, made once (the sessions' signing key).
    "server_secrets", metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(200), nullable=False),
    sa.Column("created_at", sa.Integer, nullable=False),
)
files = sa.Table(
    "files", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(64), nullable=False, index=True),
    sa.Column("filename", sa.String(500), nullable=False),
    sa.Column("bytes", sa.Integer, nullable=False),
    sa.Column("purpose", sa.String(32), nullable=False),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("line_count", sa.Integer, nullable=False),
    sa.Column("format", sa.String(32), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("path", sa.String(1000), nullable=False),
    # When an upload sent with ``expires_after`` expires (Unix s); None: kept until deleted.
    sa.Column("expires_at", sa.Integer, nullable=True, index=True),
)
account_secrets = sa.Table(
    # Values an account's jobs use and no answer shows (today ``wandb_api_key``, set by
    # ``alallo accounts set --wandb-key``): one row per account and name.
    "account_secrets", metadata,
    sa.Column("account_id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(1000), nullable=False),
    sa.Column("updated_at", sa.Integer, nullable=False),
)
jobs = sa.Table(
    "jobs", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(64), nullable=False, index=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("status", sa.String(32), nullable=False, index=True),
    sa.Column("training_file", sa.String(64), nullable=False, index=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    # The order of creation (``created_at`` has whole seconds, ids are random):
    # an identity on PostgreSQL, the next after the largest on SQLite.
    sa.Column("number", sa.BigInteger, sa.Identity(), nullable=False, index=True, unique=True),
    # The job's lease (alallo.cluster._cluster): the node that runs its actor, and the
    # fencing token that node writes with; a cancel, a pause or a resume ("pause",
    # "resume": the latest, until the owner has taken it) asked through another node.
    sa.Column("owner", sa.String(64), nullable=True, index=True),
    sa.Column("epoch", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("pause_request", sa.String(8), nullable=True),
)
nodes = sa.Table(
    # One row per alallo process (alallo.cluster._cluster): times are the database's clock, in s.
    "nodes", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("address", sa.String(255), nullable=True),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
)
job_items = sa.Table(
    "job_items", metadata,
    sa.Column("job_id", sa.String(64), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("data", sa.Text, nullable=False),
)

ledger = sa.Table(
    "ledger", metadata,
    sa.Column("job_id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(8), primary_key=True),
    sa.Column("first_step", sa.Integer, primary_key=True),
    sa.Column("last_step", sa.Integer, nullable=False),
    sa.Column("account_id", sa.String(64), nullable=False, index=True),
    sa.Column("amount", sa.Float, nullable=False),
    sa.Column("created_at", sa.Integer, nullable=False),
)

job_feed = sa.Table(
    # One row per job: where its latest state stands in its account's feed
    # (the account stream, ``GET /v1/fine_tuning/stream``). ``position`` is the
    # account's change counter; a job's row moves to the end at every state change.
    "job_feed", metadata,
    sa.Column("job_id", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(64), nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("state_seq", sa.Integer, nullable=False),
    sa.Index("job_feed_account_position", "account_id", "position", unique=True),
)

checkpoint_permissions = sa.Table(
    # A checkpoint model shared with another account (OpenAI's checkpoint permissions,
    # ``/v1/fine_tuning/checkpoints/{id}/permissions``): ``project_id`` (an account id) may
    # chat with the checkpoint of ``job_id`` at ``step`` and train from it.
    "checkpoint_permissions", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("job_id", sa.String(64), nullable=False),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("owner_id", sa.String(64), nullable=False, index=True),
    sa.Column("project_id", sa.String(64), nullable=False, index=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Index("checkpoint_permissions_grant", "job_id", "step", "project_id", unique=True),
)

LIVE_STATUSES = tuple(status.value for status in JobStatus if not status.is_final)
"""The ``jobs.status`` values of jobs not yet ended: queued, running, re-scheduling, cancelling,
paused."""

NOTIFY_CHANNEL = "alallo"
"""The PostgreSQL channel of change notices: ``"<kind> <node> <job> <account>"`` payloads."""
