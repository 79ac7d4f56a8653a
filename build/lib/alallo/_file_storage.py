"""Where uploaded training files are kept so that any process can read them.

The process that receives an upload writes it to its own data dir
(``<data_dir>/files/<id>.jsonl``). Processes that share ``data_dir`` need
nothing more. Processes that do not set ``storage_url``
(:mod:`alallo._shared_storage`): the upload is also copied to
``<storage_url>/files/<id>.jsonl`` *before* it is recorded in the store and
answered (a file a user was told about is one every process can fetch), and a
process that needs the bytes (a job starting or resuming, ``GET
/v1/files/{id}/content``) and lacks them fetches them into its own
``files/`` dir, checking the sha256 recorded at upload. Deleting a file
deletes the copy at the URL too.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import structlog
import trio

from ._shared_storage import open_location
from .store import FileRow

__all__ = ["FileDamaged", "FileStorage"]

log = structlog.get_logger("alallo.files")

_CHUNK = 1 << 20


class FileDamaged(OSError):
    """The bytes fetched from the shared URL do not have the sha256 recorded at upload."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class FileStorage:
    """Uploaded files in ``files_dir``, with copies at a shared fsspec URL (``url=None``: none).

    Args:
        url: the shared storage URL (``Settings.shared_storage_url``), or None.
        files_dir: this process's ``<data_dir>/files``.

    Raises:
        ValueError: the URL names no fsspec protocol installed here.
    """

    def __init__(self, url: str | None, files_dir: Path) -> None:
        self.url = url
        self.files_dir = files_dir.resolve()
        self._fs, self._root = open_location(url)

    @property
    def shared(self) -> bool:
        """Whether uploads are copied to a shared URL."""
        return self._fs is not None

    def local_path(self, file_id: str) -> Path:
        """Where this process keeps the bytes of file ``file_id``."""
        return self.files_dir / f"{file_id}.jsonl"

    def _remote(self, file_id: str) -> str:
        return f"{self._root}/files/{file_id}.jsonl"

    async def put(self, file_id: str, local: Path) -> None:
        """Copy an upload to the shared URL; a no-op without one.

        Raises:
            OSError: the store refused it (the upload must then not be recorded).
        """
        if self._fs is None:
            return
        fs, remote = self._fs, self._remote(file_id)

        def put() -> None:
            fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(local), remote)
        await trio.to_thread.run_sync(put)
        log.info("file.shared", file_id=file_id, url=self.url)

    async def local_copy(self, row: FileRow) -> Path:
        """A path on this machine holding the bytes of ``row``.

        The path recorded at upload when it exists here (this process received
        it, or the data dir is shared), else this process's copy, else a copy
        fetched now from the shared URL and checked against ``row.sha256``
        (written to a temporary name and renamed: a half-fetched copy is never
        taken for whole; concurrent fetches are harmless).

        Raises:
            FileNotFoundError: no copy here and none at the URL (or no URL).
            FileDamaged: the URL's copy does not have the recorded sha256.
            OSError: the store could not be read.
        """
        recorded, mine = Path(row.path), self.local_path(row.id)
        if await trio.Path(recorded).exists():
            return recorded
        if await trio.Path(mine).exists():
            return mine
        if self._fs is None:
            raise FileNotFoundError(
                f"the bytes of {row.id} are not on this machine ({row.path}); share the data "
                "dir or set storage_url")
        fs, remote = self._fs, self._remote(row.id)
        partial = self.files_dir / f".{row.id}.{uuid.uuid4().hex[:8]}.partial"

        def get() -> None:
            if not fs.exists(remote):
                raise FileNotFoundError(f"no copy of {row.id} at {self.url}")
            self.files_dir.mkdir(parents=True, exist_ok=True)
            try:
                fs.get_file(remote, str(partial))
                if (digest := _sha256(partial)) != row.sha256:
                    raise FileDamaged(f"the copy of {row.id} at {self.url} has sha256 "
                                      f"{digest}, not {row.sha256} as uploaded")
                partial.rename(mine)
            finally:
                partial.unlink(missing_ok=True)
        await trio.to_thread.run_sync(get)
        log.info("file.fetched", file_id=row.id, url=self.url)
        return mine

    async def delete(self, row: FileRow) -> None:
        """Delete this process's copies of ``row`` and the one at the URL (all missing_ok).

        Copies fetched by other processes stay in their data dirs. A copy at the
        URL that cannot be deleted is logged (``file.not_unshared``) and left:
        the file is already gone from the store, so the delete stands.
        """
        for path in {Path(row.path), self.local_path(row.id)}:
            await trio.Path(path).unlink(missing_ok=True)
        if self._fs is None:
            return
        fs, remote = self._fs, self._remote(row.id)

        def rm() -> None:
            if fs.exists(remote):
                fs.rm_file(remote)
        try:
            await trio.to_thread.run_sync(rm)
        except OSError as exc:
            log.warning("file.not_unshared", file_id=row.id, url=self.url, error=str(exc))
