"""A trainer's config as alallo wrote it, rewritten for a run outside alallo (the baselines)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["fresh_config"]


def fresh_config(template: Path, workdir: Path) -> Path:
    """Copy ``template`` (an attempt's ``config.json``) to ``workdir/attempt-1/config.json``
    with its own output and checkpoint directories under ``workdir`` and nothing to resume
    from, so the same training runs again from the start; returns the new file's path."""
    config = json.loads(template.read_text())
    attempt = workdir / "attempt-1"
    attempt.mkdir(parents=True)
    config.update(output_dir=str(workdir / "model"), checkpoint_dir=str(attempt / "checkpoints"),
                  resume_from=None)
    path = attempt / "config.json"
    path.write_text(json.dumps(config, indent=2))
    return path
