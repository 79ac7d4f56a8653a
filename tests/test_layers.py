"""The wings import one way (docs/architecture.md): each module imports its own wing or a
wing on a lower level, never one above it or a sibling on its own level, counting imports
inside functions and under ``TYPE_CHECKING``. The levels are LAYOUT.md's (§2)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent

LEVELS = {
    # 1: what every wing may use; none of these imports another
    "alallo._status": 1, "alallo._types": 1, "alallo._keys": 1, "alallo._ids": 1, "alallo._money": 1,
    "alallo._json": 1, "alallo._errors": 1, "alallo._lazy": 1, "alallo.trainers": 1, "actors": 1,
    "alallo.api": 1,
    # 2: the pure domain, where trainers run, and the clients (which stand apart)
    "alallo.jobs": 2, "alallo.executors": 2, "alallo.client": 2,
    # 3 and 4: where jobs can run, durable state, many processes, the settings
    "alallo.capacity": 3, "alallo.store": 3,
    "alallo.cluster": 4, "alallo.settings": 4,
    # 5, 6, 7: the engine, the HTTP gateway, the command line (only `serve` imports gateway)
    "alallo.runtime": 5, "gateway": 6, "alallo.cli": 7,
    # 6 too: the runtime seen from asyncio (guest mode), a front like the gateway
    "alallo.aio": 6,
}
SAME_UNIT = {"alallo._trainer_registry": "alallo.settings"}
"""Modules that belong to another unit: the trainers the settings register."""
ALLOWED = {("alallo.trainers", "alallo._json"), ("alallo.trainers", "alallo._lazy")}
"""Sideways on level 1, on purpose: the trainers' data reader refuses JSON nested too deep
as the server does (``_json`` is the standard library's ``json`` with a depth limit), and
the trainers' names load on first use as every wing's do (``_lazy``)."""


def _unit(module: str) -> str | None:
    for name, unit in SAME_UNIT.items():
        if module == name or module.startswith(name + "."):
            return unit
    found = [u for u in LEVELS if module == u or module.startswith(u + ".")]
    return max(found, key=len) if found else None


def _imports(path: Path, module: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1])
                if node.module:
                    names.add(f"{base}.{node.module}")
                else:
                    names |= {f"{base}.{alias.name}" for alias in node.names}
            elif node.module:
                names.add(node.module)
    return names


def _edges() -> list[tuple[str, str, str, str]]:
    edges = []
    for root in ("alallo", "actors", "gateway"):
        for path in (REPO / root).rglob("*.py"):
            relative = path.relative_to(REPO)
            if "migrations" in relative.parts:
                continue  # Alembic's scripts: loaded by Alembic, not imported
            parts = list(relative.with_suffix("").parts)
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            mine = _unit(module)
            for target in _imports(path, module):
                theirs = _unit(target)
                if mine and theirs and theirs != mine:
                    edges.append((module, target, mine, theirs))
    return edges


def test_every_module_belongs_to_a_wing() -> None:
    for root in ("alallo", "actors", "gateway"):
        for path in (REPO / root).glob("*.py"):
            module = f"{root}.{path.stem}" if path.stem != "__init__" else root
            if module in ("alallo", "alallo.__main__"):
                continue  # the package's public names, loaded on first use; `python -m alallo`
            assert _unit(module), f"{module} is in no wing of LEVELS"


def test_imports_go_down_only() -> None:
    upward = [f"{module} imports {target} ({mine}, level {LEVELS[mine]} -> {theirs}, "
              f"level {LEVELS[theirs]})"
              for module, target, mine, theirs in _edges()
              if LEVELS[theirs] >= LEVELS[mine] and (mine, theirs) not in ALLOWED]
    assert upward == []


def test_the_client_imports_only_the_apis_words() -> None:
    for module, target, mine, theirs in _edges():
        if mine == "alallo.client":
            assert LEVELS[theirs] == 1 and theirs != "alallo.trainers", f"{module} -> {target}"
        assert theirs != "alallo.client" or mine in ("alallo.cli",), f"{module} -> {target}"
