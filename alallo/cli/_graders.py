"""``alallo graders validate`` and ``alallo graders run``: try a grader (OpenAI's JSON, in a
file) before a job pays for it (issue 34; ``/v1/fine_tuning/alpha/graders``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    fail,
    open_client,
    print_json,
)

__all__ = ["graders_app", "read_json"]

graders_app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                          help="Try OpenAI's graders before a job uses them.")

GraderFile = Annotated[Path, typer.Argument(
    help="A grader as OpenAI's JSON, e.g. {\"type\": \"string_check\", ...}.")]


def read_json(path: Path, what: str) -> Any:
    """The JSON in the file ``path``; a file that cannot be read or holds no JSON ends the
    command with one red line naming it and ``what`` it should hold."""
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    except ValueError as exc:
        fail(f"{path} is no JSON {what}: {exc}")


@graders_app.command("validate")
def validate(grader: GraderFile, url: UrlOption = None, api_key: ApiKeyOption = None,
             as_json: JsonOption = False) -> None:
    """Check a grader: the server says what is wrong, naming the field."""
    body = read_json(grader, "grader")
    with open_client(url, api_key) as client:
        checked = client.validate_grader(body)
    if as_json:
        print_json(checked)
        return
    spec = checked["grader"]
    console().print(Text.assemble(("Valid", "green"), f": {spec.get('type')} grader ",
                                  (str(spec.get("name", "")), "bold")))


@graders_app.command("run")
def run(grader: GraderFile,
        sample: Annotated[str, typer.Option("--sample", help="The model's answer to grade.")],
        item: Annotated[str, typer.Option(
            "--item", help="The row of data the grader reads as item.*: JSON, or @FILE.")] = "{}",
        url: UrlOption = None, api_key: ApiKeyOption = None,
        as_json: JsonOption = False) -> None:
    """Score a sample with a grader: the reward a job's trainer would use, and why a part
    scored 0."""
    body = read_json(grader, "grader")
    if item.startswith("@"):
        row = read_json(Path(item[1:]), "row")
    else:
        try:
            row = json.loads(item)
        except ValueError as exc:
            fail(f"--item is no JSON object: {exc}")
    if not isinstance(row, dict):
        fail("--item must be a JSON object: the row the grader reads as item.*")
    with open_client(url, api_key) as client:
        graded = client.run_grader(body, sample, row)
    if as_json:
        print_json(graded)
        return
    out = console()
    metadata = graded["metadata"]
    out.print(Text.assemble("Reward ", (f"{graded['reward']:.4g}", "bold"),
                            f"  ({metadata['type']} grader {metadata['name']}, "
                            f"{metadata['execution_time'] * 1000:.0f} ms)"))
    if graded["sub_rewards"]:
        table = Table(box=None, show_header=True)
        table.add_column("Grader", no_wrap=True)
        table.add_column("Score", justify="right")
        for name, score in graded["sub_rewards"].items():
            table.add_row(name, f"{score:.4g}")
        out.print(table)
    errors = metadata["errors"]
    for flag, value in errors.items():
        if value is True:
            details = next((str(errors[k]) for k in (flag + "_details", "other_error_details")
                            if errors.get(k)), "")
            out.print(Text(f"{flag}" + (f": {details}" if details else ""), style="red"))
