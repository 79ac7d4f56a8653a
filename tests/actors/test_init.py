"""The public surface of :mod:`actors`: sorted, complete, and independent of the app."""

from __future__ import annotations

import ast
from pathlib import Path

import actors

PACKAGE = Path(actors.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    assert actors.__all__ == sorted(actors.__all__)
    public = {name for name in vars(actors) if not name.startswith("_")}
    assert public == set(actors.__all__)


def test_every_export_has_a_docstring() -> None:
    for name in actors.__all__:
        obj = getattr(actors, name)
        if callable(obj) and not name.isupper():
            assert obj.__doc__, name


def test_actors_imports_nothing_from_the_app() -> None:
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in {"alallo", "gateway"}, (path, name)
