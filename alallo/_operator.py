"""Telling the operator about failures that are alallo's fault, not the user's.

A job that fails with ``Failed. We've been notified and are looking into
it.`` must make that sentence true: an error log line, a Prometheus
counter, and, when ``Settings.operator_webhook_url`` is set, a JSON POST.
"""

from __future__ import annotations

import httpx
import structlog
from prometheus_client import Counter

__all__ = ["JOB_RESTARTS", "PLATFORM_FAILURES", "WEBHOOK_TIMEOUT_S", "notify_platform_failure"]

PLATFORM_FAILURES = Counter(
    "alallo_job_platform_failures", "Jobs failed by a platform error after every restart")
JOB_RESTARTS = Counter(
    "alallo_job_restarts", "Runs restarted from a checkpoint after a platform error")
WEBHOOK_TIMEOUT_S = 10.0

log = structlog.get_logger("alallo.operator")


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
