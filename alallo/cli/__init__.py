"""The ``alallo`` command line: ``alallo --help`` lists the commands.

Every user's command talks to a server through :class:`alallo.client.Client`
(``--url``, default ``ALALLO_URL`` or ``http://127.0.0.1:8000``), prints
tables for people and ``--json`` for programs, and reports a failed request
as one red line on stderr with exit status 1. The operator's commands
(``accounts``, ``keys``) work on the server's store instead
(:mod:`alallo.cli._accounts` says why).
"""

from __future__ import annotations

import typer

from alallo.cli._account import account
from alallo.cli._accounts import accounts_app, keys_app
from alallo.cli._capacity import capacity
from alallo.cli._chat import chat
from alallo.cli._dashboard import dashboard
from alallo.cli._db import db_app
from alallo.cli._estimate import estimate
from alallo.cli._files import files_app
from alallo.cli._graders import graders_app
from alallo.cli._job_metrics import metrics as _metrics  # noqa: F401  (adds "jobs metrics")
from alallo.cli._job_pause import pause as _pause  # noqa: F401  (adds "jobs pause", "resume")
from alallo.cli._jobs import jobs_app
from alallo.cli._models import models_app
from alallo.cli._nodes import nodes_app
from alallo.cli._serve import demo, serve
from alallo.cli._trainers import trainers

__all__ = ["app", "main"]

app = typer.Typer(rich_markup_mode=None, 
    no_args_is_help=True,
    help="alallo runs fine-tuning jobs and shows, live, where each one stands.",
)
app.add_typer(accounts_app, name="accounts")
app.add_typer(keys_app, name="keys")
app.add_typer(files_app, name="files")
app.add_typer(jobs_app, name="jobs")
app.add_typer(models_app, name="models")
app.add_typer(graders_app, name="graders")
app.add_typer(nodes_app, name="nodes")
app.add_typer(db_app, name="db")
app.command("trainers")(trainers)
app.command("estimate")(estimate)
app.command("capacity")(capacity)
app.command("account")(account)
app.command("chat")(chat)
app.command("dashboard")(dashboard)
app.command("serve")(serve)
app.command("demo")(demo)


def main() -> None:
    """The ``alallo`` program (``[project.scripts]``)."""
    app()

