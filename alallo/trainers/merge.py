"""``python -m alallo.trainers.merge ADAPTER_DIR OUT_DIR``: a LoRA adapter merged into its base.

Reads the base model's path from the adapter's ``adapter_config.json``
(``base_model_name_or_path``: the directory the trainer loaded), loads the base, applies the
adapter (``PeftModel.from_pretrained``), folds it into the weights (``merge_and_unload``) and
saves a plain ``transformers`` model with the tokenizer to OUT_DIR, loadable with
``AutoModelForCausalLM.from_pretrained`` as it is. Run by the server in a child process
(:mod:`alallo.runtime._fine_tuned`): torch is never imported by the server. Exit 1 with one
line on stderr when the adapter or its base cannot be read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ._env import quiet_process


def merge(adapter: Path, out: Path) -> None:
    """Merge the adapter at ``adapter`` into its base and save the model to ``out``.

    Raises:
        FileNotFoundError: no adapter there, or its base is gone.
    """
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((adapter / "adapter_config.json").read_text())
    base_path = config.get("base_model_name_or_path")
    if not base_path or not Path(base_path).is_dir():
        raise FileNotFoundError(f"the adapter's base model {base_path!r} is not on this server")
    base = AutoModelForCausalLM.from_pretrained(base_path)
    merged = PeftModel.from_pretrained(base, adapter).merge_and_unload()
    merged.save_pretrained(out)
    tokenizer_dir = adapter if (adapter / "tokenizer_config.json").is_file() else Path(base_path)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)


def main(argv: list[str]) -> int:
    """The command line: ``ADAPTER_DIR OUT_DIR``."""
    # Offline, as every trainer: the base and the adapter are local folders, and nothing
    # imported may fetch code from the hub (bitsandbytes asks it for a CPU kernel).
    quiet_process()  # the libraries' notices are not the user's error line
    try:
        merge(Path(argv[1]), Path(argv[2]))
    except (OSError, ValueError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
