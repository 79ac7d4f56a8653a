"""The shared storage location: one fsspec URL every process of a cluster reads.

Processes that share ``data_dir`` (a shared path: NFS, a shared volume) need
none. Processes that do not (separate machines, each with its own data dir)
set ``storage_url`` (``s3://bucket/alallo``, ``gs://...``, ``file:///mnt/alallo``)
and keep there what another process may need: uploaded training files
(:mod:`alallo._file_storage`) and checkpoints (:mod:`alallo._checkpoint_storage`).

Layout under the URL::

    files/<file id>.jsonl          uploads, as uploaded
    <job id>/checkpoint-<step>/    checkpoints (the layout ``checkpoint_url`` had)

fsspec (https://filesystem-spec.readthedocs.io) gives one interface to local,
object and memory stores; its calls block, so callers run them in a worker thread.
"""

from __future__ import annotations

from typing import Any

import fsspec

__all__ = ["open_location"]


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
