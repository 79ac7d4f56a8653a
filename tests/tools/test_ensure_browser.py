"""tests/tools/ensure_browser.py as `make test` runs it: which Chromium, its line, and the
error that says what to install. Each run sees only the browsers a test gives it: its
PATH and Playwright's browser folder are the test's own, and installing is off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools import axe
from tools.ensure_browser import CHROMIUM_VARIABLE, INSTALL_VARIABLE, playwright_chromium

TOOL = Path(__file__).with_name("ensure_browser.py")
PRINT_CHOICE = [sys.executable, "-c", f"import os; print(os.environ[{CHROMIUM_VARIABLE!r}])"]


def fake_chromium(path: Path) -> Path:
    """An executable at ``path`` that answers ``--version`` as Chromium does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho 'Chromium 1.2.3 fake'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No browser anywhere: an empty PATH folder and Playwright folder, installing off."""
    (tmp_path / "bin").mkdir()
    base = {k: v for k, v in os.environ.items() if k != CHROMIUM_VARIABLE}
    return {**base, "PATH": str(tmp_path / "bin"), "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "pw"),
            INSTALL_VARIABLE: "0", axe.VARIABLE: str(tmp_path / "axe.min.js")}


def axe_line(env: dict[str, str]) -> str:
    """The line after the browser's: where axe-core is (here, the copy the test names)."""
    return f"axe-core: {env[axe.VARIABLE]} ({axe.VERSION})\n"


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), "--", *PRINT_CHOICE], env=env,
                          capture_output=True, text=True, timeout=120)


def test_with_none_the_error_says_what_to_install(env: dict[str, str]) -> None:
    done = run(env)
    assert done.returncode == 1
    assert done.stderr == (
        "browser: no Chromium found. The dashboard's tests need Chromium: install Debian's "
        "package (apt-get install chromium), let Playwright download its own "
        f"(.venv/bin/playwright install chromium), or set {CHROMIUM_VARIABLE} to a Chromium "
        "executable.\n")
    assert done.stdout == ""


def test_chromium_on_path_is_taken_and_passed_on(env: dict[str, str], tmp_path: Path) -> None:
    chromium = fake_chromium(tmp_path / "bin" / "chromium")
    done = run(env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"browser: {chromium} (on PATH; Chromium 1.2.3 fake)\n" + axe_line(env)
    assert done.stdout == f"{chromium}\n"


def test_playwrights_own_comes_first(env: dict[str, str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fake_chromium(tmp_path / "bin" / "chromium")
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", env["PLAYWRIGHT_BROWSERS_PATH"])
    playwrights = fake_chromium(playwright_chromium())
    assert playwrights.is_relative_to(tmp_path / "pw")
    done = run(env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"browser: {playwrights} (Playwright's; Chromium 1.2.3 fake)\n"
                           + axe_line(env))
    assert done.stdout == f"{playwrights}\n"


def test_the_named_one_wins_and_must_exist(env: dict[str, str], tmp_path: Path) -> None:
    fake_chromium(tmp_path / "bin" / "chromium")
    named = fake_chromium(tmp_path / "mine" / "chrome")
    done = run({**env, CHROMIUM_VARIABLE: str(named)})
    assert done.stderr == (f"browser: {named} ({CHROMIUM_VARIABLE}; Chromium 1.2.3 fake)\n"
                           + axe_line(env))
    assert done.stdout == f"{named}\n"
    done = run({**env, CHROMIUM_VARIABLE: str(tmp_path / "missing")})
    assert done.returncode == 1
    assert done.stderr.startswith(f"browser: {CHROMIUM_VARIABLE}={tmp_path / 'missing'} is not "
                                  "an executable. The dashboard's tests need Chromium: ")
