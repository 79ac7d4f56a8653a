"""The server's helper programs stay offline: nothing they import asks the Hugging Face hub.

peft imports bitsandbytes, which on a CPU with AVX-512 BF16 asks the hub for a faster kernel
(``kernels-community/quantization-bitsandbytes``) as it is imported, unless the hub client is
offline. The merge program (``alallo.trainers.merge``) reads two local folders: it must ask
nothing, whatever the server's environment says of the hub.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


class _Recorder(http.server.BaseHTTPRequestHandler):
    paths: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.paths.append(self.path)
        self.send_response(404)
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hub() -> Iterator[tuple[str, list[str]]]:
    """A "hub" that answers 404 to everything and records what it was asked."""
    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"paths": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_merge_program_asks_the_hub_nothing(hub: tuple[str, list[str]],
                                                tmp_path: Path) -> None:
    url, seen = hub
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("HF_", "TRANSFORMERS_"))}  # online, as far as it is told
    env |= {"HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(
        [sys.executable, "-m", "alallo.trainers.merge", str(tmp_path / "no-adapter"),
         str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120,
        check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"FileNotFoundError: [Errno 2] No such file or directory: "
        f"'{tmp_path / 'no-adapter' / 'adapter_config.json'}'"], "one line, the user's"
    assert seen == [], "nothing asked of the hub"
