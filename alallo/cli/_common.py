"""What every command shares: options, the client, error output, formatting."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, NoReturn

import httpx
import typer
from rich.console import Console
from rich.text import Text

from alallo._money import format_money
from alallo._status import JobStatus
from alallo.client import AlalloClientError, ApiError, Client

__all__ = [
    "STATUS_STYLES",
    "ApiKeyOption",
    "JsonOption",
    "UrlOption",
    "console",
    "error_line",
    "error_text",
    "fail",
    "make_client",
    "money",
    "open_client",
    "percent_text",
    "price_range",
    "price_text",
    "print_json",
    "progress_text",
    "status_text",
    "time_left_text",
    "timestamp",
]

UrlOption = Annotated[
    str | None,
    typer.Option("--url", envvar="ALALLO_URL", help="The alallo server.", show_default=False),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="ALALLO_API_KEY",
        help="Your API key (default: the one `alallo serve` wrote in .alallo/api-key).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the raw JSON instead of a table.")]

_FINAL_STATUSES = frozenset(status.value for status in JobStatus if status.is_final)
STATUS_STYLES: dict[str, str] = {status.value: style for status, style in {
    JobStatus.QUEUED: "yellow",
    JobStatus.RUNNING: "blue",
    JobStatus.RE_SCHEDULING: "magenta",
    JobStatus.CANCELLING: "magenta",
    JobStatus.PAUSED: "cyan",
    JobStatus.CANCELLED: "dim",
    JobStatus.SUCCEEDED: "green",
    JobStatus.FAILED: "red",
}.items()}
"""The rich style of each status, keyed by the status as the API writes it."""


def make_client(url: str | None, api_key: str | None) -> Client:
    """Build the client every command uses; tests replace this function."""
    return Client(url, api_key=api_key)


@contextlib.contextmanager
def open_client(url: str | None, api_key: str | None) -> Iterator[Client]:
    """A client whose failures end the command with one red line on stderr, exit 1
    (:func:`error_line`)."""
    base_url = url
    try:
        with make_client(url, api_key) as client:
            base_url = client.base_url
            yield client
    except AlalloClientError as exc:
        fail(error_line(exc, base_url))


def fail(message: str) -> NoReturn:
    """Print ``message`` in red on stderr and exit with status 1."""
    Console(stderr=True, soft_wrap=True).print(
        Text(f"Error: {message}", style="red"), highlight=False
    )
    raise typer.Exit(1)


def console() -> Console:
    """A console on stdout, created per command so it sees the current terminal. A line it
    prints is never broken by it (``soft_wrap``): a terminal wraps it at its own width, and a
    pipe or a file gets it whole, ids and paths included; tables still fit the width."""
    return Console(highlight=False, soft_wrap=True)


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON, uncoloured, for pipes and scripts."""
    typer.echo(json.dumps(obj, indent=2))


def status_text(job: Mapping[str, Any]) -> Text:
    """The job's status, coloured, followed by its message when it has one."""
    status = str(job.get("status", "?"))
    text = Text(status, style=STATUS_STYLES.get(status, ""))
    if job.get("message"):
        text.append(f" · {job['message']}")
    return text


def show_job(job: Mapping[str, Any], as_json: bool) -> None:
    """What a command that acts on one job prints: the job as JSON, or its id and status."""
    if as_json:
        print_json(job)
        return
    console().print(Text.assemble((job["id"], "bold"), "  ", status_text(job)))


def error_text(job: Mapping[str, Any]) -> str | None:
    """The job's error, when it says more than its message already does.

    A job stopped by the budget has the message and the error message
    "Stopped: the budget was reached": it is shown once, with the status,
    not again as "stopped: Stopped: ...". The error's code is for programs
    (``--json``), its message for people.
    """
    error = job.get("error") or {}
    message = str(error.get("message") or "")
    if not message or message == job.get("message"):
        return None
    return message


def progress_text(job: Mapping[str, Any]) -> str:
    """``step/max_steps (p%)``, or ``-`` before the job knows its steps."""
    progress = job.get("progress") or {}
    step, max_steps = progress.get("step"), progress.get("max_steps")
    percent = progress.get("percent")
    if not max_steps:
        return "-"
    text = f"{step or 0}/{max_steps}"
    if percent is not None:
        text += f" ({percent:.0f}%)"
    return text


def percent_text(job: Mapping[str, Any]) -> str:
    """The progress percentage alone, e.g. ``40%``."""
    percent = (job.get("progress") or {}).get("percent")
    return "-" if percent is None else f"{percent:.0f}%"


def time_left_text(job: Mapping[str, Any]) -> str:
    """The server's time-left text (``"40 min to 1.3 h"``), or ``-``."""
    time_left = job.get("time_left") or {}
    return str(time_left.get("text") or "-")


def money(amount: float | None, currency: str | None = "USD") -> str:
    """``$0.12``, ``$0.0012``, ``-$0.0012`` (:func:`alallo._money.format_money`), or ``-``."""
    if amount is None:
        return "-"
    return format_money(amount, currency)


def price_range(price: Mapping[str, Any]) -> str:
    """``$0.10 to $0.25`` from ``{"low", "high", "currency"}``, the seeds' way of ranges."""
    currency = price.get("currency")
    return f"{money(price.get('low'), currency)} to {money(price.get('high'), currency)}"


def price_text(job: Mapping[str, Any]) -> str:
    """What the job costs: the amount charged once it has ended, else the estimate range."""
    price = job.get("price") or {}
    if job.get("status") in _FINAL_STATUSES:
        refund = (f" (refunded {money(price['refunded'], price.get('currency'))})"
                  if price.get("refunded") else "")
        return money(price.get("charged") or 0, price.get("currency")) + refund
    estimate = price.get("estimate") or {}
    if estimate.get("low") is None:
        return "-"
    return price_range({**estimate, "currency": price.get("currency")})


def timestamp(seconds: float | None) -> str:
    """A Unix time as local ``YYYY-MM-DD HH:MM:SS``."""
    if seconds is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def error_line(exc: AlalloClientError, url: str | None = None) -> str:
    """The one line a failed call prints: the server's message and the field at fault;
    where the server could not be reached, or did not take the key, what to set.

    The usual cause is a server started elsewhere: on another port (``ALALLO_URL``), or
    with another ``--data-dir``, whose ``api-key`` file holds the key it knows
    (``ALALLO_API_KEY``); ``url`` is the server the call went to, named in the hint.
    """
    if isinstance(exc, ApiError):
        text = f"{exc.message} (param: {exc.param})" if exc.param else exc.message
        if exc.status_code == 401:
            return text + _KEY_HINT
        if exc.code.startswith("http_"):  # no alallo error body: another program answered
            return f"{text}; is {url or 'the URL'} an alallo server? {_URL_HINT}"
        return text
    text = str(exc)
    if isinstance(exc.__cause__, (httpx.ConnectError, httpx.TimeoutException)):
        return f"{text}; if it runs elsewhere, {_URL_HINT}"
    if text.startswith("no API key"):  # alallo.client's missing_key
        return text + _DATA_DIR_HINT
    return text


_URL_HINT = "set ALALLO_URL (or --url) to the address `alallo serve` printed"
_KEY_HINT = ("; set ALALLO_API_KEY (or --api-key) to this server's key: `alallo serve` "
             "printed it and keeps it in api-key in its --data-dir (default ./.alallo)")
_DATA_DIR_HINT = ("; a server started with --data-dir DIR keeps it in DIR/api-key: "
                  "set ALALLO_API_KEY to it")
