"""The scheduler: one actor that owns the capacity pool and the queue.

Jobs ask for a placement and wait for it; the scheduler answers in
submission order, with *backfill* (EASY backfilling, Lifka 1995): when the
job at the head of the queue cannot start, it gets a reservation at the
earliest time enough devices free up, and a later job may start now if it
fits in what is free and does not delay that reservation (it ends before
it, or leaves enough devices for it). A job that can never fit is never
queued at all (the job fails ``Not available right now.``), so it cannot
block anyone.

Goals: ``lowest_cost`` waits for the cheapest plan; ``fastest_finish``
takes the plan with the earliest finish counting the wait.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from actors import Actor

from ..jobs import DeviceType, Plan
from ._pool import NodeSpec, Placement, Pool

__all__ = ["Acquire", "Drain", "FollowNodes", "Grant", "QueueSnapshot", "Release", "Scheduler", "SchedulerMessage",
           "WaitEstimate"]


@dataclass(frozen=True)
class Grant:
    """A placement given to a job, with the plan it runs under."""

    placement: Placement
    plan: Plan


@dataclass(frozen=True)
class Acquire:
    """Queue a job for capacity; the grant arrives on ``reply`` (one message).

    ``on_position(n)`` is called whenever the job's place in the queue
    changes (1 = next); it must not block.
    """

    job_id: str
    options: tuple[Plan, ...]
    goal: str
    reply: trio.MemorySendChannel[Grant]
    on_position: Callable[[int], None]


@dataclass(frozen=True)
class Release:
    """The job no longer needs capacity (it ended, or left the queue). ``node_lost``: its
    run ended as its node lost; the node leaves the pool at once, before the job asks again
    (:meth:`~alallo.capacity._pool.Pool.lose`)."""

    job_id: str
    node_lost: bool = False


@dataclass(frozen=True)
class WaitEstimate:
    """Ask: seconds until a plan like this could start (0 when free now)."""

    plan: Plan


@dataclass
class _Waiting:
    request: Acquire
    position: int = 0


@dataclass
class _Running:
    plan: Plan
    node: str
    ends_at: float


@dataclass(frozen=True)
class Drain:
    """Ask: stop placing jobs on a node (or start again, ``on=False``); the reply is
    the ids of the jobs running there, which the caller moves elsewhere.

    Raises (to the asker):
        KeyError: no such node.
    """

    node: str
    on: bool = True


@dataclass(frozen=True)
class FollowNodes:
    """Make the pool's Ray nodes these (:meth:`~alallo.capacity._pool.Pool.follow`), then
    place what waits; the reply is ``(joined, left)``, the names of the nodes that did."""

    specs: list[NodeSpec]
    device_types: Mapping[str, DeviceType] = field(default_factory=dict)


@dataclass(frozen=True)
class QueueSnapshot:
    """Ask: the ids of the jobs waiting, in queue order."""


SchedulerMessage = Acquire | Release | WaitEstimate | QueueSnapshot | Drain | FollowNodes


class Scheduler(Actor[SchedulerMessage]):
    """Owns the pool: who runs where, who waits, and in which order."""

    def __init__(self, pool: Pool, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.pool = pool
        self._clock = clock
        self._queue: list[_Waiting] = []
        self._running: dict[str, _Running] = {}
        self._on_node: dict[str, dict[str, _Running]] = {}
        """The running jobs of each node (``_running`` by node): what frees up where."""
        self._waits: dict[tuple[str, int], tuple[float, int]] = {}
        """:meth:`_soonest` by device type and count, until the pool changes (a start, an end,
        a node) or the second ends."""
        self._waits_second = 0
        self._queued_s = 0.0
        """Expected training seconds of every queued job (first option each), kept as the
        queue changes: a wait estimate behind the queue is O(1), not O(queue)."""

    async def handle(self, message: SchedulerMessage) -> Any:
        match message:
            case Acquire():
                self._queue.append(_Waiting(message))
                self._queued_s += message.options[0].training_s
                if len(self._queue) == 1:
                    self._schedule()
                else:
                    self._schedule_newest()
            case Release(job_id=job_id, node_lost=lost):
                self._set_queue([w for w in self._queue if w.request.job_id != job_id])
                if (running := self._forget(job_id)) is not None:
                    self.pool.release(job_id)
                    if lost:
                        for other in self.pool.lose(running.node):
                            self._forget(other)
                self._schedule()
            case WaitEstimate(plan=plan):
                return self._wait_for(plan, behind_queue=True)
            case QueueSnapshot():
                return [w.request.job_id for w in self._queue]
            case FollowNodes(specs=specs, device_types=types):
                joined, left = self.pool.follow(specs, types)
                for job_id, running in list(self._running.items()):
                    if running.node in left:  # its run ends as its node lost; it asks again
                        self._forget(job_id)
                if joined or left:
                    self._schedule()
                return joined, left
            case Drain(node=name, on=on):
                node = self.pool.nodes[name]
                node.draining = on
                self._schedule()
                return sorted(node.busy)
        return None

    def _forget(self, job_id: str) -> _Running | None:
        running = self._running.pop(job_id, None)
        if running is not None:
            self._on_node.get(running.node, {}).pop(job_id, None)
            self._waits = {}
        return running

    def _schedule(self) -> None:
        now = self._clock()
        self._waits = {}  # the pool changed (a release, a node, a drain), or may have
        reservation: tuple[str, int, float] | None = None  # device type, devices, at
        still: list[_Waiting] = []
        # Free devices by type, kept as jobs start: most of a long queue cannot start, and
        # this tells so without a look at every node (issue 20: 10,000 jobs, 1,000 nodes).
        free, most = self._free_by_type()
        for n, waiting in enumerate(self._queue):
            if reservation is not None and not any(free.values()):
                still.extend(self._queue[n:])  # nothing is free: no one else can start now
                break
            request = waiting.request
            plan = self._choose(request, now)
            kind = plan.device_type
            fits_reservation = reservation is None or self._backfill_ok(plan, now, reservation,
                                                                        free)
            node = (self.pool.find(kind, plan.devices)  # else no node fits it, or it waits
                    if fits_reservation and most.get(kind, 0) >= plan.devices else None)
            if node is not None:
                self._start(request, plan, node, now)
                free[kind] -= plan.devices
                most[kind] = max((n.free for n in self.pool.nodes.values()
                                  if n.device.name == kind), default=0)
                continue
            if reservation is None:
                reservation = (plan.device_type, plan.devices, now + self._wait_for(plan))
            still.append(waiting)
        self._set_queue(still)
        for position, waiting in enumerate(self._queue, start=1):
            if waiting.position != position:
                waiting.position = position
                waiting.request.on_position(position)

    def _schedule_newest(self) -> None:
        """:meth:`_schedule` for a request joining a queue that others wait in.

        Nothing freed since the last pass, and every job waiting then still
        cannot start (time only brings the head's reservation closer, which
        leaves less room to backfill): only the newcomer may start, if it
        fits now without delaying the head's reservation. O(1) instead of a
        pass over the whole queue at every submission.
        """
        now = self._clock()
        head = self._choose(self._queue[0].request, now)
        reservation = (head.device_type, head.devices, now + self._wait_for(head))
        newest = self._queue[-1]
        plan = self._choose(newest.request, now)
        node = self.pool.find(plan.device_type, plan.devices)
        if node is not None and self._backfill_ok(plan, now, reservation,
                                                  self._free_by_type()[0]):
            self._queue.pop()
            self._queued_s -= _queued_training_s(newest)
            self._start(newest.request, plan, node, now)
            return
        newest.position = len(self._queue)
        newest.request.on_position(newest.position)

    def _choose(self, request: Acquire, now: float) -> Plan:
        if request.goal == "fastest_finish":
            return min(request.options,
                       key=lambda p: (self._wait_for(p) + p.training_s, p.price))
        return min(request.options, key=lambda p: (p.price, p.training_s))

    def _free_by_type(self) -> tuple[dict[str, int], dict[str, int]]:
        """Free devices by device type: in all, and the most on one node."""
        free: dict[str, int] = {}
        most: dict[str, int] = {}
        for node in self.pool.nodes.values():
            kind, count = node.device.name, node.free
            free[kind] = free.get(kind, 0) + count
            most[kind] = max(most.get(kind, 0), count)
        return free, most

    def _backfill_ok(self, plan: Plan, now: float, reservation: tuple[str, int, float],
                     free: dict[str, int]) -> bool:
        kind, devices, at = reservation
        if plan.device_type != kind or now + plan.training_s <= at:
            return True
        return free.get(kind, 0) - plan.devices >= devices

    def _start(self, request: Acquire, plan: Plan, node: Any, now: float) -> None:
        placement = self.pool.take(node, request.job_id, plan.devices)
        running = _Running(plan, node.spec.name, now + plan.training_s)
        self._running[request.job_id] = running
        self._on_node.setdefault(node.spec.name, {})[request.job_id] = running
        self._waits = {}
        try:
            request.reply.send_nowait(Grant(placement, plan))
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
            self.pool.release(request.job_id)  # the job stopped waiting meanwhile
            self._forget(request.job_id)

    def _set_queue(self, queue: list[_Waiting]) -> None:
        self._queue = queue
        self._queued_s = sum(_queued_training_s(w) for w in queue)

    def _wait_for(self, plan: Plan, *, behind_queue: bool = False) -> float:
        """Seconds until ``plan`` could start: devices freed by running jobs' expected
        ends, then (``behind_queue``) the training time of every queued job over the slots.

        The part that depends on the pool alone is kept per device type and count until
        the pool changes (a start or an end) or a second passes: a long queue asks it of
        the same few shapes over and over."""
        now = self._clock()
        key = (plan.device_type, plan.devices)
        if int(now) != self._waits_second:
            self._waits, self._waits_second = {}, int(now)
        if key not in self._waits:
            self._waits[key] = self._soonest(plan, now)
        soonest, slots = self._waits[key]
        return soonest + (self._queued_s / slots if behind_queue else 0.0)

    def _soonest(self, plan: Plan, now: float) -> tuple[float, int]:
        """Seconds until devices for ``plan`` free up on one node, and how many such jobs
        the device type's nodes hold at once (slots)."""
        soonest = math.inf
        for node in self.pool.nodes.values():
            if node.device.name != plan.device_type or node.spec.count < plan.devices:
                continue
            free = node.free
            if free >= plan.devices:
                soonest = 0.0
                break
            ends = sorted((max(0.0, r.ends_at - now), node.busy.get(job_id, 0))
                          for job_id, r in self._on_node.get(node.spec.name, {}).items())
            for end, devices in ends:
                free += devices
                if free >= plan.devices:
                    soonest = min(soonest, end)
                    break
        if soonest is math.inf:
            soonest = 0.0
        slots = max(1, sum(n.spec.count for n in self.pool.nodes.values()
                           if n.device.name == plan.device_type) // max(plan.devices, 1))
        return soonest, slots


def _queued_training_s(waiting: _Waiting) -> float:
    """A queued job's expected training seconds, by its first (preferred) option."""
    return waiting.request.options[0].training_s
