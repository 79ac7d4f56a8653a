"""A transition of the job state machine being built (:mod:`alallo.jobs._lifecycle`):
updates to the job, the events to add with their sequence numbers, the ledger entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._money import format_money
from .._status import EventLevel, EventType
from ._billing import LedgerEntry, charge_through, refund_all
from ._inputs import Transition
from ._job import Event, Job

__all__ = ["Draft"]


@dataclass
class Draft:
    """A transition being built: updates to the job, events, ledger entries."""

    job: Job
    now: float
    updates: dict[str, object] = field(default_factory=dict)
    events: list[tuple[EventType, str, str | None, EventLevel, int | None,
                       dict[str, Any]]] = field(default_factory=list)
    ledger: list[LedgerEntry] = field(default_factory=list)

    def set(self, **updates: object) -> Draft:
        self.updates.update(updates)
        return self

    def event(self, kind: EventType, message: str, digest: str | None = None, *,
              level: EventLevel = EventLevel.INFO, step: int | None = None,
              data: dict[str, Any] | None = None) -> Draft:
        self.events.append((kind, message, digest, level, step, data or {}))
        return self

    @property
    def current(self) -> Job:
        return self.job.model_copy(update=self.updates)

    def charge(self, step: int) -> Draft:
        updates, entry = charge_through(self.current, step)
        if entry is not None:
            self.updates.update(updates)
            self.ledger.append(entry)
        return self

    def refund(self, why: str) -> Draft:
        updates, entry = refund_all(self.current)
        if entry is not None:
            self.updates.update(updates)
            self.ledger.append(entry)
            self.event(EventType.REFUND, f"Refunded {format_money(entry.amount)}: {why}",
                       data={"amount": entry.amount})  # exact; the message rounds it
        return self

    def done(self) -> Transition:
        seq = self.job.seq
        made: list[Event] = []
        for kind, text, digest, level, step, data in self.events:
            seq += 1
            made.append(Event(seq=seq, created_at=int(self.now), type=kind, message=text,
                              level=level, hash=digest, step=step, data=data))
        job = self.job.model_copy(update={**self.updates, "seq": seq + 1, "state_seq": seq + 1})
        return Transition(job, tuple(made), tuple(self.ledger))
