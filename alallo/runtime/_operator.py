"""Telling the operator about failures that are alallo's fault, not the user's.

A job that fails with ``Failed. We've been notified and are looking into
it.`` must make that sentence true: an error log line, a Prometheus
counter, and, when ``Settings.operator_webhook_url`` is set, a JSON POST.
Restarted runs are counted too, by cause (``alallo_job_restarts_total``).
"""

from __future__ import annotations

import httpx
import structlog
from prometheus_client import Counter

from ..cluster import ADOPTED_CAUSE

__all__ = ["ACTOR_RESTARTED", "JOB_RESTARTS", "PLATFORM_FAILURES", "RESTART_CAUSES",
           "SERVER_RESTARTED", "WEBHOOK_TIMEOUT_S", "count_restart", "notify_platform_failure"]

PLATFORM_FAILURES = Counter(
    "alallo_job_platform_failures", "Jobs failed by a platform error after every restart")
JOB_RESTARTS = Counter(
    "alallo_job_restarts",
    "Runs started again (each JOB_RESTARTED event) by this process, by cause: trainer (its "
    "trainer failed), rescheduled (moved to more memory, or off a draining node), node_lost "
    "(its Ray node was lost), server_restart (this server "
    "restarted, e.g. after kill -9), adopted (taken over from another server that stopped), "
    "actor_restart (its actor crashed).", ["cause"])
SERVER_RESTARTED = "the server restarted"
"""The cause JOB_RESTARTED names when a server takes its own jobs back after a restart."""
ACTOR_RESTARTED = "its actor restarted after an error"
"""The cause JOB_RESTARTED names when the job's actor was restarted by its supervisor."""
RESTART_CAUSES = ("trainer", "rescheduled", "node_lost", "server_restart", "adopted",
                  "actor_restart")
NODE_LOST = ("(Ray no longer has it alive)", "the Ray cluster has not answered")
"""Words of the Ray executor's node-lost causes (:mod:`alallo.executors._ray`)."""
for _cause in RESTART_CAUSES:
    JOB_RESTARTS.labels(_cause)  # every cause shows, at 0, before its first restart
WEBHOOK_TIMEOUT_S = 10.0

log = structlog.get_logger("alallo.operator")


def count_restart(cause: str | None) -> None:
    """Count one JOB_RESTARTED under its kind of ``cause`` (the event's own words).

    ``cause`` is the text after ``Job restarted ...:``; it is mapped onto one of
    :data:`RESTART_CAUSES` so that the label stays a small set.
    """
    if cause == SERVER_RESTARTED:
        kind = "server_restart"
    elif cause == ADOPTED_CAUSE:
        kind = "adopted"
    elif cause == ACTOR_RESTARTED:
        kind = "actor_restart"
    elif cause is not None and cause.startswith("re-scheduled") and any(
            words in cause for words in NODE_LOST):
        kind = "node_lost"
    elif cause is not None and cause.startswith("re-scheduled"):
        kind = "rescheduled"
    else:
        kind = "trainer"
    JOB_RESTARTS.labels(kind).inc()


async def notify_platform_failure(job_id: str, reason: str, *, webhook_url: str | None) -> None:
    """Log, count and (optionally) POST ``{"job_id", "reason", "event"}`` to the webhook.

    A webhook that fails is logged; it never fails the caller.
    """
    PLATFORM_FAILURES.inc()
    log.error("job.platform_failure", job_id=job_id, reason=reason)
    if not webhook_url:
        return
    payload = {"event": "job.platform_failure", "job_id": job_id, "reason": reason}
    try:
        async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT_S) as client:
            response = await client.post(webhook_url, json=payload)
            response.raise_for_status()
    except httpx.HTTPError as exc:
        log.error("operator.webhook_failed", job_id=job_id, url=webhook_url, error=str(exc))
