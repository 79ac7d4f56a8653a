"""``alallo capacity``: the nodes, their devices, what runs where, and the queue."""

from __future__ import annotations

from rich.table import Column, Table

from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    open_client,
    print_json,
)

__all__ = ["capacity"]


def capacity(url: UrlOption = None, api_key: ApiKeyOption = None,
             as_json: JsonOption = False) -> None:
    """Show the capacity pool: nodes, devices free and busy, and the queue."""
    with open_client(url, api_key) as client:
        pool = client.capacity()
    if as_json:
        print_json(pool)
        return
    table = Table(Column("Node", overflow="fold"),  # a Ray node id whole, if wrapped
                  "Device", "Free", "Busy (job: device indices)", "$/h per device")
    for node in pool["nodes"]:
        held = node.get("device_indices", {})
        busy = ", ".join(f"{job}: {','.join(map(str, held.get(job, []))) or n}"
                         for job, n in node["busy"].items()) or "—"
        kind = " (simulated)" if node["simulated"] else " (Ray)" if node.get("ray") else ""
        name = node["name"] + kind
        table.add_row(name, node["device_type"], f"{node['free']}/{node['devices']}", busy,
                      f"{node['price_per_hour']:.2f}")
    out = console()
    out.print(table)
    queue = pool["queue"]
    out.print(f"Queue: {len(queue)} waiting" + (f" (next: {', '.join(queue[:5])})" if queue else ""))
