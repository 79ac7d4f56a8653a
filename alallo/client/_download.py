"""Downloading a fine-tuned model's archive, resumable, for both clients.

:class:`ModelDownload` holds what the sync and async clients share: where the
archive goes, the partial file an earlier try left, and the ``Range`` header
that resumes it (RFC 9110 §14.2). Each client streams the body its own way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx

from alallo.client._answers import raise_for_status

__all__ = ["ModelDownload", "Progress"]

Progress = Callable[[int, int | None], None]
"""``progress(bytes_so_far, total_or_None)``, called as chunks arrive."""

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ModelDownload:
    """One model archive download: ``GET /v1/models/{model}/content?format=adapter|merged``.

    Attributes:
        model: The fine-tuned model's id (``ft:BASE:ACCOUNT:HEX``).
        target: Where the whole archive lands, ``<directory>/ft-<hex>-<format>.tar.gz``.
        partial: Where bytes go until the archive is whole (kept for a resumed try).
        format: ``"adapter"`` or ``"merged"``.
    """

    model: str
    target: Path
    partial: Path
    format: str

    @classmethod
    def into(cls, model: str, directory: str | os.PathLike[str], merged: bool) -> ModelDownload:
        """Plan the download of ``model`` into ``directory`` (made when the server answers
        with the archive)."""
        fmt = "merged" if merged else "adapter"
        target = Path(directory) / f"ft-{model.rsplit(':', 1)[-1]}-{fmt}.tar.gz"
        return cls(model, target, target.with_name(target.name + ".partial"), fmt)

    @property
    def url(self) -> str:
        return f"/v1/models/{self.model}/content"

    @property
    def params(self) -> dict[str, str]:
        return {"format": self.format}

    def have(self) -> int:
        """Bytes an earlier try left in the partial file (0: none)."""
        return self.partial.stat().st_size if self.partial.exists() else 0

    def headers(self, auth: dict[str, str]) -> dict[str, str]:
        """``auth`` plus the ``Range`` that resumes the partial file, when there is one."""
        have = self.have()
        return auth | ({"Range": f"bytes={have}-"} if have else {})

    def opened(self, response: httpx.Response) -> tuple[int, int | None] | None:
        """Check the answer's status: ``None`` when the partial file is whole already (416),
        else ``(offset, total)``: where writing starts (0 unless the server answered 206)
        and the archive's whole size when known.

        Raises:
            NotFound, Unauthorized, ...: the error the server answered (its body read).
        """
        if response.status_code == 416:
            return None
        raise_for_status(response)
        offset = self.have() if response.status_code == 206 else 0
        size = response.headers.get("content-length")
        return offset, (int(size) + offset if size else None)

    def save(self, response: httpx.Response, progress: Progress | None) -> Path:
        """Stream ``response`` (opened with :meth:`headers`) into place; returns the path."""
        if not response.is_success and response.status_code != 416:
            response.read()
        start = self.opened(response)
        if start is not None:
            done, total = start
            self.target.parent.mkdir(parents=True, exist_ok=True)  # only for an answer
            with self.partial.open("ab" if done else "wb") as out:
                for chunk in response.iter_bytes(CHUNK_BYTES):
                    out.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
        return self.finish()

    async def asave(self, response: httpx.Response, progress: Progress | None) -> Path:
        """:meth:`save` for an async response; the file written through AnyIO's worker threads."""
        if not response.is_success and response.status_code != 416:
            await response.aread()
        start = self.opened(response)
        if start is not None:
            done, total = start
            self.target.parent.mkdir(parents=True, exist_ok=True)  # only for an answer
            async with await anyio.open_file(self.partial, "ab" if done else "wb") as out:
                async for chunk in response.aiter_bytes(CHUNK_BYTES):
                    await out.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
        return self.finish()

    def finish(self) -> Path:
        """Move the whole archive into place; returns its path."""
        self.partial.replace(self.target)
        return self.target
