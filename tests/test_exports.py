"""The public surface and the layering: gateway -> alallo -> actors, never back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import actors
import alallo
import alallo.trainers
import gateway

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("module", [actors, alallo, alallo.trainers, gateway])
def test_all_is_sorted_and_complete(module: object) -> None:
    names = list(module.__all__)  # type: ignore[attr-defined]
    assert names == sorted(names), "__all__ is sorted (plain string order)"
    for name in names:
        assert getattr(module, name).__doc__ or name.isupper(), f"{name} needs a docstring"


def imported_packages(package: str) -> dict[Path, set[str]]:
    found: dict[Path, set[str]] = {}
    for path in (REPO / package).rglob("*.py"):
        tree = ast.parse(path.read_text())
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[path] = names
    return found


def test_actors_knows_nothing_of_alallo_or_gateway() -> None:
    for path, names in imported_packages("actors").items():
        assert not names & {"alallo", "gateway"}, path


def test_alallo_never_imports_gateway_except_the_serve_command() -> None:
    allowed = REPO / "alallo" / "cli" / "_serve.py"
    for path, names in imported_packages("alallo").items():
        if path != allowed:
            assert "gateway" not in names, path


def test_trainers_stay_light() -> None:
    """The trainer package's protocol must not pull in torch (the simulator starts fast);
    trl.py and its parts (``_trl_*.py``, imported by trl.py only), and generate.py's
    (``_generate_*.py``) are torch's home."""
    for path in (REPO / "alallo" / "trainers").glob("_*.py"):
        if path.name == "_data.py" or path.name.startswith(("_trl_", "_generate_")):
            continue
        assert "torch" not in imported_packages("alallo/trainers").get(path, set()), path


def test_lazy_names_match_all() -> None:
    assert set(alallo._ORIGINS) == set(alallo.__all__)


def test_trainer_import_does_not_load_the_runtime() -> None:
    import subprocess
    import sys

    code = ("import sys, alallo.trainers.simulated; "
            "print(sorted(m for m in ('sqlalchemy', 'starlette', 'actors', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
