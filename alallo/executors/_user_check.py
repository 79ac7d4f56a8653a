"""Can the trainer user run a trainer here? Asked once, when a root server starts.

The interpreter that runs the built-in trainers is asked, first as the server (root), what it
reads: its prefix, its library, the trainer package and the training libraries
(:func:`interpreter_paths`: the server then opens the way to each, :mod:`alallo.executors._reach`).
Then the same question is put to it as the trainer user (:func:`check_trainer_user`), in a
folder handed to that user as a job's is, and it must find the same files, read them and
write that folder and the caches a trainer writes. Anything else stops the server with one
line saying what the user could not reach: better than every job failing later as a
platform error (a Python that cannot read its library falls back to another one, or fails
with ``LookupError: unknown encoding``).

Only ``find_spec`` and a read of each module's file: importing torch would add seconds to
every start.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._env import TrainerUser

__all__ = ["CHECK_TIMEOUT_S", "CannotRunTrainers", "Interpreter", "check_trainer_user",
           "interpreter_paths"]

CHECK_TIMEOUT_S = 60.0
"""How long one run of the check may take (s); a busy machine's cold start is seconds."""

MODULES = ("encodings", "json", "alallo.trainers", "pydantic", "torch", "transformers",
           "datasets", "peft", "trl")
"""What a built-in trainer imports first: the standard library (two of its modules that are
not frozen into the interpreter), the trainer package, and the training libraries (those
installed)."""

_PROBE = """
import importlib.util, json, os, sys, tempfile
def origin(name):
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:
        return None
    return spec.origin if spec is not None and spec.has_location else None
found = {name: origin(name) for name in %r}
for path in found.values():
    if path:
        open(path, "rb").close()
for folder in sys.argv[1:]:
    fd, name = tempfile.mkstemp(dir=folder, prefix=".alallo-check-")
    os.close(fd)
    os.unlink(name)
print(json.dumps({"modules": found, "prefix": sys.prefix, "base_prefix": sys.base_prefix,
                  "path": [p for p in sys.path if os.path.isabs(p)]}))
""" % (MODULES,)


class CannotRunTrainers(Exception):
    """The trainer user cannot run a trainer here; the message (one line) says why."""


@dataclass(frozen=True)
class Interpreter:
    """What the trainers' interpreter reads, as the server sees it."""

    executable: Path
    prefix: str
    base_prefix: str
    path: list[str]
    """Its ``sys.path`` (absolute entries)."""
    modules: dict[str, str | None]
    """The file of each of :data:`MODULES` (None: not installed)."""

    def reads(self) -> list[Path]:
        """Every path the trainer user needs a way to."""
        paths = [self.executable, Path(self.prefix), Path(self.base_prefix),
                 *map(Path, self.path), *(Path(m) for m in self.modules.values() if m)]
        return [p for p in dict.fromkeys(paths) if p.exists()]


def _run(python: Path, user: TrainerUser | None, env: Mapping[str, str], cwd: Path,
         writable: Sequence[Path]) -> dict[str, object]:
    who = f"as {user.name}" if user else "as the server"
    ids = ({"user": user.uid, "group": user.gid, "extra_groups": []} if user else {})
    try:
        done = subprocess.run(  # type: ignore[call-overload]
            [str(python), "-c", _PROBE, *map(str, writable)], cwd=cwd, env=dict(env),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S,
            check=False, **ids)
    except subprocess.TimeoutExpired:
        raise CannotRunTrainers(f"{python} did not answer {who} within "
                                f"{CHECK_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise CannotRunTrainers(f"cannot run {python} {who}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        said = next((line for line in reversed(lines) if not line.startswith(" ")
                     and "Error" in line), lines[-1] if lines else f"exit {done.returncode}")
        raise CannotRunTrainers(f"{python} fails {who}: {said.strip()}")
    try:
        seen = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CannotRunTrainers(f"{python} {who} did not say what it reads "
                                f"(it printed {done.stdout[-200:]!r})") from None
    return dict(seen)


def interpreter_paths(python: Path, env: Mapping[str, str], cwd: Path) -> Interpreter:
    """Ask ``python`` (run as the server, with a trainer's environment ``env``) what it reads.

    Raises:
        CannotRunTrainers: it does not run, or the trainer package is not found.
    """
    seen = _run(python, None, env, cwd, [])
    modules = dict(seen["modules"])  # type: ignore[call-overload]
    if modules.get("alallo.trainers") is None:
        raise CannotRunTrainers(f"{python} does not find alallo.trainers "
                                "(ALALLO_PYTHON must be an interpreter alallo is installed in)")
    return Interpreter(executable=python, prefix=str(seen["prefix"]),
                       base_prefix=str(seen["base_prefix"]),
                       path=list(seen["path"]), modules=modules)  # type: ignore[call-overload]


def check_trainer_user(expected: Interpreter, user: TrainerUser, env: Mapping[str, str],
                       cwd: Path, writable: Sequence[Path]) -> None:
    """Run the interpreter as ``user`` in ``cwd`` (a folder handed to it as a job's is): it
    must find and read what it found as the server (``expected``) and write each folder of
    ``writable``.

    Raises:
        CannotRunTrainers: what it could not reach, in one line.
    """
    seen = _run(expected.executable, user, env, cwd, writable)
    for key in ("base_prefix", "prefix"):
        if seen[key] != getattr(expected, key):
            raise CannotRunTrainers(
                f"as {user.name}, {expected.executable} does not reach its own library "
                f"({key} {seen[key]}, not {getattr(expected, key)})")
    modules: dict[str, str | None] = dict(seen["modules"])  # type: ignore[call-overload]
    for name, path in expected.modules.items():
        if modules.get(name) != path:
            found = f"finds {modules.get(name)}" if modules.get(name) else "does not find it"
            raise CannotRunTrainers(
                f"as {user.name}, {expected.executable} {found}, not {name} at {path}")
