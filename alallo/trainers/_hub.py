"""Downloading a hub model when a run starts: ``snapshot_download`` at the commit the job
pinned, into the Hugging Face cache (``HF_HOME``), with the progress in the job's log.

Part of :mod:`alallo.trainers.trl`; imported in the trainer's process only. The token is
``HF_TOKEN`` from the environment (the server gives it to its own trainer only). A model
that is gone from the hub, gated, or not cached on a machine that is offline is the job's
error (it fails at once, charged nothing); the hub not answering is the platform's (the
run is restarted).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ._protocol import Log, TrainerConfig
from ._trl_model import UserModelError

__all__ = ["download_hub_model"]

_REPORT_EVERY = 0.1
"""A progress line each tenth of the bytes."""


def download_hub_model(config: TrainerConfig, out: Any) -> Path:
    """The snapshot directory of ``config.model`` (a hub id) at ``config.hub_revision``,
    downloaded first when the cache lacks it.

    Raises:
        UserModelError: not on the hub (or no longer), gated without access, or offline and
            not cached.
        huggingface_hub.errors.HfHubHTTPError, OSError: the hub failed (the platform's).
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo, revision = config.model, config.hub_revision
    out(Log(text=f"Downloading model {repo} at {str(revision)[:12]} from the Hugging Face hub"))
    started = time.monotonic()
    try:
        path = Path(snapshot_download(repo, revision=revision,
                                      tqdm_class=_progress_class(repo, out)))
    except GatedRepoError:
        raise UserModelError(f"{repo} is gated on the Hugging Face hub and this server's "
                             "token has no access to it") from None
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise UserModelError(f"{repo} at {revision} is no longer on the Hugging Face hub") from None
    except LocalEntryNotFoundError as exc:
        raise UserModelError(f"{repo} is not in the Hugging Face cache of the machine that "
                             f"trains, and it cannot download it: {exc}") from None
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    out(Log(text=f"Model {repo} is here: {_bytes(size)} in {time.monotonic() - started:.0f} s"))
    return path


def _progress_class(repo: str, out: Any) -> type:
    """A ``tqdm`` that draws nothing and writes a log line each tenth of the bytes."""
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    class Progress(tqdm):  # type: ignore[misc,type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = False
            kwargs["file"] = _Nowhere()
            super().__init__(*args, **kwargs)
            self._told = 0.0

        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            if self.unit == "B" and self.total:
                done = self.n / self.total
                if done - self._told >= _REPORT_EVERY or (done >= 1 and self._told < 1):
                    self._told = done
                    out(Log(text=f"Downloading model {repo}: {done:.0%} of "
                                 f"{_bytes(self.total)}"))
            return shown

    return Progress


class _Nowhere:
    def write(self, _: str) -> int:
        return 0

    def flush(self) -> None:
        pass


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
