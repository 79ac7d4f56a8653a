"""``alallo trainers``: the trainers a job may name (``jobs create --trainer NAME``)."""

from __future__ import annotations

from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    open_client,
    print_json,
)
from alallo.cli._table import Column, fitted_table

__all__ = ["trainers"]


def trainers(url: UrlOption = None, api_key: ApiKeyOption = None,
             as_json: JsonOption = False) -> None:
    """List the trainers a job may name: the built-in ones and those the operator registered."""
    with open_client(url, api_key) as client:
        listed = client.list_trainers()
    if as_json:
        print_json(listed)
        return
    out = console()
    columns = [Column("Name", keep=True), Column("Kind", drop=1),
               Column("Description")]
    rows = [[t["name"], "built in" if t["built_in"] else "registered", t["description"]]
            for t in listed["data"]]
    out.print(fitted_table(out, columns, rows))
