"""The SSE load generator of the benchmarks (``bench/_load.py sse``, ``bench/_sse_client.py``).

``bench_sse.py`` compares alallo with bare sse-starlette on what this client
counts, so it must count every timed event once, whatever the framing, and
count the streams that fail.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from _sse_client import BadStream, _event_time, _Stream  # noqa: E402

pytestmark = pytest.mark.unit  # no store: runs once, in the SQLite pass

FRAMES = [
    b"event: hello\r\ndata: {}\r\nid: 0\r\n\r\n",
    b'event: log\r\ndata: {"n":1,"text":"a \\"t\\": b","t":1700000000.25}\r\n\r\n',
    b": ping\r\n\r\n",
    b'data: {"object":"fine_tuning.job","progress":{"loss":1700000001.5}}\r\n\r\n',
    b'data: {"object":"fine_tuning.job","progress":{"loss":1.5}}\r\n\r\n',
]
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _chunked(frames: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n" % len(f) + f + b"\r\n" for f in frames)


@pytest.mark.parametrize("step", [1, 2, 5, 13, 10_000])
def test_events_and_times_whatever_the_reads(step: int) -> None:
    wire = HEAD + _chunked(FRAMES) + b"0\r\n\r\n"
    stream, events, ended = _Stream(None, b""), [], False  # type: ignore[arg-type]
    for i in range(0, len(wire), step):
        got, ended = stream.feed(wire[i:i + step])
        events += got
        if ended:
            break
    assert ended
    assert [_event_time(e) for e in events] == [None, 1700000000.25, None, 1700000001.5, None]


def test_an_answer_other_than_200_is_refused() -> None:
    with pytest.raises(BadStream, match="401"):
        _Stream(None, b"").feed(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n")  # type: ignore[arg-type]


def test_counts_every_timed_event_and_every_failed_stream() -> None:
    """Two streams follow ``/ok`` (a hello, then on a signal two timed events and the
    end of the body), two ask ``/missing`` (404): ready 2,
    errors 2, received 4 with their delays."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    go, done = threading.Event(), threading.Semaphore(0)

    def serve(conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            if not request.startswith(b"GET /ok "):
                conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                return
            conn.sendall(HEAD + _chunked([FRAMES[0]]))
            go.wait(30)
            timed = _chunked([b'data: {"t":%r}\n\n' % time.time() for _ in range(2)])
            conn.sendall(timed[:7])  # a chunk split over two writes
            conn.sendall(timed[7:] + b"0\r\n\r\n")
            while conn.recv(4096):  # the client closes once it read the end
                pass
            done.release()

    def accept() -> None:
        for _ in range(4):
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    load = subprocess.Popen(
        [sys.executable, str(BENCH / "_load.py"), "sse", f"http://127.0.0.1:{port}",
         "/ok,/missing", "--subscribers", "4", "--header", "Authorization: Bearer x"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert load.stdout is not None
        assert load.stdout.readline().split() == ["ready", "2"]
        go.set()
        assert done.acquire(timeout=30) and done.acquire(timeout=30)
        out, _ = load.communicate("stop\n", timeout=30)
    finally:
        load.kill()
        listener.close()
    result = json.loads(out.strip().splitlines()[-1])
    assert (result["ready"], result["errors"], result["received"]) == (2, 2, 4)
    assert len(result["latencies_ms"]) == 4
    assert all(0 <= ms < 30_000 for ms in result["latencies_ms"])
