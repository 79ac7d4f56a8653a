"""A job's metrics as the runtime keeps them: the points the trainer reported (job items of
kind ``metrics``), the series ``GET /v1/fine_tuning/jobs/{id}/metrics`` answers, and the
metrics CSV a succeeded job leaves in its account's files (``result_files``)."""

from __future__ import annotations

import structlog

from ..jobs import Job, MetricsPoint, metrics_csv, series
from ..store import Store, StoreUnavailable, read_item
from ._training_files import TrainingFiles

__all__ = ["metrics_points", "metrics_series", "results_file_id", "save_results"]

log = structlog.get_logger("alallo.job")


def results_file_id(job_id: str) -> str:
    """The id of the job's metrics CSV: ``file-<job's hex>-metrics``, the same for every run
    (a run that succeeds again after a crash replaces it)."""
    return f"file-{job_id.removeprefix('ft-')}-metrics"


async def metrics_points(store: Store, job_id: str) -> list[MetricsPoint]:
    """Every point the job's runs reported, in the order they came (rows that no longer
    validate are left out)."""
    items = await store.items_after(job_id, 0, kinds=("metrics",))
    return [point for _, _, data in items
            if (point := read_item(MetricsPoint, data, job_id=job_id)) is not None]


async def metrics_series(store: Store, job_id: str, *, after: int = 0,
                         ) -> list[dict[str, float | int | None]]:
    """The job's series, one row per step with ``step > after`` (:func:`alallo.jobs.series`)."""
    return [row for row in series(await metrics_points(store, job_id))
            if int(row["step"] or 0) > after]


async def save_results(store: Store, files: TrainingFiles, job: Job) -> str | None:
    """Store the job's metrics CSV in its account's files; its id, or None when it could not
    be stored (logged: the job succeeds without it, and nothing else is lost)."""
    try:
        csv = metrics_csv(await metrics_series(store, job.id)).encode()
        row = await files.save_result(job.account_id, results_file_id(job.id),
                                      f"{job.id}-metrics.csv", csv)
    except (OSError, StoreUnavailable) as exc:
        log.warning("job.results_not_saved", job_id=job.id, error=str(exc))
        return None
    return row.id
