"""``alallo files``: upload, list, show, download and delete files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    fail,
    open_client,
    print_json,
    timestamp,
)
from alallo.cli._table import Column, fitted_table

__all__ = ["files_app"]

files_app = typer.Typer(rich_markup_mode=None, no_args_is_help=True, help="Upload and manage training files (JSONL).")

FileIdArgument = Annotated[str, typer.Argument(help="A file id, file-…", show_default=False)]


@files_app.command("upload")
def upload(
    path: Annotated[
        Path,
        typer.Argument(exists=True, dir_okay=False, readable=True, help="A JSONL file."),
    ],
    purpose: Annotated[str, typer.Option(help="What the file is for.")] = "fine-tune",
    expires_after: Annotated[int | None, typer.Option(
        "--expires-after", metavar="SECONDS", show_default=False,
        help="Delete it this long after the upload (3600 to 2592000, OpenAI's "
             "expires_after); a job already training on it keeps it until it ends.")] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Upload a JSONL file; every line is checked, a bad one is named by its number."""
    with open_client(url, api_key) as client:
        uploaded = client.upload_file(path, purpose=purpose, expires_after_s=expires_after)
    if as_json:
        print_json(uploaded)
        return
    out = console()
    out.print(f"[bold]{uploaded['id']}[/bold]", highlight=False)
    out.print(_file_summary(uploaded), markup=False)
    if uploaded.get("expires_at"):
        out.print(f"expires at {timestamp(uploaded['expires_at'])}", markup=False)


@files_app.command("list")
def list_files(
    purpose: Annotated[str | None, typer.Option(
        help="Only files of this purpose (fine-tune, fine-tune-results).",
        show_default=False)] = None,
    oldest_first: Annotated[bool, typer.Option(
        "--oldest-first", help="Oldest first (default: newest first).")] = False,
    url: UrlOption = None, api_key: ApiKeyOption = None, as_json: JsonOption = False
) -> None:
    """List your files, with their line counts and formats."""
    with open_client(url, api_key) as client:
        page = client.list_files(purpose=purpose, order="asc" if oldest_first else None)
    if as_json:
        print_json(page)
        return
    out = console()
    if not page["data"]:
        out.print("No files yet. Upload one with `alallo files upload PATH`.", markup=False)
        return
    columns = [Column("ID", keep=True), Column("Filename", drop=1, fold=True, room=40),
               Column("Lines", drop=3), Column("Format", drop=4), Column("Bytes", drop=5),
               Column("Status", keep=True), Column("Created at", keep=True, drop=6)]
    rows = [
        [
            item["id"],
            str(item.get("filename", "")),
            str(item.get("line_count", "")),
            str(item.get("format", "")),
            str(item.get("bytes", "")),
            str(item.get("status", "")),
            timestamp(item.get("created_at")),
        ]
        for item in page["data"]
    ]
    out.print(fitted_table(out, columns, rows))


@files_app.command("get")
def get_file(
    file_id: FileIdArgument,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one file."""
    with open_client(url, api_key) as client:
        item = client.get_file(file_id)
    if as_json:
        print_json(item)
        return
    out = console()
    out.print(f"[bold]{item['id']}[/bold]", highlight=False)
    out.print(_file_summary(item), markup=False)
    out.print(f"created at {timestamp(item.get('created_at'))}", markup=False)
    if item.get("expires_at"):
        out.print(f"expires at {timestamp(item['expires_at'])}", markup=False)
    if item.get("status_details"):
        out.print(str(item["status_details"]), markup=False)


@files_app.command("download")
def download_file(
    file_id: FileIdArgument,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Where to write it (default: its file name, here).")] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Download a file: an uploaded one, or a job's metrics CSV (its result_files)."""
    with open_client(url, api_key) as client:
        item = client.get_file(file_id)
        data = client.file_content(file_id)
    target = output or Path(Path(str(item.get("filename") or file_id)).name)
    try:
        target.write_bytes(data)
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")
    console().print(f"Saved {file_id} to {target} ({len(data)} bytes)", markup=False)


@files_app.command("delete")
def delete_file(
    file_id: FileIdArgument,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a file (refused while a live job uses it)."""
    with open_client(url, api_key) as client:
        answer = client.delete_file(file_id)
    if as_json:
        print_json(answer)
        return
    console().print(f"Deleted {file_id}", markup=False)


def _file_summary(item: Mapping[str, Any]) -> str:
    unit = "rows" if item.get("format") == "csv" else "lines"
    return (
        f"{item.get('filename', '?')}: {item.get('line_count', '?')} {unit}, "
        f"format {item.get('format', '?')}, {item.get('bytes', '?')} bytes, "
        f"{item.get('status', '?')}"
    )
