"""``alallo nodes drain|undrain NAME``: take a node out of the pool, or put it back."""

from __future__ import annotations

from typing import Annotated

import typer

from alallo.cli._common import ApiKeyOption, UrlOption, console, open_client

__all__ = ["nodes_app"]

nodes_app = typer.Typer(rich_markup_mode=None, help="Operate the capacity pool's nodes.")
NodeArgument = Annotated[str, typer.Argument(help="The node's name (see `alallo capacity`).")]


@nodes_app.command("drain")
def drain(node: NodeArgument, url: UrlOption = None, api_key: ApiKeyOption = None) -> None:
    """Move the node's jobs elsewhere (from their checkpoints) and place no more there."""
    with open_client(url, api_key) as client:
        answer = client.drain_node(node)
    moved = answer["moved"]
    console().print(f"Node {node} is draining; {len(moved)} job(s) moved"
                    + (f": {', '.join(moved)}" if moved else ""), markup=False)


@nodes_app.command("undrain")
def undrain(node: NodeArgument, url: UrlOption = None, api_key: ApiKeyOption = None) -> None:
    """Place jobs on the node again."""
    with open_client(url, api_key) as client:
        client.drain_node(node, on=False)
    console().print(f"Node {node} takes jobs again.", markup=False)
