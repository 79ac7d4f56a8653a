"""``alallo serve`` and ``alallo demo``: the server, in one Trio process.

This is the one module of ``alallo`` that imports ``gateway`` (the layering
rule of the design: only the command line's server entry point may). The
server's code (the runtime, the store, SQLAlchemy, Trio, the gateway) is
imported inside the commands, not here: every ``alallo`` command imports
this module to register ``serve`` and ``demo``, and a client command such
as ``alallo jobs list`` must not pay about 1.5 s of imports it never uses.
"""

from __future__ import annotations

import errno
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

if TYPE_CHECKING:
    import trio

    from alallo import Runtime, Settings
    from alallo.client import HyperparameterFields

__all__ = ["demo", "serve"]

SAMPLE_DATA = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"
DEMO_MODEL = "alallo/tiny-gpt2"
DEMO_HYPERPARAMETERS: HyperparameterFields = {"n_epochs": 10, "learning_rate": 3e-3}
"""The demo job trains all the tiny model's weights (``adapter: "full"``): 120 steps, at 30
times full fine-tuning's default learning rate, so that its model answers in the sample's
letters and words, 1 s longer than the defaults took (docs/performance.md). With the defaults,
a LoRA adapter for 36 steps, its answers were noise (issue 35): an adapter trains neither the
embeddings nor the final LayerNorm, and without them the tiny model's logits stay within a
few units of each other (:mod:`alallo.trainers.tiny`)."""

# The defaults are written in the help, not given to typer: an option left
# out must stay None so that ALALLO_HOST, ALALLO_PORT and ALALLO_DATA_DIR apply.
HostOption = Annotated[str | None, typer.Option(
    "--host", help="Address to listen on [default: 127.0.0.1].", show_default=False)]
PortOption = Annotated[int | None, typer.Option(
    "--port", help="Port to listen on, 0: any free [default: 8000].", show_default=False)]
DataDirOption = Annotated[Path | None, typer.Option(
    "--data-dir", help="Where alallo keeps its data [default: ./.alallo].", show_default=False)]


def _configure_logging(level: int) -> None:
    from alallo.runtime import configure_logging

    # Operator logs go to stderr, so that stdout stays the user's (the demo's live bar):
    # JSON lines with request and job ids, or a console renderer on a terminal.
    configure_logging(level)


def _settings(host: str | None, port: int | None, data_dir: Path | None,
              ray_address: str | None = None, shared_dir: Path | None = None) -> Settings:
    """The settings, or one line saying which one is wrong (exit 1, no traceback)."""
    from pydantic import ValidationError

    from alallo import Settings

    # Options given on the command line win over ALALLO_* variables.
    given: dict[str, Any] = {"host": host, "port": port, "data_dir": data_dir,
                             "ray_address": ray_address, "shared_dir": shared_dir}
    try:
        return Settings(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        name = f"ALALLO_{where.split('.')[0].upper()}" if where else "a setting"
        detail = f" ({where})" if "." in where else ""
        Console(stderr=True, highlight=False).print(
            f"[red]Error: {name}{detail}: {first['msg']}[/red]", soft_wrap=True)
        raise typer.Exit(1) from None


async def _until_signal(stop: trio.Event) -> None:
    import trio

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            stop.set()
            return


async def _run_server(settings: Settings, console: Console, *,
                      then: Any = None) -> None:
    import trio

    from alallo import Runtime
    from gateway import SignIn
    from gateway import serve as serve_http

    stop = trio.Event()
    served = trio.Event()
    sign_in = SignIn()

    async def serve_until_stopped(task_status: trio.TaskStatus[list[str]]) -> None:
        await serve_http(runtime, host=settings.host, port=settings.port,
                         shutdown_trigger=stop.wait, sign_in=sign_in, task_status=task_status)
        served.set()

    async with Runtime(settings) as runtime, trio.open_nursery() as nursery:
        nursery.start_soon(_until_signal, stop)
        binds = await nursery.start(serve_until_stopped)
        url = binds[0].replace("0.0.0.0", "127.0.0.1")
        await runtime.cluster.set_address(binds[0])
        key_file = (settings.data_dir / "api-key").resolve()
        # soft_wrap: a path or a key is never broken onto a new line by rich (a terminal
        # folds a long line, and copying it gives it back whole).
        console.print(f"alallo is serving at [bold]{url}[/bold]  "
                      f"(data in {settings.data_dir.resolve()})", soft_wrap=True)
        if runtime.api_key_created:
            console.print(f"Your API key: [bold]{runtime.api_key}[/bold]  (saved in {key_file})",
                          soft_wrap=True)
        else:
            console.print(f"Your API key is in {key_file}", soft_wrap=True)
        console.print(f"Dashboard (a one-time sign-in link): "
                      f"{url}{sign_in.new_link(runtime.api_key)}", soft_wrap=True)
        completions = runtime.completions
        if completions.engines is not None:
            console.print(f"Models served by vLLM ({completions.engines.environment.package}) "
                          "where it can serve them, else by transformers", soft_wrap=True)
        else:
            console.print(f"Models served by transformers: {completions.why_not_vllm}",
                          soft_wrap=True)
        if then is not None:
            await then(url, runtime, stop, sign_in)
        # The server stops by itself once `stop` is set: its streams say goodbye, and
        # what is still open after its deadline is cut. Cancelling it at once would
        # cut every stream mid-chunk, without its `event: shutdown`.
        await served.wait()
        nursery.cancel_scope.cancel()  # the signal watcher, when `demo --exit` stopped it


def _run(settings: Settings, console: Console, then: Any = None) -> None:
    """Run the server; a port that cannot be bound ends with one line, not a traceback."""
    import trio

    from alallo import SettingError

    try:
        trio.run(lambda: _run_server(settings, console, then=then))
    except (OSError, SettingError, BaseExceptionGroup) as exc:
        refused = _find(exc, SettingError)
        if refused is not None:
            Console(stderr=True, highlight=False).print(f"[red]Error: {refused.message}[/red]",
                                                        soft_wrap=True)
            raise typer.Exit(1) from None
        error = _find_os_error(exc)
        if error is None:
            raise
        console.print(f"[red]Error: cannot listen on {settings.host}:{settings.port}: "
                      f"{error.strerror or error}[/red]")
        raise typer.Exit(1) from None


_BIND_ERRORS = frozenset({errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES})
E = TypeVar("E", bound=BaseException)


def _find(exc: BaseException, kind: type[E]) -> E | None:
    """``exc`` if it is a ``kind``, else the first ``kind`` inside it (exception groups)."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    return None


def _find_os_error(exc: BaseException) -> OSError | None:
    if isinstance(exc, OSError) and exc.errno in _BIND_ERRORS:
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find_os_error(inner)
            if found is not None:
                return found
    return None


RayAddressOption = Annotated[str | None, typer.Option(
    "--ray-address", help="Train on this Ray cluster: its dashboard's http address, as for "
    "'ray job submit --address' (ALALLO_RAY_ADDRESS; needs --shared-dir; docs/clusters.md).",
    show_default=False)]
SharedDirOption = Annotated[Path | None, typer.Option(
    "--shared-dir", help="A directory every Ray node mounts at the same path: jobs, files "
    "and models go there (ALALLO_SHARED_DIR).", show_default=False)]


def serve(host: HostOption = None, port: PortOption = None,
          data_dir: DataDirOption = None, ray_address: RayAddressOption = None,
          shared_dir: SharedDirOption = None) -> None:
    """Run the alallo server: the runtime and the HTTP gateway, until Ctrl-C."""
    console = Console(highlight=False)
    _configure_logging(logging.INFO)
    _run(_settings(host, port, data_dir, ray_address=ray_address, shared_dir=shared_dir),
         console)


def demo(
    host: HostOption = None, port: PortOption = None, data_dir: DataDirOption = None,
    exit_after: Annotated[bool, typer.Option("--exit", help="Stop once the job has ended.")] = False,
) -> None:
    """Start the server, fine-tune the tiny model on the sample data, and show it live."""
    import trio

    from alallo._status import JobStatus
    from alallo.cli._watch import watch_job
    from alallo.client import AlalloClientError, Client

    console = Console(highlight=False, soft_wrap=True)
    _configure_logging(logging.WARNING)
    settings = _settings(host, port, data_dir)
    outcome: dict[str, Any] = {}

    async def run_job(url: str, runtime: Runtime, stop: trio.Event, sign_in: Any) -> None:
        def follow() -> None:
            with Client(url, api_key=runtime.api_key) as client:
                file = client.upload_file(SAMPLE_DATA)
                console.print(f"Uploaded {file['filename']}: {file['line_count']} examples "
                              f"({file['format']}) as {file['id']}")
                job = client.create_job(model=DEMO_MODEL, training_file=file["id"],
                                        name="sample job", adapter="full",
                                        hyperparameters=DEMO_HYPERPARAMETERS)
                console.print(f"Created job [bold]{job['id']}[/bold] on {DEMO_MODEL}: "
                              f"{job['status']} ({job['message']}), "
                              f"{job['progress']['max_steps']} steps, "
                              f"estimate {job['estimate']['text']}")
                outcome["job"] = watch_job(client, job["id"], console=console)

        try:
            await trio.to_thread.run_sync(follow, abandon_on_cancel=True)
        except AlalloClientError as exc:
            console.print(f"[red]Error: {exc}[/red]")
            outcome["error"] = str(exc)
        job = outcome.get("job")
        if not exit_after:
            page = f"  then {url}/jobs/{job['id']}" if job else ""
            console.print(f"Dashboard: {url}{sign_in.new_link(runtime.api_key)}{page}"
                          "   (Ctrl-C to stop)")
        if exit_after:
            stop.set()

    _run(settings, console, then=run_job)
    job = outcome.get("job")
    if exit_after and (job is None or job.get("status") != JobStatus.SUCCEEDED):
        raise typer.Exit(1)

