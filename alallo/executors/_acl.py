"""One more user in a file's POSIX ACL, written as the kernel's extended attribute.

A root server lets its trainer user through folders it may not list (``/root`` is 0700,
and so are pytest's temporary folders) and into the caches it must write, without opening
them to every user (``chmod o+x``: any local account could then reach the server's files by
name) and without taking them from their owner (``chown``). An ACL entry for that one user
does exactly that (``setfacl -m u:alallo-trainer:--x /root``), and keeps every entry already
there.

How: Linux keeps a file's access ACL in the extended attribute ``system.posix_acl_access``
and a folder's inherited one in ``system.posix_acl_default`` (acl(5)), in the layout of
``include/uapi/linux/posix_acl_xattr.h``: a little-endian u32 version (2), then one 8-byte
entry per line of the ACL (u16 tag, u16 permissions, u32 uid or gid), sorted by tag, then id.
A file with no extended ACL has no attribute: its ACL is its mode's three entries.
``os.getxattr`` / ``os.setxattr`` read and write it. Hand-rolled because no library can be
counted on: the ``setfacl`` program (Debian's ``acl`` package) is not on a fresh machine or
in a slim image, ``pylibacl`` ships only as a source package that needs libacl's headers and
a compiler, and ``libacl.so`` through ctypes is missing from musl images. The attribute's
layout is the kernel's stable ABI; this module is its 100 lines.

What :func:`grant` writes follows ``setfacl -m``: the user's entry is added (or widened),
and the mask grows by the bits added — never narrowed, never recomputed — so every other
entry keeps the rights it had. A grant a user already has (through the mode's "other" bits,
say) writes nothing. Where a file system keeps no ACLs (``EOPNOTSUPP``) the error goes up:
the caller says which folder could not be opened.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from pathlib import Path

__all__ = ["READ", "SEARCH", "WRITE", "allows", "close_to_others", "grant"]

READ, WRITE, SEARCH = 4, 2, 1
"""Permission bits of an ACL entry (a folder's "execute" is the right to cross it)."""

_ACCESS, _DEFAULT = "system.posix_acl_access", "system.posix_acl_default"
_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NO_ID = 0xFFFFFFFF
_Acl = dict[tuple[int, int], int]  # (tag, id) -> permission bits


def _read(path: Path, name: str, mode: int) -> _Acl:
    """The ACL ``name`` of ``path``; for a missing access ACL, the one its mode makes."""
    try:
        raw = os.getxattr(path, name)
    except OSError as exc:
        if exc.errno != errno.ENODATA:
            raise
        raw = b""
    if not raw:
        if name == _DEFAULT:
            return {}
        return {(_USER_OBJ, _NO_ID): (mode >> 6) & 7, (_GROUP_OBJ, _NO_ID): (mode >> 3) & 7,
                (_OTHER, _NO_ID): mode & 7}
    (version,) = struct.unpack_from("<I", raw)
    if version != _VERSION or (len(raw) - 4) % 8:
        raise OSError(errno.EINVAL, f"unknown ACL layout (version {version})", str(path))
    return {(tag, ident): perm
            for tag, perm, ident in struct.iter_unpack("<HHI", raw[4:])}


def _write(path: Path, name: str, acl: _Acl) -> None:
    entries = b"".join(struct.pack("<HHI", tag, perm, ident)
                       for (tag, ident), perm in sorted(acl.items()))
    os.setxattr(path, name, struct.pack("<I", _VERSION) + entries)


def _has(acl: _Acl, st: os.stat_result, uid: int, gid: int, perms: int) -> bool:
    """Whether ``uid`` (with the one group ``gid``) may do ``perms``, as the kernel decides
    (acl(5), "access check algorithm")."""
    if uid == st.st_uid:
        return acl[(_USER_OBJ, _NO_ID)] & perms == perms
    mask = acl.get((_MASK, _NO_ID), 7)
    if (_USER, uid) in acl:
        return acl[(_USER, uid)] & mask & perms == perms
    groups = [perm for (tag, ident), perm in acl.items()
              if (tag == _GROUP_OBJ and gid == st.st_gid) or (tag == _GROUP and ident == gid)]
    if groups:
        return any(perm & mask & perms == perms for perm in groups)
    return acl[(_OTHER, _NO_ID)] & perms == perms


def allows(path: Path, uid: int, gid: int, perms: int) -> bool:
    """Whether ``uid`` (whose one group is ``gid``) has ``perms`` on ``path`` now."""
    st = os.stat(path)
    return _has(_read(path, _ACCESS, st.st_mode), st, uid, gid, perms)


def _with_user(acl: _Acl, uid: int, perms: int) -> _Acl:
    """``acl`` with ``uid``'s entry widened by ``perms`` and the mask by as much."""
    acl = dict(acl)
    acl[(_USER, uid)] = acl.get((_USER, uid), 0) | perms
    if (_MASK, _NO_ID) in acl:
        acl[(_MASK, _NO_ID)] |= perms
    else:  # the first named entry: the mask covers the owning group and it
        acl[(_MASK, _NO_ID)] = acl[(_GROUP_OBJ, _NO_ID)] | perms
    return acl


def grant(path: Path, uid: int, gid: int, perms: int, *, inherit: bool = False) -> bool:
    """Let ``uid`` do ``perms`` on ``path`` (as ``setfacl -m u:UID:PERMS``), keeping every
    other entry; with ``inherit``, on a folder, whatever is made in it later too (its
    default ACL: ``setfacl -d -m``).

    Args:
        path: a file or folder (a symbolic link is followed).
        uid, gid: the user and its one group (a right it has through its group counts).
        perms: :data:`READ`, :data:`WRITE`, :data:`SEARCH`, or'ed.

    Returns:
        Whether anything was written (False: it had those rights already).

    Raises:
        OSError: the file is gone, or its file system keeps no ACLs (``EOPNOTSUPP``).
    """
    st = os.stat(path)
    written = False
    access = _read(path, _ACCESS, st.st_mode)
    if not _has(access, st, uid, gid, perms):
        _write(path, _ACCESS, _with_user(access, uid, perms))
        written = True
    if inherit and stat.S_ISDIR(st.st_mode):
        default = _read(path, _DEFAULT, st.st_mode)
        if not default:  # as setfacl: it starts from the folder's own base entries
            default = {key: perm for key, perm in access.items()
                       if key[0] in (_USER_OBJ, _GROUP_OBJ, _OTHER)}
        if default.get((_USER, uid), 0) & default.get((_MASK, _NO_ID), 0) & perms != perms:
            _write(path, _DEFAULT, _with_user(default, uid, perms))
            written = True
    return written


def close_to_others(path: Path, *, inherit: bool = False) -> None:
    """Take every right from "other" users on ``path`` (``chmod o-rwx``); with ``inherit``,
    on a folder, from whatever is made in it later too (its default ACL's "other" entry).

    Named entries stay: a user granted a right keeps it.

    Raises:
        OSError: as :func:`grant`.
    """
    st = os.stat(path)
    if st.st_mode & 0o007:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o007)
    if inherit and stat.S_ISDIR(st.st_mode):
        default = _read(path, _DEFAULT, st.st_mode)
        if not default:
            default = {key: perm for key, perm in _read(path, _ACCESS, st.st_mode).items()
                       if key[0] in (_USER_OBJ, _GROUP_OBJ, _OTHER)}
        elif default[(_OTHER, _NO_ID)] == 0:
            return
        default[(_OTHER, _NO_ID)] = 0
        _write(path, _DEFAULT, default)
