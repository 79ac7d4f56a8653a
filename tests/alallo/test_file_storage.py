"""The shared storage URL (``storage_url``): uploads every process can read.

Unit level (:class:`FileStorage` on a ``file://`` URL) and embedding level
(two runtimes on one database with different data dirs).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from alallo import Runtime, Settings
from alallo.cluster._file_storage import FileDamaged, FileStorage
from alallo.cluster._shared_storage import open_location
from alallo.store._store import FileRow

DATA = b'{"text": "hello"}\n{"text": "world"}\n'


def row_of(file_id: str, path: Path, data: bytes = DATA) -> FileRow:
    return FileRow(id=file_id, account_id="acct", filename="t.jsonl", bytes=len(data),
                   purpose="fine-tune", created_at=0, line_count=2, format="text",
                   sha256=hashlib.sha256(data).hexdigest(), path=str(path))


async def uploaded(tmp_path: Path) -> tuple[FileStorage, FileRow, Path]:
    """An upload received by process A (data dir ``a``), copied to the URL."""
    shared = tmp_path / "bucket"
    a = FileStorage(f"file://{shared}", tmp_path / "a" / "files")
    path = a.local_path("file-1")
    path.parent.mkdir(parents=True)
    path.write_bytes(DATA)
    await a.put("file-1", path)
    return a, row_of("file-1", path), shared


async def test_an_upload_is_copied_to_the_url_and_fetched_elsewhere(tmp_path: Path) -> None:
    a, row, shared = await uploaded(tmp_path)
    assert (shared / "files" / "file-1.jsonl").read_bytes() == DATA
    Path(row.path).unlink()  # A's disk is not B's
    b = FileStorage(a.url, tmp_path / "b" / "files")
    fetched = await b.local_copy(row)
    assert fetched == b.local_path("file-1") and fetched.read_bytes() == DATA
    assert sorted(p.name for p in fetched.parent.iterdir()) == ["file-1.jsonl"], "no partials"
    assert await b.local_copy(row) == fetched, "fetched once, then read here"


async def test_the_recorded_path_is_used_where_it_exists(tmp_path: Path) -> None:
    a, row, shared = await uploaded(tmp_path)
    (shared / "files" / "file-1.jsonl").unlink()
    b = FileStorage(a.url, tmp_path / "b" / "files")  # a shared data dir: A's path is here
    assert await b.local_copy(row) == Path(row.path)


async def test_a_copy_with_another_sha256_is_refused(tmp_path: Path) -> None:
    a, row, shared = await uploaded(tmp_path)
    Path(row.path).unlink()
    (shared / "files" / "file-1.jsonl").write_bytes(DATA.replace(b"world", b"w0rld"))
    b = FileStorage(a.url, tmp_path / "b" / "files")
    with pytest.raises(FileDamaged, match=f"not {row.sha256} as uploaded"):
        await b.local_copy(row)
    assert list((tmp_path / "b" / "files").iterdir()) == [], "nothing damaged is kept"


async def test_missing_bytes_name_the_remedy(tmp_path: Path) -> None:
    row = row_of("file-9", tmp_path / "elsewhere" / "file-9.jsonl")
    with pytest.raises(FileNotFoundError, match="set storage_url"):
        await FileStorage(None, tmp_path / "files").local_copy(row)
    with pytest.raises(FileNotFoundError, match="no copy of file-9 at file://"):
        await FileStorage(f"file://{tmp_path / 'bucket'}", tmp_path / "files").local_copy(row)


async def test_delete_removes_the_local_and_the_shared_copy(tmp_path: Path) -> None:
    a, row, shared = await uploaded(tmp_path)
    await a.delete(row)
    assert not Path(row.path).exists()
    assert not (shared / "files" / "file-1.jsonl").exists()
    await a.delete(row)  # deleting again is harmless


def test_an_unknown_protocol_names_the_setting() -> None:
    with pytest.raises(ValueError, match="storage_url 'nosuch://x' is not usable"):
        open_location("nosuch://x")


def test_checkpoint_url_is_the_older_name_of_storage_url(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path, checkpoint_url="file:///x").shared_storage_url == "file:///x"
    assert Settings(data_dir=tmp_path, storage_url="file:///y").shared_storage_url == "file:///y"
    same = Settings(data_dir=tmp_path, storage_url="file:///y", checkpoint_url="file:///y")
    assert same.shared_storage_url == "file:///y"
    with pytest.raises(ValidationError, match="set only storage_url"):
        Settings(data_dir=tmp_path, storage_url="file:///y", checkpoint_url="file:///x")


async def test_a_runtime_with_another_data_dir_serves_and_deletes_the_upload(
        tmp_path: Path, database_url: str) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    async with Runtime(Settings(data_dir=tmp_path / "a", database_url=database_url,
                                storage_url=url)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "t.jsonl", DATA)
    assert (tmp_path / "bucket" / "files" / f"{file.id}.jsonl").read_bytes() == DATA
    (tmp_path / "a" / "files" / f"{file.id}.jsonl").unlink()  # A's disk is gone
    async with Runtime(Settings(data_dir=tmp_path / "b", database_url=database_url,
                                storage_url=url, api_key=rt.api_key)) as rt2:
        assert [f.id for f in await rt2.list_files(account)] == [file.id]
        assert await rt2.file_content(account, file.id) == DATA
        await rt2.delete_file(account, file.id)
        assert await rt2.list_files(account) == []
    assert not (tmp_path / "bucket" / "files" / f"{file.id}.jsonl").exists()
    assert not (tmp_path / "b" / "files" / f"{file.id}.jsonl").exists()


async def test_an_upload_the_url_refuses_is_not_recorded(
        tmp_path: Path, database_url: str) -> None:
    bucket = tmp_path / "bucket"
    async with Runtime(Settings(data_dir=tmp_path / "a", database_url=database_url,
                                storage_url=f"file://{bucket}")) as rt:
        account = await rt.authenticate(rt.api_key)
        # writable at start (checked then); the location fails later
        (bucket / "files").write_text("a file where the store's directory should be")
        with pytest.raises(OSError):
            await rt.upload_file(account, "t.jsonl", DATA)
        assert await rt.list_files(account) == []
    assert list((tmp_path / "a" / "files").iterdir()) == []


async def test_a_job_whose_file_is_nowhere_fails_as_a_platform_error(
        tmp_path: Path, database_url: str) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    async with Runtime(Settings(data_dir=tmp_path / "a", database_url=database_url,
                                storage_url=url, max_restarts=0)) as rt:
        account = await rt.authenticate(rt.api_key)
        file = await rt.upload_file(account, "t.jsonl", DATA)
        (tmp_path / "bucket" / "files" / f"{file.id}.jsonl").unlink()  # the store lost it
        (tmp_path / "a" / "files" / f"{file.id}.jsonl").unlink()
        job = await rt.create_job(account, {
            "model": "alallo/tiny-gpt2", "training_file": file.id,
            "trainer": {"type": "simulated", "step_delay_s": 0.01}})
        done = await rt.wait_for_final(account, job.id)
        events, _ = await rt.list_events(account, job.id)
    assert done.status.value == "failed" and done.error is not None
    assert done.error.code == "platform_error"
    assert any(f"cannot read the training file: no copy of {file.id}" in e.message
               for e in events)
