"""The shared shape of benchmark results: ``bench/results.json`` rows and the table.

A row is ``{"name", "value", "unit", "baseline", "ratio", "target", "met"}``:
``baseline`` is the same figure for the thing we compare with, measured in
the same run (or a budget), ``ratio`` is value / baseline, ``target`` is the
ratio (or value) to reach, and ``met`` says whether it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["append_rows", "print_table", "report", "row"]


def row(name: str, value: float, unit: str, baseline: float | None, target: float | None,
        *, met: bool | None = None) -> dict[str, Any]:
    """One result; ``met`` defaults to ``ratio >= target`` when both are known."""
    ratio = value / baseline if baseline else None
    if met is None and target is not None:
        met = (ratio if ratio is not None else value) >= target
    return {"name": name, "value": round(value, 4), "unit": unit,
            "baseline": None if baseline is None else round(baseline, 4),
            "ratio": None if ratio is None else round(ratio, 4),
            "target": target, "met": met}


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Add rows to a results file (a JSON list), creating it if need be."""
    existing = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps(existing + rows, indent=2) + "\n")


def print_table(rows: list[dict[str, Any]]) -> None:
    """The one table of ``make bench``."""
    print(f"{'figure':62} {'value':>14} {'baseline':>12} {'ratio':>7} {'target':>7}  met")
    for r in rows:
        def fmt(x: Any, spec: str) -> str:
            return "-" if x is None else format(x, spec)
        print(f"{r['name'][:62]:62} {fmt(r['value'], ',.4g'):>10} {r['unit'][:3]:3} "
              f"{fmt(r['baseline'], ',.4g'):>12} {fmt(r['ratio'], '.2f'):>7} "
              f"{fmt(r['target'], '.2f'):>7}  "
              f"{'-' if r['met'] is None else ('yes' if r['met'] else 'NO')}")


def report(rows: list[dict[str, Any]], json_path: Path | None) -> int:
    """Print each row on a line, append them to ``json_path`` (when given), and return the
    script's exit status: 1 when a figure missed its target, else 0."""
    for r in rows:
        print(f"{r['name']}: {r['value']:.3f} {r['unit']}, baseline {r['baseline']}, "
              f"ratio {r['ratio']} (target {r['target']}), met: {r['met']}")
    if json_path:
        append_rows(json_path, rows)
    return 0 if all(r["met"] is not False for r in rows) else 1
