"""``alallo account``: your account's balance, billing limit and spend (``GET /v1/account``).

The user's command, through the API with the user's key; the operator's ``alallo
accounts`` works on the store instead and shows every account (:mod:`alallo.cli._accounts`).
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from alallo.cli._common import (
    ApiKeyOption,
    JsonOption,
    UrlOption,
    console,
    money,
    open_client,
    print_json,
    timestamp,
)

__all__ = ["account"]

NO_ROOM = ("Nothing is available: new jobs are cancelled before they start, and running ones "
           "at their next charge, until the server's operator adds money to the account.")
"""Said under the figures when nothing is available: the balance has used the billing limit."""


def account(url: UrlOption = None, api_key: ApiKeyOption = None,
            as_json: JsonOption = False) -> None:
    """Show your account: balance, billing limit, what you may still spend and have spent."""
    with open_client(url, api_key) as client:
        got = client.account()
    if as_json:
        print_json(got)
        return
    currency = got.get("currency")
    spend = got["spend"]
    refunds = (f" (charged {money(spend['gross'], currency)}, refunded "
               f"{money(spend['refunded'], currency)})" if spend["refunded"] else "")
    balance = Text(money(got["balance"], currency),
                   style="red" if got["balance"] < 0 else "bold")
    out = console()
    out.print(Text.assemble((got["id"], "bold"), "  ", got["name"]))  # a name is never markup
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("Balance", balance)
    grid.add_row("Billing limit", Text(f"{money(got['billing_limit'], currency)} (how far "
                                       "below zero the balance may go)"))
    grid.add_row("Available", Text(f"{money(got['available'], currency)} (balance plus "
                                   "billing limit: what new charges may take)"))
    grid.add_row("Spent", Text(money(spend["charged"], currency) + refunds))
    grid.add_row("Created at", timestamp(got["created_at"]))
    out.print(grid)
    if got["available"] <= 0:
        out.print(Text(NO_ROOM, style="red"))
