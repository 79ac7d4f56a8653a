"""``GET /metrics``: Prometheus text, from prometheus-client.

Each app has its own registry (not the library's global one), so that two
apps in one process, as in tests, count apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["Metrics", "metrics", "open_stream"]


class Metrics:
    """The gateway's instruments, registered in one registry per app.

    Attributes:
        registry: What ``/metrics`` exposes.
        open_streams: Streams open now, by ``kind``: ``job`` (one job's SSE),
            ``account`` (the account's SSE), ``websocket``.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.open_streams = Gauge("alallo_open_streams", "Streams open now, by kind.",
                                  ["kind"], registry=self.registry)
        for kind in ("job", "account", "websocket"):
            self.open_streams.labels(kind)


@contextmanager
def open_stream(app: Starlette, kind: str) -> Iterator[None]:
    """Count a stream of ``kind`` as open for the duration of the block."""
    gauge = app.state.metrics.open_streams.labels(kind)
    gauge.inc()
    try:
        yield
    finally:
        gauge.dec()


async def metrics(request: Request) -> Response:
    """``GET /metrics``: the gateway's and the runtime's figures, as Prometheus text."""
    registry: CollectorRegistry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
