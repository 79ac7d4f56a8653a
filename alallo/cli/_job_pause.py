"""``alallo jobs pause`` and ``alallo jobs resume``: give a job's capacity back for a while
(it saves a checkpoint and costs nothing meanwhile), then continue from that checkpoint."""

from __future__ import annotations

from alallo.cli._common import ApiKeyOption, JsonOption, UrlOption, open_client, show_job
from alallo.cli._jobs import JobIdArgument, jobs_app

__all__ = ["pause", "resume"]


@jobs_app.command("pause")
def pause(
    job_id: JobIdArgument,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pause a job: it saves a checkpoint, frees its capacity and costs nothing until you
    resume it (alallo jobs resume). A queued job pauses at once."""
    with open_client(url, api_key) as client:
        show_job(client.pause_job(job_id), as_json)


@jobs_app.command("resume")
def resume(
    job_id: JobIdArgument,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Resume a paused job: it is queued again and continues from its checkpoint."""
    with open_client(url, api_key) as client:
        show_job(client.resume_job(job_id), as_json)
