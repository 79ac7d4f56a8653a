"""``make bench``: run every ``bench/bench_*.py``, print one table, write ``bench/results.json``.

``python bench/run.py --quick`` (the default of ``make bench``) keeps every
script short; without it each runs its full size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _results import print_table

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    results = HERE / "results.json"
    results.write_text("[]\n")
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        command = [sys.executable, str(script), "--json", str(results)]
        if args.quick:
            command.append("--quick")
        if subprocess.run(command, cwd=HERE.parent).returncode != 0:
            failed.append(script.name)
    print()
    print_table(json.loads(results.read_text()))
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
