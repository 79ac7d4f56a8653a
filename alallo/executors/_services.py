"""Services: long-running processes that serve the server (vLLM engines), on this machine or
on a node of the Ray cluster, started where the scheduler placed them (issue 33).

A trainer is a run that ends; a service listens on an address until it is let go of. Both
start the same way: a scrubbed environment, a folder of their own, a process group that is
stopped as a whole, never outliving the server on this machine. :class:`LocalServices` starts
a child of this server listening on a Unix socket;
:class:`~alallo.executors._ray_services.RayServices` a Ray job on a planned node, listening on
that node's address. The command is given without its address: the place appends ``--uds
PATH`` or ``--host HOST --port PORT`` (a port free there).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ._local import start_service
from ._posix import kill_group

__all__ = ["LocalService", "LocalServices", "Service", "ServiceLaunch", "Services"]

_PREFIX = "alallo-services-"
"""The socket folders' names: ``alallo-services-<server pid>-<random>``, in the temp folder."""
OUTPUT = "service.log"
"""A service's output (stdout and stderr), in its folder."""


@dataclass(frozen=True)
class ServiceLaunch:
    """One service to start.

    Attributes:
        name: unique among the services running (a Ray job's id is made of it).
        command: its command line, without the address (``--host H --port P`` are appended).
        cwd: its folder (on Ray, on the storage every node shares); its output goes to
            ``service.log`` there.
        env: its whole environment (already scrubbed).
        node: the pool's node it was placed on (a Ray node id on Ray; ignored here).
        device_type: ``cpu`` or a GPU type; ``devices``: how many of them it holds.
    """

    name: str
    command: list[str]
    cwd: Path
    env: Mapping[str, str]
    node: str = "local"
    device_type: str = "cpu"
    devices: int = 1
    secrets: Mapping[str, str] = field(default_factory=dict)
    """Variables added to ``env`` that no file may hold in the clear where others read."""

    @property
    def output(self) -> Path:
        """Its output file."""
        return self.cwd / OUTPUT


class Service(Protocol):
    """A started service: it listens on ``uds`` (a Unix socket's path, on this machine) when
    that is set, else on ``host``:``port``."""

    host: str
    port: int
    uds: str | None

    @property
    def pid(self) -> int | None:
        """Its process group on this machine (None: it runs on another node)."""

    def poll(self) -> int | None:
        """Its exit status once it has ended, else None (never blocks)."""

    async def wait(self) -> int | None:
        """Wait until it ends; its exit status (None: its node was lost)."""

    def kill(self) -> None:
        """Stop it and its children (at once, or as :meth:`wait` goes on)."""


class Services(Protocol):
    """Where services start (:class:`LocalServices`, or Ray's)."""

    async def start(self, launch: ServiceLaunch) -> Service:
        """Start ``launch``; the service, once its address is known (not yet answering).

        Raises:
            OSError: it could not start (its program is missing, the node refused it).
        """

    async def reap_stale(self) -> None:
        """Stop the services a server before this one left running."""

    def close(self) -> None:
        """Forget what the services left once they have all stopped."""


class LocalService:
    """A service that is a child of this server (:func:`start_service`)."""

    def __init__(self, child: object, uds: str) -> None:
        self._child = child
        self.host, self.port = "localhost", 0
        self.uds: str | None = uds

    @property
    def pid(self) -> int:
        return self._child.pid  # type: ignore[attr-defined,no-any-return]

    def poll(self) -> int | None:
        return self._child.poll()  # type: ignore[attr-defined,no-any-return]

    async def wait(self) -> int | None:
        return await self._child.wait()  # type: ignore[attr-defined,no-any-return]

    def kill(self) -> None:
        kill_group(self.pid, signal.SIGKILL)


class LocalServices:
    """Services as children of this server (they die with it), each listening on a Unix
    socket in a folder only this server's user may enter (``--uds PATH`` is appended):
    no other user of the machine can even connect, and a request costs no TCP handshake
    (measured: a new loopback TCP connection per request was ~40 % of the server's event
    loop at 64 streamed requests at once, ``bench/bench_serving.py``)."""

    def __init__(self) -> None:
        self._sockets: Path | None = None

    async def start(self, launch: ServiceLaunch) -> LocalService:
        launch.cwd.mkdir(parents=True, exist_ok=True)
        if self._sockets is None:  # short (a socket's path is at most 107 bytes), private
            self._sockets = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        uds = self._sockets / f"{launch.name}.sock"
        uds.unlink(missing_ok=True)
        command = [*launch.command, "--uds", str(uds)]
        with launch.output.open("ab") as output:
            child = await start_service(command, launch.cwd, {**launch.env, **launch.secrets},
                                        output.fileno())
        return LocalService(child, str(uds))

    def close(self) -> None:
        """Remove the sockets' folder."""
        if self._sockets is not None:
            shutil.rmtree(self._sockets, ignore_errors=True)

    async def reap_stale(self) -> None:
        """Remove the socket folders of servers that are gone (a server killed with SIGKILL
        leaves its folder; its services died with it, and their own children are the
        engines' business: :func:`alallo.serving._vllm_process.reap_stale`)."""
        for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
            owner = folder.name.removeprefix(_PREFIX).split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists() \
                    and folder.stat().st_uid == os.getuid():
                shutil.rmtree(folder, ignore_errors=True)
