"""tests/tools/axe.py: axe-core is taken only as pinned, fetched once, and a copy named in
ALALLO_TEST_AXE is used as it is. The registry is stood in for (no network here)."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tools import axe


def tarball(script: bytes) -> bytes:
    """An npm tarball holding ``package/axe.min.js``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        info = tarfile.TarInfo("package/axe.min.js")
        info.size = len(script)
        archive.addfile(info, io.BytesIO(script))
    return out.getvalue()


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[bytes], list[str]]:
    """A home of the test's own, and a registry answering with the bytes given; returns
    the list of addresses asked."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(axe.VARIABLE, raising=False)

    def serve(body: bytes) -> list[str]:
        asked: list[str] = []

        def urlopen(url: str, timeout: float) -> io.BytesIO:
            asked.append(url)
            return io.BytesIO(body)
        monkeypatch.setattr(urllib.request, "urlopen", urlopen)
        return asked
    return serve


def test_a_tarball_that_is_not_the_pinned_one_is_refused_and_nothing_is_kept(
        registry: Callable[[bytes], list[str]]) -> None:
    registry(tarball(b"window.axe = 'tampered';"))
    with pytest.raises(RuntimeError, match=r"is not axe-core 4\.14\.1: its sha512 is sha512-"):
        axe.ensure()
    assert not axe.cached().exists()


def test_the_pinned_tarball_is_fetched_once_and_its_script_kept(
        registry: Callable[[bytes], list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    body = tarball(b"window.axe = {};")
    monkeypatch.setattr(axe, "INTEGRITY",
                        "sha512-" + base64.b64encode(hashlib.sha512(body).digest()).decode())
    asked = registry(body)
    path = axe.ensure()
    assert path == axe.cached() and path.read_bytes() == b"window.axe = {};"
    assert asked == [axe.TARBALL]
    assert axe.ensure() == path and asked == [axe.TARBALL]  # kept: not fetched again


def test_a_copy_named_by_the_variable_is_used_as_it_is(
        registry: Callable[[bytes], list[str]], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    asked = registry(b"")
    monkeypatch.setenv(axe.VARIABLE, str(tmp_path / "axe.min.js"))
    assert axe.ensure() == tmp_path / "axe.min.js" and asked == []
