"""tests/fake_hub.py against the real ``huggingface_hub`` client.

``huggingface_hub`` reads ``HF_ENDPOINT`` and ``HF_HOME`` when it is imported, so setting them
in this process is not enough: the in-process tests use :func:`fake_hub.patch_hub_client`
(the variables and the client's constants, for calls made without ``endpoint=``), and one test
runs the client in a child process whose environment names the fake hub, started as a process
of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from fake_hub import FakeHub, patch_hub_client, serve_fake_hub, start_fake_hub_process
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from safetensors.numpy import save_file

pytestmark = pytest.mark.unit

TOKEN = "hf_granted"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A tiny model folder: its config, 12 float32 weights, a tokenizer config."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2",
                                                     "max_position_embeddings": 64}))
    save_file({"w": np.zeros((3, 4), dtype=np.float32)}, str(folder / "model.safetensors"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 64}))
    return folder


@pytest.fixture
def hub() -> FakeHub:
    return FakeHub()


@pytest.fixture
def url(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The hub served from this process; the client points at it, ``HF_HOME`` in tmp_path."""
    with serve_fake_hub(hub) as base:
        patch_hub_client(monkeypatch, base, tmp_path / "hf")
        yield base


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_model_info_and_snapshot_then_cache(hub: FakeHub, model: Path, url: str) -> None:
    sha = hub.add_repo("acme/tiny", model)
    hub.page_size = 2  # the tree comes in two pages

    info = HfApi().model_info("acme/tiny")
    assert info.sha == sha and len(sha) == 40
    assert info.safetensors is not None and info.safetensors.total == 12
    assert info.safetensors.parameters == {"F32": 12}
    assert sorted(s.rfilename for s in info.siblings or []) == sorted(files_of(model))
    assert HfApi().model_info("acme/tiny", revision=sha).sha == sha

    snapshot = Path(snapshot_download("acme/tiny"))
    assert snapshot.name == sha and files_of(snapshot) == files_of(model)
    assert hub.downloads == {f"acme/tiny/{name}": 1 for name in files_of(model)}

    hub.requests.clear()
    again = snapshot_download("acme/tiny", revision=sha)
    assert Path(again) == snapshot
    assert not hub.requests  # neither listed nor downloaded again: all from the cache
    config = hf_hub_download("acme/tiny", "config.json", revision="main")
    assert json.loads(Path(config).read_text())["max_position_embeddings"] == 64


def test_a_branch_moves_and_its_old_commit_stays(hub: FakeHub, model: Path, url: str) -> None:
    first = hub.add_repo("acme/tiny", model)
    (model / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 32}))
    second = hub.add_repo("acme/tiny", model)
    assert first != second and HfApi().model_info("acme/tiny", revision="main").sha == second
    old = hf_hub_download("acme/tiny", "config.json", revision=first)
    assert "max_position_embeddings" in Path(old).read_text()
    assert Path(snapshot_download("acme/tiny")).name == second


def test_unknown_repo_and_revision(hub: FakeHub, model: Path, url: str) -> None:
    hub.add_repo("acme/tiny", model)
    with pytest.raises(RepositoryNotFoundError):
        HfApi().model_info("acme/missing")
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("acme/missing")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("acme/missing", "config.json")
    with pytest.raises(RevisionNotFoundError):
        HfApi().model_info("acme/tiny", revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        snapshot_download("acme/tiny", revision="f" * 40)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("acme/tiny", "config.json", revision="no-such-branch")


def test_gated_repo(hub: FakeHub, model: Path, url: str) -> None:
    sha = hub.add_repo("acme/gated", model, gated_token=TOKEN)
    info = HfApi().model_info("acme/gated", token=False)  # metadata is public, as on the Hub
    assert info.gated == "manual" and info.sha == sha

    with pytest.raises(GatedRepoError) as anonymous:
        hf_hub_download("acme/gated", "config.json", token=False)
    assert anonymous.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as refused:
        snapshot_download("acme/gated", token="hf_someone_else")
    assert refused.value.response.status_code == 403
    assert not hub.downloads

    snapshot = Path(snapshot_download("acme/gated", token=TOKEN))
    assert files_of(snapshot) == files_of(model)


def test_ranges(hub: FakeHub, model: Path, url: str) -> None:
    hub.add_repo("acme/tiny", model)
    whole = (model / "config.json").read_bytes()
    file_url = f"{url}/acme/tiny/resolve/main/config.json"
    head = httpx.head(file_url)
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["Content-Length"]) == len(whole) and "X-Xet-Hash" not in head.headers
    part = httpx.get(file_url, headers={"Range": "bytes=2-"})
    assert part.status_code == 206 and part.content == whole[2:]
    assert part.headers["Content-Range"] == f"bytes 2-{len(whole) - 1}/{len(whole)}"
    assert httpx.get(file_url, headers={"Range": "bytes=-3"}).content == whole[-3:]


CLIENT = """
import json, sys
from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import GatedRepoError
info = HfApi().model_info("acme/tiny", revision="main")
try:
    snapshot_download("acme/gated")
    gated = "downloaded"
except GatedRepoError:
    gated = "GatedRepoError"
print(json.dumps({"sha": info.sha, "total": info.safetensors.total, "gated": gated,
                  "snapshot": snapshot_download("acme/tiny"),
                  "with_token": snapshot_download("acme/gated", token=sys.argv[1])}))
"""


def test_as_a_process_for_a_client_configured_by_its_environment(model: Path,
                                                                  tmp_path: Path) -> None:
    sha = FakeHub().add_repo("acme/tiny", model)
    process, base = start_fake_hub_process({"acme/tiny": (model, None),
                                            "acme/gated": (model, TOKEN)})
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env |= {"HF_ENDPOINT": base, "HF_HOME": str(tmp_path / "hf")}
        main = subprocess.run([sys.executable, "-c", CLIENT, TOKEN], env=env,
                              capture_output=True, text=True, timeout=60)
        assert main.returncode == 0, main.stderr
    finally:
        process.terminate()
        process.wait(timeout=10)
    answer = json.loads(main.stdout)
    assert answer["sha"] == sha and answer["total"] == 12 and answer["gated"] == "GatedRepoError"
    for snapshot in (answer["snapshot"], answer["with_token"]):
        assert Path(snapshot).is_relative_to(tmp_path / "hf" / "hub")
        assert files_of(Path(snapshot)) == files_of(model)
