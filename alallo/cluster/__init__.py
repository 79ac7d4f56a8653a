"""Many processes as one service: the node registry, job leases with fencing epochs, adoption
of a stopped process's jobs, and the storage location every process reads (uploads and
checkpoints at ``ALALLO_STORAGE_URL``).

- :mod:`~alallo.cluster._cluster`: :class:`Cluster` (nodes, leases, claims, cancel requests).
- :mod:`~alallo.cluster._shared_storage`: the fsspec location, checked at start.
- :mod:`~alallo.cluster._file_storage`, :mod:`~alallo.cluster._checkpoint_storage`: uploads
  and checkpoints there.

Names load on first use (PEP 562), so importing one module of the wing does not
import the rest of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alallo._lazy import lazy_names

if TYPE_CHECKING:
    from ._checkpoint_storage import CheckpointStorage as CheckpointStorage
    from ._cluster import ADOPTED_CAUSE as ADOPTED_CAUSE
    from ._cluster import Claim as Claim
    from ._cluster import Cluster as Cluster
    from ._file_storage import FileDamaged as FileDamaged
    from ._file_storage import FileStorage as FileStorage
    from ._shared_storage import check_writable as check_writable
    from ._shared_storage import open_location as open_location

_ORIGINS: dict[str, tuple[str, str | None]] = {
    "ADOPTED_CAUSE": ("._cluster", "ADOPTED_CAUSE"),
    "CheckpointStorage": ("._checkpoint_storage", "CheckpointStorage"),
    "Claim": ("._cluster", "Claim"),
    "Cluster": ("._cluster", "Cluster"),
    "FileDamaged": ("._file_storage", "FileDamaged"),
    "FileStorage": ("._file_storage", "FileStorage"),
    "check_writable": ("._shared_storage", "check_writable"),
    "open_location": ("._shared_storage", "open_location"),
}
"""Each public name: the module it comes from, and its name there (None: the module)."""


__all__ = ["ADOPTED_CAUSE", "CheckpointStorage", "Claim", "Cluster", "FileDamaged", "FileStorage",
           "check_writable", "open_location"]

__getattr__, __dir__ = lazy_names(__name__, _ORIGINS, __all__)
