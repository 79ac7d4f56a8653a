"""What a root server opens to its trainer user: ACL entries for that one user, the entries
already there kept, crossing without listing, private roots (alallo/executors/_acl.py,
_reach.py). The kernel is the judge: another user tries each path."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from alallo.executors import TrainerUser, close_root, open_tree, open_way
from alallo.executors._acl import READ, SEARCH, allows, grant
from alallo.executors._reach import crossings

pytestmark = pytest.mark.unit

NOBODY = pwd.getpwnam("nobody")
OTHER = TrainerUser(name="nobody", uid=NOBODY.pw_uid, gid=NOBODY.pw_gid)
ROOT = os.geteuid() == 0


def as_other(*command: str) -> subprocess.CompletedProcess[str]:
    """``command`` run as :data:`OTHER` (as this user when not root: what it may is then
    read from the ACL alone, :func:`allows`)."""
    ids = {"user": OTHER.uid, "group": OTHER.gid, "extra_groups": []} if ROOT else {}
    return subprocess.run(command, capture_output=True, text=True, check=False,
                          **ids)  # type: ignore[call-overload]


def test_a_way_lets_the_user_cross_folders_it_may_not_list_and_keeps_their_entries(
        tmp_path: Path) -> None:
    private = tmp_path / "private"
    (private / "lib").mkdir(parents=True)
    private.chmod(0o700)
    (private / "lib" / "module.py").write_text("x = 1\n")
    assert grant(private, 12345, 12345, READ)  # someone else's entry, there before
    open_way(OTHER, private / "lib" / "module.py")
    assert allows(private, 12345, 12345, READ), "the entry there before is kept"
    assert allows(private, OTHER.uid, OTHER.gid, SEARCH)
    assert not allows(private, OTHER.uid, OTHER.gid, READ)
    assert not grant(private, OTHER.uid, OTHER.gid, SEARCH), "granted once, written once"
    if ROOT:
        assert as_other("cat", str(private / "lib" / "module.py")).stdout == "x = 1\n"
        assert as_other("ls", str(private)).returncode != 0, "crossed, never listed"


def test_the_way_follows_symbolic_links_to_their_targets(tmp_path: Path) -> None:
    (tmp_path / "real" / "bin").mkdir(parents=True)
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "python").symlink_to(tmp_path / "real" / "bin" / "python3")
    (tmp_path / "real" / "bin" / "python3").symlink_to("python3.11")
    found = crossings(tmp_path / "venv" / "python")
    assert {tmp_path / "venv", tmp_path / "real", tmp_path / "real" / "bin"} <= set(found)
    assert Path("/") in found and tmp_path / "venv" / "python" not in found


def test_a_tree_is_the_users_to_write_now_and_later(tmp_path: Path) -> None:
    tree = tmp_path / "cache" / "hub"
    (tree / "old").mkdir(parents=True)
    (tree / "old" / "blob").write_text("weights")
    tmp_path.chmod(0o700)
    open_tree(OTHER, tree)
    (tree / "later").mkdir()  # made by the server after the start
    for folder in (tree / "old", tree / "later"):
        assert allows(folder, OTHER.uid, OTHER.gid, READ | SEARCH | 2)
    if ROOT:
        done = as_other("sh", "-c", f"echo new > {tree}/later/blob && cat {tree}/old/blob")
        assert done.returncode == 0 and done.stdout == "weights", done.stderr


def test_a_private_root_is_crossed_not_listed_and_what_is_made_in_it_is_closed(
        tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "jobs").mkdir(parents=True)
    (root / "api-key").write_text("sk-secret")
    (root / "api-key").chmod(0o644)
    open_way(OTHER, root / "jobs")
    close_root(OTHER, root, ["jobs"])
    (root / "alallo.db").write_text("rows")  # made later, with the usual 0644
    for name in ("api-key", "alallo.db"):
        assert not allows(root / name, OTHER.uid, OTHER.gid, READ), name
    assert allows(root / "jobs", OTHER.uid, OTHER.gid, READ), "left as it was"
    if ROOT:
        assert as_other("cat", str(root / "alallo.db")).returncode != 0
        assert as_other("ls", str(root)).returncode != 0
        assert as_other("ls", str(root / "jobs")).returncode == 0
