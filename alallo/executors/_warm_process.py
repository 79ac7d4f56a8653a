"""The warm trainer process: a trainer's libraries imported once, one process forked per job.

``python -m alallo.executors._warm_process FD MODULE`` imports ``MODULE`` (a built-in
trainer, e.g. ``alallo.trainers.trl``) and the libraries it needs (torch,
transformers, datasets, peft, TRL), then serves requests on the Unix socket
``FD`` (``SOCK_SEQPACKET``, from the server: :mod:`alallo.executors._warm`). Each
request is one JSON object (argv, cwd, env, title, user) with two file descriptors
passed alongside (``SCM_RIGHTS``): the write end of the trainer's output pipe
and the write end of a status pipe. For each, the process forks a child that
runs ``MODULE.main(argv)`` with the output pipe as stdout and stderr, and
writes ``pid <n>`` on the status pipe, then ``exit <code>`` once it has reaped
the child (``code`` as :attr:`subprocess.Popen.returncode`: negative for a
signal), or ``fail <reason>`` when it cannot fork (out of processes or file
descriptors: the job starts cold). A status pipe the server has closed already (the job was cancelled
while this process was still importing) gets its child killed at once. A trainer thus starts in milliseconds instead of seconds of imports.

This is the design of :mod:`multiprocessing`'s ``forkserver`` (a server
process that imports the modules named by ``set_forkserver_preload`` and
forks a child per request, receiving its file descriptors over a Unix
socket). That module is not used as is: its children run a pickled function
with a result channel back to the parent, while a trainer needs its own
session, a parent-death signal, a per-job cwd, environment and stdout, and
an exit status the server can read without being its parent.

Each child keeps the guarantees of a cold-started trainer
(:mod:`alallo.executors._local`): it leads its own process group
(``setsid``), so stopping it stops whatever it started; it gets
``PR_SET_PDEATHSIG`` = SIGKILL, and so does this process, so ``kill -9`` of
the server kills this process and that kills every child; its command line
(``setproctitle``) reads as the cold command would, config path included.

CUDA is never initialised here: only imports run before forking (a CUDA
context does not survive ``fork``), so each child sets up its own device.
Environment variables that libraries read at import time (``HF_HOME``, the
offline switches) are those of the server when this process started; each
child then gets its job's full environment before the trainer runs.

Its own code starts no thread (one ``selectors`` loop over the socket and a
pidfd per child): forking while another thread holds a lock is how forked
children deadlock. The imports leave two idle threads (one of torch's, and
jemalloc's background thread from pyarrow), as in any process that forks
torch's ``DataLoader`` workers after importing torch; no torch operation runs
here, so its OpenMP pool (not fork-safe) is first made in each child. It
exits when the server closes the socket, or with the server.
"""

from __future__ import annotations

import importlib
import json
import os
import selectors
import signal
import socket
import sys
import traceback
import warnings
from typing import Any

from alallo.executors._posix import die_with_parent, take_on_user
from alallo.trainers._env import quiet_process

__all__ = ["PRELOAD", "main"]

PRELOAD: dict[str, tuple[str, ...]] = {
    "alallo.trainers.trl": (
        "torch", "transformers", "datasets", "peft", "trl",
        "trl.trainer.sft_config", "trl.trainer.sft_trainer", "alallo.trainers.trl",
        "trl.trainer.dpo_trainer", "trl.trainer.grpo_trainer",  # the other methods' trainers
        "alallo.trainers.graders._grade",  # reinforcement's rewards: Jinja, the metrics
        "transformers.models.gpt2.modeling_gpt2",  # the built-in model's architecture
    ),
    "alallo.trainers.simulated": ("alallo.trainers.simulated",),
}
"""What a warm process imports before forking, per trainer module (another module: itself).

Each module has ``main(argv) -> int``, as the built-in trainers do."""

_MAX_REQUEST = 1 << 20


def main(argv: list[str] | None = None) -> int:
    """Preload ``argv[1]``'s libraries, then fork a trainer per request on the socket ``argv[0]``.

    Returns:
        0 when the server closed the socket; 2 for a wrong command line.
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[0].isdigit():
        print("usage: python -m alallo.executors._warm_process FD MODULE", file=sys.stderr)
        return 2
    sock = socket.socket(fileno=int(args[0]))
    module = args[1]
    quiet_process()  # nor bitsandbytes' warning as peft imports it (in the server's output)
    warnings.filterwarnings("ignore")  # import-time notices speak to no one here
    import setproctitle

    # Set up now, before any fork: it takes over the memory of argv and of the
    # environment strings, which a child's environment change would move.
    setproctitle.getproctitle()

    for name in PRELOAD.get(module, (module,)):
        importlib.import_module(name)
    _serve(sock, module)
    return 0


def _serve(sock: socket.socket, module: str) -> None:
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ, None)
    children: dict[int, tuple[int, int]] = {}  # pidfd -> (pid, status fd)
    while True:
        for key, _ in selector.select():
            if key.data is None:
                try:
                    message, fds, _, _ = socket.recv_fds(sock, _MAX_REQUEST, 2)
                except (ConnectionResetError, BrokenPipeError):
                    message, fds = b"", []
                if not message:
                    return  # the server is gone; the children die with us
                if len(fds) != 2:
                    for fd in fds:
                        os.close(fd)
                    continue
                output, status = fds
                owned = [sock.fileno(), selector.fileno(), *children, status,
                         *(s for _, s in children.values())]
                try:
                    pid = _fork_trainer(module, json.loads(message), output, owned)
                    pidfd = _pidfd(pid)
                except OSError as exc:  # out of processes or file descriptors: start it cold
                    _write(status, f"fail {exc}\n")
                    os.close(status)
                    continue
                finally:
                    os.close(output)
                if not _write(status, f"pid {pid}\n"):
                    os.kill(pid, signal.SIGKILL)  # the job gave up waiting for it
                children[pidfd] = (pid, status)
                selector.register(pidfd, selectors.EVENT_READ, pid)
            else:
                pidfd = key.fd
                pid, status = children.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, wait_status = os.waitpid(pid, 0)
                _write(status, f"exit {os.waitstatus_to_exitcode(wait_status)}\n")
                os.close(status)


def _pidfd(pid: int) -> int:
    """A pidfd of the new child; if none can be had, the child is killed and reaped."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise


def _write(fd: int, text: str) -> bool:
    try:
        os.write(fd, text.encode())
    except BrokenPipeError:
        return False  # the server stopped listening for this trainer
    return True


def _fork_trainer(module: str, request: dict[str, Any], output: int, owned: list[int]) -> int:
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        if request.get("user"):  # before the parent-death signal: a new user clears it
            take_on_user(*request["user"])
        die_with_parent()
        if os.getppid() != parent:  # the warm process died before the signal was armed
            os._exit(137)
        for fd in owned:
            os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(null)
        os.close(output)
        import setproctitle

        setproctitle.setproctitle(request["title"])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.argv = [module, *request["argv"]]
        code = importlib.import_module(module).main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)  # never return into the server loop, nor run its atexit hooks
    raise AssertionError("unreachable")


if __name__ == "__main__":
    sys.exit(main())
