"""One way to write money, for the CLI and the events' messages."""

from __future__ import annotations

import pytest

from alallo.jobs._billing import billing_limit_detail
from alallo._money import format_money


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (0, "$0.00"),
        (0.25, "$0.25"),
        (12345.678, "$12,345.68"),
        (0.0012, "$0.0012"),
        (0.000018, "$0.000018"),  # a small amount never reads as $0.0000
        (0.0001234, "$0.00012"),
        (0.00999, "$0.01"),
        (-0.0012, "-$0.0012"),  # the sign before the currency, not "$-0.0012"
        (-1e-12, "$0.00"),  # below the ledger's nano-dollar: no "-$0.00"
        (-0.0, "$0.00"),
    ],
)
def test_amounts_read_the_same_everywhere(amount: float, text: str) -> None:
    assert format_money(amount) == text


def test_another_currency_follows_the_number() -> None:
    assert format_money(-0.5, "EUR") == "-0.50 EUR"


def test_the_billing_limit_message_is_a_sentence_with_a_readable_amount() -> None:
    assert billing_limit_detail(-0.0012) == (
        "your balance is $0.0012 past your billing limit, so the job was cancelled; "
        "the steps completed so far are charged")
    assert billing_limit_detail(0.0).startswith("your balance has reached your billing limit")
