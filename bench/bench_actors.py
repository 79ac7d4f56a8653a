"""Benchmarks of the actors runtime, side by side with raw trio where there is a raw equivalent.

Run: ``.venv/bin/python bench/bench_actors.py`` (``--quick`` for a smoke run).

Prints:
  * tell throughput between two actors vs the same messages through a bare
    ``trio.open_memory_channel`` of the same size (target: ratio >= 0.5);
  * ask round trips per second (one asker, one actor), vs a request/reply pair of raw channels;
  * spawn cost per actor (``start_child``, including ``on_start``);
  * memory per idle actor with 100,000 actors (target: < 1 GiB in all).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import time
from pathlib import Path

import structlog
import trio

from _results import append_rows, row  # noqa: E402 - bench/ helper
from actors import DEFAULT_MAILBOX_SIZE, Actor, ActorRef, RestartIntensity, open_supervisor

# One log line per actor start would measure the terminal, not the runtime.
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


class Sink(Actor[int]):
    """Counts messages; wakes the benchmark when the last one arrives."""

    def __init__(self, expected: int, done: trio.Event) -> None:
        super().__init__()
        self.expected = expected
        self.done = done
        self.count = 0

    async def handle(self, message: int) -> object:
        self.count += 1
        if self.count == self.expected:
            self.done.set()
        return None


class Source(Actor[int]):
    """On message n, tells n messages to its target."""

    def __init__(self, target: ActorRef[int]) -> None:
        super().__init__()
        self.target = target

    async def handle(self, message: int) -> object:
        tell = self.target.tell
        for i in range(message):
            await tell(i)
        return None


class Echo(Actor[int]):
    async def handle(self, message: int) -> object:
        return message


class Idle(Actor[int]):
    async def handle(self, message: int) -> object:
        return None


async def raw_channel_rate(n: int) -> float:
    send, receive = trio.open_memory_channel[int](DEFAULT_MAILBOX_SIZE)
    start = time.perf_counter()

    async def producer() -> None:
        for i in range(n):
            await send.send(i)

    async def consumer() -> None:
        for _ in range(n):
            await receive.receive()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        nursery.start_soon(consumer)
    return n / (time.perf_counter() - start)


async def actor_tell_rate(n: int) -> float:
    done = trio.Event()
    async with open_supervisor(name="bench") as sup:
        sink = await sup.start_child(Sink, n, done, name="sink")
        source = await sup.start_child(Source, sink, name="source")
        start = time.perf_counter()
        await source.tell(n)
        await done.wait()
        return n / (time.perf_counter() - start)


async def raw_request_reply_rate(n: int) -> float:
    req_send, req_receive = trio.open_memory_channel[int](DEFAULT_MAILBOX_SIZE)
    rep_send, rep_receive = trio.open_memory_channel[int](1)

    async def server() -> None:
        async for request in req_receive:
            await rep_send.send(request)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        start = time.perf_counter()
        for i in range(n):
            await req_send.send(i)
            await rep_receive.receive()
        rate = n / (time.perf_counter() - start)
        nursery.cancel_scope.cancel()
    return rate


async def ask_rate(n: int) -> float:
    async with open_supervisor(name="bench") as sup:
        echo = await sup.start_child(Echo, name="echo")
        start = time.perf_counter()
        for i in range(n):
            await echo.ask(i)
        return n / (time.perf_counter() - start)


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def spawn_and_memory(count: int) -> tuple[float, float, float, float]:
    gc.collect()
    before = rss_bytes()
    intensity = RestartIntensity(max_restarts=0, within=1.0)
    async with open_supervisor(name="bench", intensity=intensity) as sup:
        start = time.perf_counter()
        for _ in range(count):
            await sup.start_child(Idle, mailbox_size=DEFAULT_MAILBOX_SIZE)
        spawn = (time.perf_counter() - start) / count
        gc.collect()
        after = rss_bytes()
        # One message to each so every mailbox and task has been exercised.
        probe = sup.lookup(sup.children()[-1])
        assert probe is not None
        await probe.ask(0)
        stop_start = time.perf_counter()
    stop = (time.perf_counter() - stop_start) / count
    return spawn, stop, (after - before) / count, after - before


async def main(quick: bool, json_path: Path | None = None) -> None:
    messages = 20_000 if quick else 200_000
    asks = 5_000 if quick else 50_000
    actors = 10_000 if quick else 100_000
    raw = max([await raw_channel_rate(messages) for _ in range(3)])
    tell = max([await actor_tell_rate(messages) for _ in range(3)])
    raw_rr = max([await raw_request_reply_rate(asks) for _ in range(3)])
    ask = max([await ask_rate(asks) for _ in range(3)])
    spawn, stop, per_actor, total = await spawn_and_memory(actors)
    print(f"{'benchmark':<38}{'actors':>14}{'raw trio':>14}{'ratio':>8}")
    print(f"{'tell throughput (msg/s)':<38}{tell:>14,.0f}{raw:>14,.0f}{tell / raw:>8.2f}")
    print(f"{'ask round trips (/s)':<38}{ask:>14,.0f}{raw_rr:>14,.0f}{ask / raw_rr:>8.2f}")
    print(f"{'spawn cost (us/actor, start_child)':<38}{spawn * 1e6:>14,.1f}")
    print(f"{'graceful stop (us/actor, shutdown)':<38}{stop * 1e6:>14,.1f}")
    print(
        f"{f'memory per idle actor ({actors:,} actors)':<38}{per_actor:>12,.0f} B"
        f"   total {total / 2**20:,.0f} MiB"
    )
    if json_path is not None:
        # 100,000 idle actors within 1 GiB: per actor, at most 1 GiB / 100,000.
        budget = 2**30 / 100_000
        append_rows(json_path, [
            row("actors: tell throughput vs raw trio channel", tell, "msg/s", raw, 0.5),
            row("actors: ask round trips vs raw request/reply", ask, "/s", raw_rr, None),
            row("actors: spawn cost", spawn * 1e6, "us/actor", None, None),
            row("actors: memory per idle actor", per_actor, "B", budget, None,
                met=per_actor <= budget),
        ])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and actors")
    parser.add_argument("--json", type=Path, default=None, help="append rows to this file")
    args = parser.parse_args()
    trio.run(main, args.quick, args.json)
