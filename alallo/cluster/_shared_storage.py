"""The shared storage location: one fsspec URL every process of a cluster reads.

Processes that share ``data_dir`` (a shared path: NFS, a shared volume) need
none. Processes that do not (separate machines, each with its own data dir)
set ``storage_url`` (``s3://bucket/alallo``, ``gs://...``, ``file:///mnt/alallo``)
and keep there what another process may need: uploaded training files
(:mod:`alallo.cluster._file_storage`) and checkpoints (:mod:`alallo.cluster._checkpoint_storage`).

Layout under the URL::

    files/<file id>.jsonl          uploads, as uploaded
    <job id>/checkpoint-<step>/    checkpoints (the layout ``checkpoint_url`` had)

fsspec (https://filesystem-spec.readthedocs.io) gives one interface to local,
object and memory stores; its calls block, so callers run them in a worker thread.
"""

from __future__ import annotations

import uuid
from typing import Any

import fsspec  # type: ignore[import-untyped]

from .._errors import SettingError

__all__ = ["check_writable", "open_location"]


def open_location(url: str | None, setting: str = "storage_url") -> tuple[Any, str]:
    """The fsspec filesystem and root path of ``url`` (``(None, "")`` for ``None``).

    Args:
        url: an fsspec URL, or None (no shared location).
        setting: the setting's name, for the error message.

    Raises:
        ValueError: the URL names no fsspec protocol installed here (the message
            names ``setting``).
    """
    if url is None:
        return None, ""
    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ValueError, ImportError) as exc:
        raise ValueError(f"{setting} {url!r} is not usable: {exc}") from exc
    return fs, str(root).rstrip("/")


def check_writable(url: str | None, setting: str = "storage_url") -> None:
    """Write and remove a small file at ``url``, so that a location this process cannot
    use stops it at start, not at the first upload (blocking: run it in a thread).

    Raises:
        SettingError: the URL is unusable or the file cannot be written there; the
            message names ``ALALLO_<SETTING>``, the URL and the reason.
    """
    if url is None:
        return
    name = f"ALALLO_{setting.upper()}"
    try:
        fs, root = open_location(url, setting)
        probe = f"{root}/.alallo-write-check-{uuid.uuid4().hex}"
        fs.makedirs(root, exist_ok=True)
        fs.pipe_file(probe, b"alallo")
        fs.rm_file(probe)
    except Exception as exc:  # noqa: BLE001 - any backend's error: told in one line, below
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SettingError(f"{name} ({url}) cannot be written: {reason}",
                           param=setting) from exc
