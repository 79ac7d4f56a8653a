"""Services: long-running processes that serve the server (vLLM engines), on this machine or
on a node of the Ray cluster, started where the scheduler placed them (issue 33).

A trainer is a run that ends; a service listens on an address until it is let go of. Both
start the same way: a scrubbed environment, a folder of their own, a process group that is
stopped as a whole, never outliving the server on this machine. :class:`LocalServices` starts
a child of this server listening on 127.0.0.1; :class:`~alallo.executors._ray_services.RayServices`
a Ray job on a planned node, listening on that node's address. The command is given without its
address: the place appends ``--host HOST --port PORT`` (a port free there).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ._local import start_service
from ._posix import free_port, kill_group

__all__ = ["LocalService", "LocalServices", "Service", "ServiceLaunch", "Services"]

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
    """A started service."""

    host: str
    port: int

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


class LocalService:
    """A service that is a child of this server (:func:`start_service`)."""

    def __init__(self, child: object, port: int) -> None:
        self._child = child
        self.host = "127.0.0.1"
        self.port = port

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
    """Services as children of this server, on 127.0.0.1 (they die with it)."""

    async def start(self, launch: ServiceLaunch) -> LocalService:
        launch.cwd.mkdir(parents=True, exist_ok=True)
        port = free_port()
        command = [*launch.command, "--host", "127.0.0.1", "--port", str(port)]
        with launch.output.open("ab") as output:
            child = await start_service(command, launch.cwd, {**launch.env, **launch.secrets},
                                        output.fileno())
        return LocalService(child, port)

    async def reap_stale(self) -> None:
        """Nothing to do here: a local service dies with its server (its engine's own
        children are the engines' business: :func:`alallo.serving._vllm_process.reap_stale`)."""
