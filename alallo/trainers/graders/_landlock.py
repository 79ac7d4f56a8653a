"""Landlock (Linux ≥ 5.13): a process takes away its own access to the file system, and (ABI 4,
Linux 6.7) its TCP binds and connects, for itself and every process it starts, for good.

Why our own ctypes and not a package: the one Python binding on PyPI (``landlock``
1.0.0.dev5) is an alpha that knows the file-system rules only. Source: the kernel's
``Documentation/userspace-api/landlock.rst`` and ``include/uapi/linux/landlock.h``; syscall
numbers 444-446 on every architecture that has them.

Standard library only: the python grader's sandbox (:mod:`._sandbox`) imports it.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["abi", "restrict"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# File-system rights, by the ABI that brought them.
_FS = [(1, (1 << 13) - 1),  # execute, write/read file, read dir, remove dir/file, make *
       (2, 1 << 13),  # refer
       (3, 1 << 14),  # truncate
       (5, 1 << 15)]  # ioctl_dev
_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read_file, read_dir
_NET_TCP = (1 << 0) | (1 << 1)  # bind_tcp, connect_tcp (ABI 4)
_SCOPES = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)


class _Ruleset(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The Landlock ABI this kernel has (0: none)."""
    version = _libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def restrict(read: list[str], write: list[str]) -> int:
    """Leave this process (and its children) only reading ``read`` and reading and writing
    ``write`` (each a folder or a file, with what is beneath), no TCP bind or connect (ABI
    ≥ 4), no abstract Unix socket or signal outside itself (ABI ≥ 6). Irreversible.

    Returns:
        The ABI applied.

    Raises:
        OSError: the kernel has no Landlock (ABI 0), or refused a rule.
    """
    version = abi()
    if version < 1:
        raise OSError("this kernel has no Landlock")
    every = 0
    for since, rights in _FS:
        if version >= since:
            every |= rights
    ruleset = _Ruleset(handled_access_fs=every,
                       handled_access_net=_NET_TCP if version >= 4 else 0,
                       scoped=_SCOPES if version >= 6 else 0)
    size = ctypes.sizeof(_Ruleset) if version >= 6 else (16 if version >= 4 else 8)
    fd = _libc.syscall(_CREATE_RULESET, ctypes.byref(ruleset), ctypes.c_size_t(size),
                       ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for paths, rights in ((read, _READ), (write, every)):
            for path in paths:
                _allow(fd, path, rights)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if _libc.syscall(_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)
    return version


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):  # a file takes the file rights only
            rights &= (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
        rule = _PathBeneath(allowed_access=rights, parent_fd=target)
        if _libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                         ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
    finally:
        os.close(target)
