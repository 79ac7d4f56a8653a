"""Many Server-Sent Events streams read by one process with one selector loop (``_load.py sse``).

Hand-rolled on purpose, not an HTTP client library: the load generator shares
the machine with the server under test, and at 10,000 streams a task and an
h11 connection per stream (the earlier generator) took 60-71 us of CPU per
event (0.6-0.7 of a core at 10,000 events/s), starving the server on a 2-core
machine; this one takes ~19 us. Here each stream is a
non-blocking socket in one ``selectors`` loop (epoll on Linux): the request is
written as raw HTTP/1.1 bytes, the status line and headers are parsed once,
then the chunked body (RFC 9112 §7.1) is unframed and cut into SSE events on
blank lines; a ``data:`` line holding ``"t":`` gives the publisher's
``time.time()`` by slicing the number after it (no JSON parse), and a job's
``progress.loss`` holding a Unix time (``bench_live_jobs.py``) is parsed as JSON
(rare). Each read is stamped with ``time.time()`` once, right after
``recv``; the delay of every event in it is measured against that stamp,
the same way for every server the benchmark compares.

What counts: ``received`` is every event with a time, read after all
streams were ready; ``errors`` a stream that could not open (refused, not
200, closed before its first event) or broke later (reset, bad framing). A
stream the server ends cleanly is not an error (a finished job's stream ends).
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import resource
import selectors
import socket
import sys
import time
from collections import deque
from typing import Any

__all__ = ["MAX_SAMPLE", "cpu_s", "run_sse"]

MAX_SAMPLE = 20_000
"""At most this many delays come back (a uniform sample)."""



def cpu_s() -> float:
    """CPU seconds (user and system) this process took so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


OPENING_AT_ONCE = 64
"""Streams between connect and their first event at any one time (as the earlier generator)."""
RECV_BYTES = 65536
_NUMBER = re.compile(rb"\s*(-?[0-9][0-9.eE+-]*)")


class BadStream(Exception):
    """The server answered something this client does not read (not 200, bad framing)."""


class _Stream:
    """One SSE stream's parse state: headers, then chunked body, then SSE text."""

    __slots__ = ("sock", "out", "headers_done", "chunked", "raw", "need", "text", "ready",
                 "opening")

    def __init__(self, sock: socket.socket, request: bytes) -> None:
        self.sock = sock
        self.out = request          # request bytes not written yet
        self.headers_done = False
        self.chunked = False
        self.raw = b""              # bytes not parsed yet (headers, or a partial chunk)
        self.need = 0               # len(raw) needed before the next parse can progress
        self.text = b""             # SSE text after the last complete event
        self.ready = False          # its first event came
        self.opening = True         # counted in the streams being opened

    def feed(self, data: bytes) -> tuple[list[bytes], bool]:
        """Take bytes read from the socket; return the complete SSE events they ended
        (each with LF line ends) and whether the body ended."""
        raw = self.raw + data if self.raw else data
        if not self.headers_done:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                self.raw = raw
                return [], False
            head = raw[:end].lower()
            if not head.startswith((b"http/1.1 200", b"http/1.0 200")):
                raise BadStream(raw[:end].split(b"\r\n", 1)[0].decode("latin-1"))
            self.chunked = b"\ntransfer-encoding: chunked" in head
            self.headers_done = True
            raw = raw[end + 4:]
        ended = False
        if not self.chunked:  # the body lasts until the connection closes
            body, self.raw = raw, b""
        elif len(raw) < self.need:
            self.raw = raw
            return [], False
        else:
            body, ended = self._unchunk(raw)
        if not body:
            return [], ended
        text = (self.text + body).replace(b"\r\n", b"\n")
        *events, self.text = text.split(b"\n\n")
        return events, ended

    def _unchunk(self, raw: bytes) -> tuple[bytes, bool]:
        parts = []
        pos, size = 0, len(raw)
        self.need = 0  # a partial size line: parse again on any new bytes
        while (eol := raw.find(b"\r\n", pos)) >= 0:
            try:
                length = int(raw[pos:eol].split(b";", 1)[0], 16)
            except ValueError:
                raise BadStream(f"bad chunk size line {raw[pos:eol][:40]!r}") from None
            if length == 0:  # the last chunk (trailers, if any, are not read)
                self.raw = b""
                return b"".join(parts), True
            end = eol + 2 + length
            if end + 2 > size:
                self.need = end + 2 - pos  # counted from the start of what is kept
                break
            if raw[end:end + 2] != b"\r\n":
                raise BadStream("a chunk does not end with CRLF")
            parts.append(raw[eol + 2:end])
            pos = end + 2
        self.raw = raw[pos:] if pos < size else b""
        return b"".join(parts), False


def _event_time(event: bytes) -> float | None:
    """The publisher's clock in an SSE event: top-level ``t``, or ``progress.loss``
    when it holds a Unix time; None if neither."""
    for line in event.split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        i = line.find(b'"t":')
        if i >= 0:
            match = _NUMBER.match(line, i + 4)
            if match:
                return float(match.group(1))
        elif b'"loss":' in line:
            t = (json.loads(line[5:]).get("progress") or {}).get("loss") or 0.0
            if t >= 1e9:
                return t
    return None


def run_sse(host: str, port: int, paths: list[str], headers: list[tuple[str, str]],
            subscribers: int) -> dict[str, Any]:
    """Open ``subscribers`` streams (spread over ``paths``), print ``ready N`` once each
    has sent its first event (or failed), then record publish-to-read delays until a
    line on stdin; return ``{"received", "errors", "ready", "latencies_ms" (a sample
    of at most :data:`MAX_SAMPLE`), "wall_s", "cpu_s"}`` (wall and CPU of the recording).
    """
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
    requests = [(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
                 f"{extra}\r\n").encode() for path in paths]
    address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    family, sockaddr = address[0], address[4]
    selector = selectors.DefaultSelector()
    pending = deque(range(subscribers))
    counts = {"received": 0, "errors": 0, "ready": 0, "opening": 0}
    latencies: list[float] = []
    recording = False

    def open_next() -> None:
        while pending and counts["opening"] < OPENING_AT_ONCE:
            i = pending.popleft()
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            counts["opening"] += 1
            code = sock.connect_ex(sockaddr)
            stream = _Stream(sock, requests[i % len(requests)])
            if code not in (0, errno.EINPROGRESS):
                failed(stream)
                continue
            selector.register(sock, selectors.EVENT_WRITE, stream)

    def failed(stream: _Stream) -> None:
        """The stream is done: an error unless it was ready and ended cleanly."""
        close(stream)
        counts["errors"] += 1

    def close(stream: _Stream) -> None:
        if stream.sock.fileno() >= 0:
            try:
                selector.unregister(stream.sock)
            except (KeyError, ValueError):
                pass
            stream.sock.close()
        if stream.opening:
            counts["opening"] -= 1
            stream.opening = False

    def on_writable(stream: _Stream) -> None:
        sock = stream.sock
        if stream.out and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            return failed(stream)
        try:
            sent = sock.send(stream.out)
        except OSError:
            return failed(stream)
        stream.out = stream.out[sent:]
        if not stream.out:
            selector.modify(sock, selectors.EVENT_READ, stream)

    def on_readable(stream: _Stream) -> None:
        try:
            data = stream.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return failed(stream)
        now = time.time()
        if not data:  # closed: an error before the first event, the end of a stream after
            return failed(stream) if not stream.ready else close(stream)
        try:
            events, ended = stream.feed(data)
            if events and not stream.ready:
                stream.ready, stream.opening = True, False
                counts["ready"] += 1
                counts["opening"] -= 1
                events = []  # the first event opens the stream; it is not measured
            if recording:
                for event in events:
                    t = _event_time(event)
                    if t is not None:
                        counts["received"] += 1
                        latencies.append(now - t)
        except (BadStream, ValueError):
            return failed(stream)
        if ended:
            if stream.ready:
                close(stream)
            else:
                failed(stream)

    def step(timeout: float | None) -> bool:
        """One round of the loop; True when stdin has a line."""
        stop = False
        for key, mask in selector.select(timeout):
            stream = key.data
            if stream is None:
                stop = True
            elif mask & selectors.EVENT_WRITE:
                on_writable(stream)
            else:
                on_readable(stream)
        return stop

    open_next()
    while counts["ready"] + counts["errors"] < subscribers:
        step(1.0)
        open_next()
    print(f"ready {counts['ready']}", flush=True)
    start_cpu, start = cpu_s(), time.perf_counter()
    counts["received"] = 0
    recording = True
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, None)
    while not step(None):
        pass
    cpu, wall = cpu_s() - start_cpu, time.perf_counter() - start
    for key in list(selector.get_map().values()):
        if key.data is not None:
            key.data.sock.close()
    os.read(sys.stdin.fileno(), 4096)
    sample = latencies if len(latencies) <= MAX_SAMPLE else random.sample(latencies, MAX_SAMPLE)
    return {"received": counts["received"], "errors": counts["errors"], "ready": counts["ready"],
            "latencies_ms": [round(x * 1000, 3) for x in sample], "wall_s": wall, "cpu_s": cpu}
