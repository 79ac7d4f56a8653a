"""The process a service's Ray job runs on its node: it picks a free port there, starts the
service listening on it, and says where (:mod:`alallo.executors._ray_services`).

``python -m alallo.executors._service_launcher <service dir>/service.json``. The service file,
written by the server on the storage every node shares (readable by its owner only: it holds
the service's API key), gives the command, its environment and the node's address. The
launcher:

- picks a port free at that address and starts ``command --host HOST --port PORT`` with a
  scrubbed environment (keeping the ``CUDA_VISIBLE_DEVICES`` Ray gave this job) in the
  service's folder, in a process group of its own that dies with the launcher, its output
  appended to ``service.log`` there;
- writes ``HOST:PORT`` to the file ``address`` there (atomically), which the server waits for;
- stops the service's whole group when Ray stops the job (SIGTERM, then SIGKILL after the
  grace period), and writes its exit status to ``exit-status`` when it ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

from ._env import scrubbed_environment
from ._posix import die_with_parent, free_port, kill_group, stop_group, write_atomically

__all__ = ["ADDRESS", "EXIT_STATUS", "main"]

ADDRESS = "address"
"""Written (atomically) in the service's folder once it started: ``HOST:PORT``."""
EXIT_STATUS = "exit-status"
"""Written (atomically) in the service's folder when the launcher ends: its exit status."""


def main(argv: list[str]) -> int:
    """Run the service of one service file; its exit status (or the launcher's own)."""
    service_file = Path(argv[1])
    try:
        launch = json.loads(service_file.read_text())
    except (OSError, ValueError) as exc:
        print(f"cannot read {service_file} on this node ({exc}): the directory "
              "ALALLO_SHARED_DIR names must be shared with every Ray node", flush=True)
        return 2
    cwd = service_file.parent
    env = dict(launch["env"])
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # the devices Ray gave this job
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    host, grace_s = launch["host"], float(launch.get("grace_s", 5.0))
    port = free_port(host)
    started: list[subprocess.Popen[bytes]] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        for service in started:
            stop_group(service, grace_s)
        write_atomically(cwd / EXIT_STATUS, str(128 + signum))
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with (cwd / "service.log").open("ab") as output:
        service = subprocess.Popen(
            [*launch["command"], "--host", host, "--port", str(port)], cwd=cwd,
            env=scrubbed_environment(env), stdin=subprocess.DEVNULL, stdout=output,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent)
    started.append(service)
    write_atomically(cwd / ADDRESS, f"{host}:{port}")
    code = service.wait()
    kill_group(service.pid, signal.SIGKILL)  # its children (vLLM's engine core)
    write_atomically(cwd / EXIT_STATUS, str(code))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
