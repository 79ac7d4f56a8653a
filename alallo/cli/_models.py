"""``alallo models``: the model catalogue."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TransferSpeedColumn,
)

from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    open_client,
    print_json,
)
from alallo.cli._table import Column, fitted_table

__all__ = ["models_app"]

models_app = typer.Typer(rich_markup_mode=None,
                         help="The models you can fine-tune, and your fine-tuned ones.")


@models_app.callback(invoke_without_command=True)
def models(
    ctx: typer.Context,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the models you can fine-tune (same as `alallo models list`)."""
    if ctx.invoked_subcommand is None:
        _show(url, api_key, as_json)


@models_app.command("list")
def list_models(
    url: UrlOption = None, api_key: ApiKeyOption = None, as_json: JsonOption = False
) -> None:
    """List the models you can fine-tune."""
    _show(url, api_key, as_json)


@models_app.command("download")
def download(
    model: Annotated[str, typer.Argument(help="A fine-tuned model's id (ft:…).")],
    merged: Annotated[bool, typer.Option(
        "--merged", help="The adapter merged into its base (a plain transformers model).")] = False,
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="The directory to unpack it into.")] = Path("."),
    url: UrlOption = None, api_key: ApiKeyOption = None,
) -> None:
    """Download a fine-tuned model (the LoRA adapter, or --merged) and unpack it."""
    out = console()
    # A bar on a terminal only: in a pipe it would leave an empty line before the result.
    with open_client(url, api_key) as client, Progress(
            TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
            TransferSpeedColumn(), console=out, transient=True,
            disable=not out.is_terminal) as bar:
        task = bar.add_task("Downloading", total=None)
        archive = client.download_model(
            model, output, merged=merged,
            progress=lambda done, total: bar.update(task, completed=done, total=total))
    with tarfile.open(archive) as tar:
        top = tar.getnames()[0].split("/")[0]
        tar.extractall(output, filter="data")
    archive.unlink()
    # The folder says what it holds: <job>-adapter, <job>-merged, or a full fine-tune's <job>-model.
    kind = {"adapter": "adapter", "merged": "merged model"}.get(top.rsplit("-", 1)[-1], "model")
    out.print(f"Saved the {kind} of {model} in {output / top}")


@models_app.command("delete")
def delete(
    model: Annotated[str, typer.Argument(help="A fine-tuned model's id (ft:…).")],
    url: UrlOption = None, api_key: ApiKeyOption = None,
) -> None:
    """Delete a fine-tuned model's files (the job stays, with its events and log)."""
    with open_client(url, api_key) as client:
        client.delete_model(model)
    console().print(f"Deleted {model}")


def _show(url: str | None, api_key: str | None, as_json: bool) -> None:
    with open_client(url, api_key) as client:
        catalogue = client.list_models()
    if as_json:
        print_json(catalogue)
        return
    out = console()
    columns = [Column("ID", keep=True), Column("Parameters", drop=2), Column("Context", drop=1),
               Column("Adapters", drop=3), Column("Precisions", drop=4),
               Column("Runs here", keep=True)]
    rows = [
        [
            model["id"],
            _count(model.get("parameters")),
            str(model.get("context_length", "")),
            ", ".join(model.get("adapters", [])),
            ", ".join(model.get("precisions", [])),
            "yes" if model.get("runnable_here") else "no",
        ]
        for model in catalogue["data"]
    ]
    out.print(fitted_table(out, columns, rows))


def _count(parameters: Any) -> str:
    if not isinstance(parameters, int | float):
        return "?"
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if parameters >= size:
            return f"{parameters / size:.3g}{unit}"
    return str(parameters)
