"""Who pays what (the seeds, and ``docs/cancelling.md``), as pure decisions.

A job is charged per completed step of productive work, in step ranges:
each range ``first_step..last_step`` is charged once, at the step price of
its plan, and never past the top of the price quoted when it was created
(``Job.price_estimate``): a job moved to dearer capacity (our misjudgement of
its memory, not the user's doing) costs at most what the user was shown. The ledger's key is ``(job, kind, first_step)``, so writing the
same entry twice charges once, and since a range always starts after the
last step charged, steps redone after a restore from a checkpoint are never
charged again (DESIGN.md, rule 5). Failed jobs cost nothing: whatever was
charged is refunded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._money import format_money

if TYPE_CHECKING:
    from ._job import Job

__all__ = [
    "LedgerEntry",
    "billing_limit_detail",
    "charge_through",
    "refund_all",
    "step_price",
]

_CENT_DIGITS = 9
"""Ledger amounts are rounded to nano-dollars: tiny CPU steps still add up."""


@dataclass(frozen=True)
class LedgerEntry:
    """One line of the ledger: a charge for a step range, or a refund (USD)."""

    kind: Literal["charge", "refund"]
    first_step: int
    last_step: int
    amount: float


def step_price(job: Job) -> float:
    """USD per optimizer step on the job's plan."""
    return job.plan.price_per_hour * job.plan.step_time_s / 3600


def charge_through(job: Job, step: int) -> tuple[dict[str, object], LedgerEntry | None]:
    """Charge the steps after the last one charged, up to ``step``.

    Returns the job fields to update and the ledger entry, or ``({}, None)``
    when those steps were already charged. The amount stops at the top of the quote:
    past it, steps are recorded as charged at $0.
    """
    step = min(step, job.max_steps)
    if step <= job.charged_through:
        return {}, None
    room = max(0.0, job.price_estimate[1] - job.charged) if job.price_estimate[1] else None
    amount = round((step - job.charged_through) * step_price(job), _CENT_DIGITS)
    if room is not None:
        amount = round(min(amount, room), _CENT_DIGITS)
    entry = LedgerEntry("charge", job.charged_through + 1, step, amount)
    return {"charged_through": step, "charged": round(job.charged + amount, _CENT_DIGITS)}, entry


def refund_all(job: Job) -> tuple[dict[str, object], LedgerEntry | None]:
    """Give back everything charged and not yet refunded (a failed job, a free cancel)."""
    due = round(job.charged - job.refunded, _CENT_DIGITS)
    if due <= 0:
        return {}, None
    return {"refunded": job.charged}, LedgerEntry("refund", 1, max(job.charged_through, 1), due)


def billing_limit_detail(headroom: float) -> str:
    """Why a running job was cancelled at the billing limit, after "Billing limit reached: ".

    ``headroom`` is the balance plus the billing limit (USD), zero or less
    here: how far the balance has gone past the limit, negated.
    """
    past = "has reached your billing limit" if headroom >= 0 else (
        f"is {format_money(-headroom)} past your billing limit")
    return f"your balance {past}, so the job was cancelled; the steps completed so far are charged"
