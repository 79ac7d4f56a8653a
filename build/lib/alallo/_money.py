"""How amounts of money read, everywhere alallo writes one for people.

One rule for the command line, the events' messages and the dashboard's
server-side text: whole cents from one cent up (``$12.34``, ``$0.25``);
under a cent, two significant digits, so that a small amount that is not
zero never reads as zero (``$0.0012``, ``$0.000018``); zero as ``$0.00``; a
negative amount with its sign before the currency (``-$0.0012``).
"""

from __future__ import annotations

import math

__all__ = ["format_money"]

_MAX_DECIMALS = 9
"""The ledger keeps nano-dollars (:mod:`alallo._billing`); nothing finer exists."""


def format_money(amount: float, currency: str | None = "USD") -> str:
    """Write ``amount`` (in ``currency``, USD by default) for people.

    Returns ``"$0.25"``, ``"$0.0012"``, ``"-$0.0012"``, ``"$0.00"``; another
    currency is written after the number: ``"0.25 EUR"``.
    """
    size = abs(amount)
    if size >= 0.01 or size == 0:
        number = f"{size:,.2f}"
    else:
        decimals = min(_MAX_DECIMALS, 1 - math.floor(math.log10(size)))
        number = f"{size:.{decimals}f}"
        if float(number) == 0 or float(number) >= 0.01:
            # Below a nano-dollar (the ledger's own rounding), or rounded up to a cent.
            number = f"{size:.2f}"
    sign = "-" if amount < 0 and float(number) != 0 else ""
    if currency in (None, "USD"):
        return f"{sign}${number}"
    return f"{sign}{number} {currency}"
