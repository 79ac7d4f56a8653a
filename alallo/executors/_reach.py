"""What the trainer user of a root server may reach, opened once at start: a way to each path
it needs, the trees it writes, and nothing else of the server's.

Three kinds of opening, each an ACL entry for that one user (:mod:`alallo.executors._acl`):

- a **way** to a path (:func:`open_way`): the right to cross (search, ``--x``) each folder
  on the way, symbolic links followed as the kernel follows them, and not to list or read
  any (the interpreter under ``/root``, 0700, stays unlisted). The path itself is not
  touched: an interpreter, its library and the packages are installed readable by all.
- a **tree** it writes (:func:`open_tree`): a way to it, then read and write on everything
  in it, and on what is made in it later (default ACL): the Hugging Face cache, the folder
  the built-in model is built in.
- a **private root** (:func:`close_root`): the server's data folder. The trainer user may
  cross it (its jobs are below) but not list it; every entry in it but the ones named is
  closed to "other" users, and so is what is made in it later, so the database, the API
  key and the uploads stay out of reach even to one who knows their names.

Why ACL entries rather than ``chmod o+x``: that would open the same folders to every user
of the machine. Where a folder must be crossed and its file system keeps no ACLs, the error
says which one (``OSError``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ._acl import READ, SEARCH, WRITE, close_to_others, grant
from ._env import TrainerUser

__all__ = ["close_root", "crossings", "grant_read", "open_tree", "open_way"]


def crossings(path: Path) -> list[Path]:
    """The folders a process crosses to reach ``path`` (absolute), in order: each folder
    above it, and for every symbolic link on the way, the folders above its target (the
    link resolved as the kernel resolves it). ``path`` itself is not one of them."""
    found: dict[Path, None] = {}
    _walk(os.path.abspath(path), found, depth=0)
    return list(found)


_MAX_LINKS = 40  # as the kernel's ELOOP limit


def _walk(path: str, found: dict[Path, None], depth: int) -> str:
    """Add the folders crossed to reach ``path`` to ``found``; return its real path."""
    current = "/"
    for part in path.split("/"):
        if part in ("", "."):
            continue
        found[Path(current)] = None
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        if os.path.islink(candidate) and depth < _MAX_LINKS:
            target = os.path.join(current, os.readlink(candidate))
            current = _walk(target, found, depth + 1)
        else:
            current = candidate
    return current


def open_way(user: TrainerUser, path: Path) -> None:
    """Let ``user`` cross every folder on the way to ``path`` (:func:`crossings`), and
    nothing more.

    Raises:
        OSError: a folder on the way cannot be given the entry (no ACLs on its file system).
    """
    for folder in crossings(path):
        grant(folder, user.uid, user.gid, SEARCH)


def grant_read(user: TrainerUser, path: Path) -> None:
    """Let ``user`` read ``path`` (and, a folder, list and cross it), and nothing more.

    Raises:
        OSError: as :func:`open_way`.
    """
    grant(path, user.uid, user.gid, READ | (SEARCH if path.is_dir() else 0))


def open_tree(user: TrainerUser, root: Path) -> None:
    """Make ``root`` (if need be) and let ``user`` read and write it whole, now and later:
    a way to it, then ``rwx`` on each folder (inherited by what is made in it) and ``rw``
    on each file (``x`` too where its owner has it). Symbolic links are not followed.

    Raises:
        OSError: as :func:`open_way`.
    """
    root.mkdir(parents=True, exist_ok=True)
    open_way(user, root)
    for folder, dirs, files in os.walk(root):
        grant(Path(folder), user.uid, user.gid, READ | WRITE | SEARCH, inherit=True)
        for name in files:
            path = Path(folder, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                grant(path, user.uid, user.gid,
                      READ | WRITE | (SEARCH if st.st_mode & stat.S_IXUSR else 0))
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]


def close_root(user: TrainerUser, root: Path, open_entries: Iterable[str] = (), *,
               crossable: bool = True) -> None:
    """Make ``root`` private to the server: "other" users lose every right on it and on
    each entry in it but ``open_entries``, and on what is made in it later; ``user`` may
    cross it (when ``crossable``) without listing it.

    Raises:
        OSError: as :func:`open_way`.
    """
    keep = set(open_entries)
    close_to_others(root, inherit=True)
    if crossable:
        grant(root, user.uid, user.gid, SEARCH)
    for entry in os.scandir(root):
        if entry.name not in keep and not entry.is_symlink():
            close_to_others(Path(entry.path))
