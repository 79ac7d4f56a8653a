"""A local stand-in for the Hugging Face Hub's HTTP API, for the real ``huggingface_hub`` client.

Emulated (model repos only), as huggingface_hub 2.4 calls it:

- ``GET /api/models/{repo}[/revision/{rev}]`` (``model_info``, ``repo_info``): ``sha``,
  ``siblings`` (names), ``gated``, ``config`` (``model_type``, ``architectures``) and
  ``safetensors`` (``{"parameters": {dtype: n}, "total": n}``, from the header of every
  ``.safetensors`` file of the commit).
- ``GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=`` (``list_repo_tree``), by pages of
  :attr:`FakeHub.page_size` entries linked by ``Link: <...>; rel="next"``.
- ``HEAD``/``GET /{repo}/resolve/{rev}/{file}`` (``hf_hub_download``): ``X-Repo-Commit``,
  ``ETag`` (the git blob id; an LFS file's sha256, also in ``X-Linked-Etag``, its size in
  ``X-Linked-Size``), ``Content-Length``; ``Range: bytes=`` gets a 206. No ``X-Xet-*`` header
  is ever sent: the client never takes its Xet path.
- Errors as the Hub tells them (``X-Error-Code``, ``X-Error-Message``, ``{"error": ...}``):
  404 ``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``. A gated repo's files need
  ``Authorization: Bearer <token>``: 401 ``GatedRepo`` without a token, 403 with another. As on
  the Hub, a gated repo's metadata (``model_info``, its tree) is public (``"gated": "manual"``).

Limits: no datasets, spaces, tags, private repos, uploads, CDN redirects (LFS files are served
in place) nor Xet; files are held in memory. A branch names the last commit ``add_repo`` made
on it (the default branch: ``main``, else the first made); older commits stay readable by their sha.

The client reads ``HF_ENDPOINT`` and ``HF_HOME`` when ``huggingface_hub`` is imported: set them
in a child's environment, pass ``endpoint=``/``cache_dir=``, or call :func:`patch_hub_client`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import queue
import select
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    import pytest
    from hypercorn.typing import ASGIFramework

__all__ = ["FakeHub", "patch_hub_client", "serve_fake_hub", "start_fake_hub_process"]

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx", ".h5", ".msgpack")


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class _File:
    data: bytes
    sha256: str | None  # set for the files the Hub keeps in LFS

    def entry(self, path: str) -> dict[str, Any]:
        """The file as ``list_repo_tree`` tells it (an LFS file's oid is its pointer's)."""
        entry = {"type": "file", "path": path, "size": len(self.data), "oid": _git_oid(self.data)}
        if self.sha256 is not None:
            pointer = (b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                       % (self.sha256.encode(), len(self.data)))
            entry |= {"oid": _git_oid(pointer), "lfs": {
                "oid": self.sha256, "size": len(self.data), "pointerSize": len(pointer)}}
        return entry


@dataclass
class _Repo:
    gated_token: str | None
    commits: dict[str, dict[str, _File]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)


def _safetensors_parameters(files: dict[str, _File]) -> dict[str, int]:
    """Parameters per dtype, from the JSON header of each ``.safetensors`` file."""
    counts: Counter[str] = Counter()
    for path, file in files.items():
        if path.endswith(".safetensors"):
            size = int.from_bytes(file.data[:8], "little")
            for name, tensor in json.loads(file.data[8:8 + size]).items():
                if name != "__metadata__":
                    counts[tensor["dtype"]] += math.prod(tensor["shape"])
    return dict(counts)


def _error(status: int, code: str, message: str, commit: str | None = None) -> Response:
    headers = {"X-Error-Code": code, "X-Error-Message": message}
    headers |= {"X-Repo-Commit": commit} if commit else {}
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class FakeHub:
    """Model repos in memory, and the Starlette app (:meth:`app`) that serves them."""

    page_size = 1000  # tree entries per page, as the Hub (tests may lower it)

    def __init__(self) -> None:
        self.repos: dict[str, _Repo] = {}
        self.downloads: Counter[str] = Counter()  # "repo_id/path" -> file GETs served
        self.requests: Counter[str] = Counter()  # "METHOD /raw/path" -> requests answered

    def add_repo(self, repo_id: str, folder: Path, *, gated_token: str | None = None,
                 branch: str = "main") -> str:
        """Commit every file under ``folder`` to ``repo_id`` on ``branch``; its 40-hex sha."""
        files: dict[str, _File] = {}
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            data = path.read_bytes()
            files[path.relative_to(folder).as_posix()] = _File(
                data, hashlib.sha256(data).hexdigest() if path.suffix in LFS_SUFFIXES else None)
        sha = hashlib.sha1(b"".join(b"%s\0%s\0" % (name.encode(), _git_oid(file.data).encode())
                                    for name, file in files.items())).hexdigest()
        repo = self.repos.setdefault(repo_id, _Repo(gated_token))
        repo.gated_token = gated_token
        repo.commits[sha] = files
        repo.branches[branch] = sha
        return sha

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._dispatch, methods=["GET", "HEAD"])])

    def _find(self, raw: str) -> tuple[str, _Repo, str] | None:
        """The registered repo ``raw`` (a URL path without its first ``/``) starts with, and
        the rest of ``raw`` after it."""
        for repo_id in sorted(self.repos, key=len, reverse=True):
            if raw == repo_id or raw.startswith(repo_id + "/"):
                return repo_id, self.repos[repo_id], raw[len(repo_id) + 1:]
        return None

    async def _dispatch(self, request: Request) -> Response:
        raw = request.scope["raw_path"].decode()
        self.requests[f"{request.method} {raw}"] += 1
        response = self._answer(request, raw)
        if request.method == "HEAD":  # the headers of a GET, no body
            response.body = b""
        return response

    def _answer(self, request: Request, raw: str) -> Response:
        api = raw.startswith("/api/models/")
        found = self._find(raw[len("/api/models/"):] if api else raw[1:])
        if found is None:
            return _error(404, "RepoNotFound", "Repository not found")
        repo_id, repo, rest = found
        kind, _, rest = rest.partition("/")
        revision, _, path = rest.partition("/")
        default = "main" if "main" in repo.branches else next(iter(repo.branches))
        revision, path = unquote(revision) or default, unquote(path)
        if kind == "resolve" and not api and repo.gated_token is not None:
            given = request.headers.get("authorization", "")
            if given != f"Bearer {repo.gated_token}":
                status, why = ((403, "you are not in the authorized list") if given else
                               (401, "you must be authenticated to access it"))
                return _error(status, "GatedRepo", f"Access to {repo_id} is restricted: {why}.")
        sha = repo.branches.get(revision) or (revision if revision in repo.commits else None)
        if sha is None:
            return _error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        if api and kind in ("", "revision"):
            return self._info(repo_id, repo, sha)
        if api and kind == "tree":
            return self._tree(repo.commits[sha], sha, path, request)
        if not api and kind == "resolve":
            return self._resolve(repo_id, repo.commits[sha], sha, path, request)
        return _error(404, "NotFound", "Sorry, we can't find the page you are looking for.")

    @staticmethod
    def _info(repo_id: str, repo: _Repo, sha: str) -> Response:
        files = repo.commits[sha]
        info: dict[str, Any] = {
            "id": repo_id, "modelId": repo_id, "author": repo_id.partition("/")[0], "sha": sha,
            "private": False, "gated": "manual" if repo.gated_token else False,
            "disabled": False, "tags": [],
            "siblings": [{"rfilename": path} for path in files],
        }
        with contextlib.suppress(KeyError, ValueError):
            config = json.loads(files["config.json"].data)
            info["config"] = {k: config[k] for k in ("model_type", "architectures") if k in config}
        if parameters := _safetensors_parameters(files):
            info["safetensors"] = {"parameters": parameters, "total": sum(parameters.values())}
        return JSONResponse(info)

    def _tree(self, files: dict[str, _File], sha: str, path: str, request: Request) -> Response:
        recursive = request.query_params.get("recursive", "").lower() in ("1", "true")
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        entries: dict[str, dict[str, Any]] = {}
        for name, file in files.items():
            parts = name[len(prefix):].split("/") if name.startswith(prefix) else []
            for depth in range(1, len(parts) if recursive else min(len(parts), 2)):
                folder = prefix + "/".join(parts[:depth])
                entries[folder] = {"type": "directory", "path": folder, "size": 0,
                                   "oid": hashlib.sha1(f"{sha}:{folder}".encode()).hexdigest()}
            if len(parts) == 1 or (parts and recursive):
                entries[name] = file.entry(name)
        if prefix and not entries:
            return _error(404, "EntryNotFound", f"{path} does not exist", sha)
        start = int(request.query_params.get("cursor", "0"))
        page = [entries[key] for key in sorted(entries)][start:start + self.page_size]
        headers = {}
        if start + self.page_size < len(entries):  # the Hub pages with a cursor, and says so
            query = dict(request.query_params) | {"cursor": str(start + self.page_size)}
            headers["Link"] = f'<{request.url.replace_query_params(**query)}>; rel="next"'
        return JSONResponse(page, headers=headers)

    def _resolve(self, repo_id: str, files: dict[str, _File], sha: str, path: str,
                 request: Request) -> Response:
        file = files.get(path)
        if file is None:
            return _error(404, "EntryNotFound", "Entry not found", sha)
        etag, size = f'"{file.sha256 or _git_oid(file.data)}"', len(file.data)
        headers = {"X-Repo-Commit": sha, "ETag": etag, "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        if file.sha256 is not None:  # the Hub's LFS files: the real file's etag and size
            headers |= {"X-Linked-Etag": etag, "X-Linked-Size": str(size)}
        body, status = file.data, 200
        ranged = request.headers.get("range", "")
        if ranged.startswith("bytes=") and request.method == "GET":
            first, _, last = ranged[len("bytes="):].split(",")[0].strip().partition("-")
            start = int(first) if first else size - int(last)
            end = min(int(last), size - 1) if first and last else size - 1
            if not 0 <= start <= end:
                return Response(status_code=416, headers={"Content-Range": f"bytes */{size}"})
            body, status = file.data[start:end + 1], 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        if request.method == "GET":
            self.downloads[f"{repo_id}/{path}"] += 1
        return Response(body, status_code=status, headers=headers)


async def _serve(app: Starlette, port: int, on_ready: Callable[[str, trio.Event], None]) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` (0: any free port); ``on_ready`` gets its base URL
    and the event that stops it."""
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.loglevel = "WARNING"
    config.graceful_timeout = 1
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        asgi = cast("ASGIFramework", app)
        binds = await nursery.start(partial(serve, asgi, config, shutdown_trigger=stop.wait))
        on_ready(binds[0], stop)


@contextlib.contextmanager
def serve_fake_hub(hub: FakeHub) -> Iterator[str]:
    """Serve ``hub`` from a thread of this process; yields its base URL, stops it on exit."""
    ready: queue.Queue[tuple[str, trio.lowlevel.TrioToken, trio.Event] | BaseException]
    ready = queue.Queue()

    def run() -> None:
        try:
            trio.run(_serve, hub.app(), 0, lambda url, stop: ready.put(
                (url, trio.lowlevel.current_trio_token(), stop)))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            ready.put(exc)

    thread = threading.Thread(target=run, name="fake-hub", daemon=True)
    thread.start()
    started = ready.get(timeout=30)
    if isinstance(started, BaseException):
        raise started
    url, token, stop = started
    try:
        yield url
    finally:
        with contextlib.suppress(trio.RunFinishedError):  # unless it died already
            trio.from_thread.run_sync(stop.set, trio_token=token)
        thread.join(timeout=10)


def start_fake_hub_process(repos: dict[str, tuple[Path, str | None]],
                           port: int = 0) -> tuple[subprocess.Popen[str], str]:
    """Start ``python tests/fake_hub.py`` serving ``repos`` (repo id -> (folder, gated
    token)); the process and its base URL. The caller terminates and waits for it."""
    specs = [f"{repo}={folder}" + (f":{token}" if token else "")
             for repo, (folder, token) in repos.items()]
    process = subprocess.Popen([sys.executable, __file__, str(port), *specs],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    with process.stdout:  # one line, then nothing more: closed here
        line = process.stdout.readline() if select.select([process.stdout], [], [], 30)[0] else ""
    if not line.startswith("http://"):
        process.kill()
        process.wait()
        raise RuntimeError(f"the fake hub process did not start (exit code {process.poll()})")
    return process, line.strip()


def patch_hub_client(monkeypatch: pytest.MonkeyPatch, url: str, hf_home: Path) -> None:
    """Point the already imported ``huggingface_hub`` at ``url`` with ``hf_home`` as its
    ``HF_HOME``, for calls made without ``endpoint=``/``cache_dir=``; and no token of ours."""
    from huggingface_hub import constants, hf_api

    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    template = url + "/{repo_id}/resolve/{revision}/{filename}"
    for name, value in {"ENDPOINT": url, "HUGGINGFACE_CO_URL_TEMPLATE": template,
                        "HF_HOME": str(hf_home), "HF_HUB_CACHE": str(hf_home / "hub"),
                        "HF_TOKEN_PATH": str(hf_home / "token"), "HF_HUB_OFFLINE": False}.items():
        monkeypatch.setattr(constants, name, value)
    monkeypatch.setattr(hf_api.api, "endpoint", url)  # behind huggingface_hub.model_info & co


def main(argv: list[str]) -> None:
    """``PORT REPO_ID=FOLDER[:TOKEN] ...``: print the URL, serve until killed."""
    hub = FakeHub()
    for spec in argv[1:]:
        repo_id, _, rest = spec.partition("=")
        folder, colon, token = rest.rpartition(":")
        hub.add_repo(repo_id, Path(folder if colon else rest), gated_token=token if colon else None)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_serve, hub.app(), int(argv[0]), lambda url, stop: print(url, flush=True))


if __name__ == "__main__":
    main(sys.argv[1:])
