"""``GET /metrics``: Prometheus text, from prometheus-client.

What it shows:

==========================================  =========  ==============================================
``alallo_jobs{status}``                     gauge      jobs of every account in each status
``alallo_queue_length``                     gauge      jobs waiting in this process's scheduler
``alallo_training_steps_per_second``        gauge      steps per second of all running jobs together
``alallo_open_streams{kind}``               gauge      SSE (``job``, ``account``) and ``websocket``
``alallo_streams_refused_total{kind}``      counter    streams refused: the account held its limit
``alallo_actor_restarts_total``             counter    job actors restarted after a crash
``alallo_actor_crashes_total``              counter    job actor incarnations that crashed
``alallo_actors_given_up_total``            counter    job actors given up (their jobs failed)
``alallo_job_restarts_total{cause}``        counter    runs started again by this process
``alallo_job_platform_failures_total``      counter    jobs failed by a platform error
``alallo_serving_requests{engine}``         gauge      completions under way (queued or generating)
``alallo_serving_models{engine}``           gauge      models (vLLM: engines) loaded
``alallo_serving_generated_tokens_total``   counter    tokens generated, by ``engine``
``alallo_serving_tokens_per_second``        gauge      tokens generated per second (last 10 s)
``process_*``, ``python_*``                 various    the server process (prometheus-client's own)
==========================================  =========  ==============================================

``alallo_jobs`` counts the whole cluster (every server on one database);
``alallo_queue_length`` and the counters count this process only (its
scheduler, its actors), as Prometheus sums them over the servers it scrapes.
A restart's ``cause`` is ``trainer``, ``rescheduled``, ``server_restart``
(after ``kill -9``), ``adopted`` (a job moved from a server that stopped) or
``actor_restart`` (:data:`alallo.runtime._operator.RESTART_CAUSES`).

The job gauges are read from the store and the scheduler when scraped, not
kept up to date by every change: a scrape every few seconds costs two small
queries, while counting on every change would put the gateway in the job
actors' path, and a restarted server would start from wrong numbers. Steps
per second is each running job's pace since its run's first step, summed.

A refused stream (``Settings.max_streams_per_account``, :class:`gateway._limits.StreamLimit`)
counts under the ``kind`` it asked for, ``subscription`` for a WebSocket's subscription: a
counter that rises in normal use says the limit is too low for this server's clients.

Each app has its own registry for what it owns (so that two apps in one
process, as in tests, count apart); the job counters of ``alallo`` and the
process figures live in prometheus-client's default registry, which is
appended as it is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from alallo import Job, JobStatus, Runtime

from ._auth import runtime_of
from ._limits import StreamLimit, TooManyStreams

__all__ = ["Metrics", "metrics", "open_stream"]


class Metrics:
    """The gateway's instruments, registered in one registry per app.

    Args:
        runtime: The runtime whose jobs and actors are counted.

    Attributes:
        registry: What ``/metrics`` exposes, before the default registry.
        open_streams: Streams open now, by ``kind``: ``job`` (one job's SSE),
            ``account`` (the account's SSE), ``websocket``.
        refused_streams: Streams refused because the account held its limit, by ``kind``
            (those of ``open_streams``, and ``subscription``: one a WebSocket asked for).
        streams: The streams each account holds, and its limit (:class:`StreamLimit`).
        jobs: Jobs by ``status`` (set on each scrape by :meth:`refresh`).
        queue_length: Jobs waiting in this process's scheduler (set on each scrape).
        steps_per_second: Steps per second of every running job together (set on each scrape).
    """

    def __init__(self, runtime: Runtime) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.open_streams = Gauge("alallo_open_streams", "Streams open now, by kind.",
                                  ["kind"], registry=self.registry)
        self.refused_streams = Counter(
            "alallo_streams_refused", "Streams refused because the account held as many as "
            "it may (ALALLO_MAX_STREAMS_PER_ACCOUNT, ALALLO_MAX_SUBSCRIPTIONS_PER_WEBSOCKET), "
            "by kind.", ["kind"], registry=self.registry)
        for kind in ("job", "account", "websocket"):
            self.open_streams.labels(kind)
            self.refused_streams.labels(kind)
        self.refused_streams.labels("subscription")
        self.streams = StreamLimit(runtime.settings.max_streams_per_account)
        self.jobs = Gauge("alallo_jobs", "Jobs of every account, by status, in the whole "
                          "cluster (every server on this database).", ["status"],
                          registry=self.registry)
        for status in JobStatus:
            self.jobs.labels(status.value)
        self.queue_length = Gauge(
            "alallo_queue_length", "Jobs waiting for capacity in this process's scheduler "
            "(per server; sum over servers for the cluster; queued jobs not yet placed in a "
            "scheduler are in alallo_jobs{status=\"queued\"}).", registry=self.registry)
        self.steps_per_second = Gauge(
            "alallo_training_steps_per_second",
            "Optimizer steps per second of all running jobs together, each at its pace "
            "since its run's first step.", registry=self.registry)
        self.registry.register(_ActorCollector(runtime))
        self.registry.register(_ServingCollector(runtime))

    async def refresh(self, runtime: Runtime) -> None:
        """Read the job gauges from the store and the scheduler."""
        counts = await runtime.store.count_jobs_by_status()
        for status in JobStatus:
            self.jobs.labels(status.value).set(counts.get(status.value, 0))
        self.queue_length.set((await runtime.capacity())["queue_length"])
        now = time.time()
        self.steps_per_second.set(sum(_pace(job, now) for job in await runtime.store.live_jobs()))


def _pace(job: Job, now: float) -> float:
    steps = job.progress.step - job.first_step
    if job.status is not JobStatus.RUNNING or job.first_step_at is None or steps <= 0:
        return 0.0
    elapsed = now - job.first_step_at
    return steps / elapsed if elapsed > 0 else 0.0


class _ActorCollector(Collector):
    # Read at each scrape from the supervisor's own counters (actors.SupervisorStatistics).
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def collect(self) -> Iterator[Metric]:
        stats = self._runtime.actor_statistics()
        yield CounterMetricFamily("alallo_actor_restarts",
                                  "Job actors restarted by their supervisor after a crash.",
                                  value=stats.restarted if stats else 0)
        yield CounterMetricFamily("alallo_actor_crashes",
                                  "Job actor incarnations that ended with an exception.",
                                  value=stats.crashed if stats else 0)
        yield CounterMetricFamily("alallo_actors_given_up",
                                  "Job actors given up after too many crashes within a minute "
                                  "(their jobs failed with a platform error; the server went on).",
                                  value=stats.given_up if stats else 0)
        yield GaugeMetricFamily("alallo_actors_running", "Actors running now (jobs, scheduler).",
                                value=stats.running if stats else 0)


class _ServingCollector(Collector):
    # Read at each scrape from the engines' own counters (Completions.statistics).
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def collect(self) -> Iterator[Metric]:
        families = {
            "requests": GaugeMetricFamily(
                "alallo_serving_requests", "Completions under way, queued or generating "
                "(the engine's queue depth), by engine.", labels=["engine"]),
            "models": GaugeMetricFamily("alallo_serving_models", "Models loaded (vLLM: "
                                        "engines, each with its adapters), by engine.",
                                        labels=["engine"]),
            "tokens": CounterMetricFamily("alallo_serving_generated_tokens",
                                          "Tokens generated, by engine.", labels=["engine"]),
            "tokens_per_second": GaugeMetricFamily(
                "alallo_serving_tokens_per_second",
                "Tokens generated per second over the last 10 s, by engine.",
                labels=["engine"])}
        for engine, figures in self._runtime.completions.statistics().items():
            for name, family in families.items():
                family.add_metric([engine], figures[name])
        yield from families.values()


@contextmanager
def open_stream(app: Starlette, kind: str, account_id: str) -> Iterator[None]:
    """Hold one of the account's streams (kind ``kind``) for the duration of the block.

    Raises:
        TooManyStreams: the account holds as many as it may (``Settings.max_streams_per_account``);
            nothing is counted but the refusal.
    """
    state: Metrics = app.state.metrics
    try:
        state.streams.open(account_id)
    except TooManyStreams:
        state.refused_streams.labels(kind).inc()
        raise
    gauge = state.open_streams.labels(kind)
    gauge.inc()
    try:
        yield
    finally:
        gauge.dec()
        state.streams.close(account_id)


async def metrics(request: Request) -> Response:
    """``GET /metrics``: the gateway's, the runtime's and the process's figures, as Prometheus text."""
    state = request.app.state.metrics
    await state.refresh(runtime_of(request))
    body = generate_latest(state.registry) + generate_latest(REGISTRY)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
