"""Where trainers' checkpoints are kept so that any process can resume a job.

A trainer writes its checkpoints into the job's work dir
(``<data_dir>/jobs/<job>/checkpoints/checkpoint-<step>``). Processes that
share ``data_dir`` (a shared path: NFS, a shared volume) need nothing more.
Processes that do not share a path set ``storage_url`` (or its older name
``checkpoint_url``) to an fsspec URL (``s3://bucket/alallo``, ``gs://...``,
``file:///mnt/alallo``; :mod:`alallo._shared_storage`): the job actor
copies each checkpoint there *before* it records it in the store (so a
recorded checkpoint is always one any process can fetch), and a process
that resumes a job whose checkpoint it does not have fetches it first.

Remote layout: ``<storage_url>/<job_id>/<checkpoint dir name>/...``.
fsspec's calls block, so they run in a worker thread.
"""

from __future__ import annotations

from pathlib import Path

import structlog
import trio

from ._shared_storage import open_location

__all__ = ["CheckpointStorage"]

log = structlog.get_logger("alallo.checkpoints")


class CheckpointStorage:
    """Copies of job checkpoints at a shared fsspec URL (``url=None``: local dirs only).

    Raises:
        ValueError: the URL names no fsspec protocol installed here.
    """

    def __init__(self, url: str | None) -> None:
        self.url = url
        self._fs, self._root = open_location(url)

    @property
    def shared(self) -> bool:
        """Whether checkpoints are copied to a shared URL."""
        return self._fs is not None

    def _remote(self, job_id: str, name: str) -> str:
        return f"{self._root}/{job_id}/{name}"

    async def upload(self, job_id: str, local: Path) -> None:
        """Copy a checkpoint directory (or file) to the shared URL; no-op without one.

        Raises:
            OSError: the store refused it (the checkpoint is then not recorded); an
                object store's own errors come as one too.
        """
        if self._fs is None or not local.exists():
            return
        fs, remote = self._fs, self._remote(job_id, local.name)

        def put() -> None:
            if local.is_dir():
                fs.makedirs(remote, exist_ok=True)
                for path in sorted(p for p in local.rglob("*") if p.is_file()):
                    target = f"{remote}/{path.relative_to(local).as_posix()}"
                    fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
                    fs.put_file(str(path), target)
            else:
                fs.put_file(str(local), remote)
        try:
            await trio.to_thread.run_sync(put)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - an object store's own error type
            raise OSError(f"{type(exc).__name__}: {exc}") from exc
        log.info("checkpoint.uploaded", job_id=job_id, name=local.name, url=self.url)

    async def fetch(self, job_id: str, recorded: str, local_dir: Path) -> str:
        """A local path of the checkpoint recorded as ``recorded`` (a path of any process).

        Without a shared URL, or when the recorded path exists here, it is
        returned as is; else the copy at the URL is fetched into
        ``local_dir/<its name>`` (unless already there).

        Raises:
            FileNotFoundError: the URL has no copy of it.
        """
        if self._fs is None or Path(recorded).exists():
            return recorded
        name = Path(recorded).name
        target = local_dir / name
        if target.exists():
            return str(target)
        fs, remote = self._fs, self._remote(job_id, name)

        def get() -> None:
            if not fs.exists(remote):
                raise FileNotFoundError(f"no checkpoint {name} of {job_id} at {self.url}")
            partial = local_dir / f".{name}.partial"
            if fs.isdir(remote):
                for path in fs.find(remote):
                    relative = path[len(remote.rstrip("/")) + 1:]
                    destination = partial / relative
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    fs.get_file(path, str(destination))
            else:
                partial.parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(remote, str(partial))
            partial.rename(target)  # a half-fetched copy is never taken for whole
        await trio.to_thread.run_sync(get)
        log.info("checkpoint.fetched", job_id=job_id, name=name, url=self.url)
        return str(target)
