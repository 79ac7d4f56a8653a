"""An account never chooses an executable on the server; every trainer starts scrubbed.

Real servers, real accounts (made with the operator's commands), real trainer
processes: a tenant's command is refused (403) and never runs; an operator's
registered trainer runs by name; an account the operator allowed may send a
command, and stops being able to the moment the right is taken back (also for
a job it queued before); a trainer's environment holds no secret of the
server; where the server runs as root, a trainer runs as an unprivileged user
(one of its own, made by the server, or the one of the settings), in its job's
directory, and reaches nothing of the server's: not its environment, its
database, its key, its uploads nor another job's directory, even with the
interpreter and the data behind folders only root may enter; a server whose
trainer user cannot run a trainer refuses to start, in one line.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from support import (
    EXAMPLES,
    LiveServer,
    read_stream,
    server_env,
    start_server,
    stop_server,
    upload,
    wait_for_job,
)
from test_tenants import new_account, operator

from alallo.executors import DEFAULT_TRAINER_USER

pytestmark = pytest.mark.any_backend  # what a trainer process can reach is the subject

Factory = Callable[..., LiveServer]

SECRETS = {
    "OPENAI_API_KEY": "sk-server-secret-openai",
    "AWS_SECRET_ACCESS_KEY": "server-secret-aws",
    "HF_TOKEN": "hf_server_secret_token",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "ALALLO_OPERATOR_WEBHOOK_URL": "http://127.0.0.1:9/server-secret-hook",
}
"""What the server's environment holds and no trainer may see."""

REPORT_ENV = """
import json, os, sys
config = json.load(open(sys.argv[-1]))
def say(kind, **fields):
    print(json.dumps({"type": kind, **fields}), flush=True)
for name, value in sorted(os.environ.items()):
    say("log", text=f"env {name}={value}")
say("log", text="cwd " + os.getcwd())
say("log", text="environ-file " + open("/proc/self/environ", "rb").read().decode(errors="replace"))
os.makedirs(config["output_dir"], exist_ok=True)
for step in range(1, config["max_steps"] + 1):
    say("progress", step=step, max_steps=config["max_steps"], loss=1.0)
say("done", model_path=config["output_dir"])
"""


def connect(server: LiveServer, key: str | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=30,
                             headers={"Authorization": f"Bearer {key or server.api_key}"})


async def new_job(client: httpx.AsyncClient, trainer: Any, **spec: Any) -> httpx.Response:
    file = (await upload(client, EXAMPLES / "sample.jsonl")).json()
    return await client.post("/v1/fine_tuning/jobs", json={
        "model": "alallo/tiny-gpt2", "training_file": file["id"],
        "hyperparameters": {"max_steps": 3}, "trainer": trainer, **spec})


async def finished(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    with trio.fail_after(120):
        items = await read_stream(client, job_id)
    return items[-1][2]


async def log_of(client: httpx.AsyncClient, job_id: str) -> list[str]:
    page = (await client.get(f"/v1/fine_tuning/jobs/{job_id}/log")).json()
    return [line["text"] for line in page["data"]]


async def operating(*args: str, server: LiveServer) -> str:
    """``alallo ARGS`` on the server's store (in a thread: the CLI runs Trio itself); stdout."""
    result = await trio.to_thread.run_sync(lambda: operator(server, *args))
    return str(result.stdout)


async def tenant(server: LiveServer) -> str:
    """A new account's API key."""
    _, key = await trio.to_thread.run_sync(new_account, server, "tenant")
    return str(key)


def registered(name: str, command: list[str], description: str = "") -> str:
    """``ALALLO_TRAINERS`` registering one trainer."""
    return json.dumps([{"name": name, "command": command, "description": description}])


async def test_a_tenants_command_is_refused_and_nothing_runs(
        server_factory: Factory, tmp_path: Path) -> None:
    server = server_factory()
    key = await tenant(server)
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('pwned')"]
    async with connect(server, key) as client:
        refused = await new_job(client, {"command": command})
        file = (await client.get("/v1/files")).json()["data"][0]["id"]
        estimate = await client.post("/v1/fine_tuning/estimates", json={
            "model": "alallo/tiny-gpt2", "training_file": file, "trainer": {"command": command}})
        jobs = (await client.get("/v1/fine_tuning/jobs")).json()["data"]
    for answer in (refused, estimate):
        assert answer.status_code == 403, answer.text
        error = answer.json()["error"]
        assert error["code"] == "forbidden" and error["param"] == "trainer.command"
        assert "the operator registers trainers" in error["message"]
        assert "GET /v1/trainers" in error["message"]
    assert jobs == [], "nothing was created"
    assert not marker.exists(), "nothing ran"


async def test_a_tenant_may_not_name_a_directory_of_the_server_as_its_model(
        server_factory: Factory, tmp_path: Path) -> None:
    server = server_factory()
    key = await tenant(server)
    model = tmp_path / "model"  # looks like a Hugging Face model directory
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "gpt2", "n_embd": 8, "n_layer": 1}')
    simulated = {"type": "simulated", "step_delay_s": 0.01}
    answers: list[httpx.Response] = []
    async with connect(server, key) as client:
        for path in (model, tmp_path / "nothing-here"):
            answers.append(await new_job(client, simulated, model=str(path)))
            file = (await client.get("/v1/files")).json()["data"][0]["id"]
            answers.append(await client.post("/v1/fine_tuning/estimates", json={
                "model": str(path), "training_file": file, "trainer": simulated}))
        jobs = (await client.get("/v1/fine_tuning/jobs")).json()["data"]
    async with connect(server) as local:  # the operator's own account may
        file = (await upload(local, EXAMPLES / "sample.jsonl")).json()["id"]
        own = await local.post("/v1/fine_tuning/estimates", json={
            "model": str(model), "training_file": file, "trainer": simulated})
    errors = [answer.json()["error"] for answer in answers]
    assert [answer.status_code for answer in answers] == [403] * 4
    assert {error["param"] for error in errors} == {"model"}
    assert len({error["message"] for error in errors}) == 1, "existing or not, the same answer"
    assert "GET /v1/models" in errors[0]["message"]
    assert jobs == [], "nothing was created"
    assert own.status_code == 200, own.text


async def test_a_registered_trainer_runs_by_name_and_is_listed_without_its_command(
        server_factory: Factory) -> None:
    server = server_factory(ALALLO_TRAINERS=registered(
        "reporter", [sys.executable, "-c", REPORT_ENV], "Prints what it sees"))
    key = await tenant(server)
    async with connect(server, key) as client:
        listed = (await client.get("/v1/trainers")).json()
        by_name = await new_job(client, {"name": "reporter"})
        as_string = await new_job(client, "reporter")
        unknown = await new_job(client, {"name": "nonesuch"})
        assert by_name.status_code == as_string.status_code == 200, by_name.text
        final = await finished(client, by_name.json()["id"])
        second = await finished(client, as_string.json()["id"])
    assert [(t["name"], t["built_in"]) for t in listed["data"]] == [
        ("trl", True), ("simulated", True), ("reporter", False)]
    assert listed["data"][2] == {"object": "trainer", "name": "reporter",
                                 "description": "Prints what it sees", "built_in": False}
    assert sys.executable not in json.dumps(listed), "a tenant never sees the command"
    assert final["status"] == second["status"] == "succeeded"
    assert final["trainer"] == "reporter"
    assert unknown.status_code == 400
    assert unknown.json()["error"]["param"] == "trainer.name"
    assert "reporter" in unknown.json()["error"]["message"]


async def test_a_trainer_sees_no_server_secret_and_runs_in_its_jobs_directory(
        server_factory: Factory) -> None:
    server = server_factory(ALALLO_TRAINERS=registered("reporter", [sys.executable, "-c",
                                                                     REPORT_ENV]),
                            ALALLO_TRAINER_ENV=json.dumps({"SHARED_CACHE": "/srv/cache"}),
                            **SECRETS)
    async with connect(server) as client:
        response = await new_job(client, {"name": "reporter"})
        job_id = response.json()["id"]
        assert (await finished(client, job_id))["status"] == "succeeded"
        log = await log_of(client, job_id)
    seen = dict(line[len("env "):].split("=", 1) for line in log if line.startswith("env "))
    assert seen, log
    # No setting of the server's: the protocol's own variables only (docs/trainer-protocol.md).
    assert [name for name in seen if name.startswith("ALALLO_")] == ["ALALLO_PAUSE_FILE"]
    for name, value in SECRETS.items():
        assert name not in seen
        assert not any(value in line for line in log), f"{name}'s value reached the trainer"
    assert seen["SHARED_CACHE"] == "/srv/cache", "the operator's trainer_env is passed"
    assert seen["PATH"] == os.environ["PATH"], "tools are still found"
    assert seen["CUDA_VISIBLE_DEVICES"] == "", "a job on the CPU node sees no GPU"
    cwd = next(line[len("cwd "):] for line in log if line.startswith("cwd "))
    assert Path(cwd) == (server.data_dir / "jobs" / job_id / "attempt-1").resolve()
    assert Path(seen["ALALLO_PAUSE_FILE"]).parent == Path(cwd), "a file of its run's own"


async def test_an_allowed_account_may_send_a_command_until_the_right_is_taken_back(
        server_factory: Factory) -> None:
    server = server_factory(ALALLO_MAX_CONCURRENT_JOBS="1")
    account = json.loads(await operating("accounts", "create", "trusted", "--balance", "100",
                                         "--allow-commands", "--json", server=server))
    assert account["allow_commands"] is True
    key = json.loads(await operating("keys", "create", "--account", account["id"], "--json",
                                     server=server))["key"]
    # Each command leaves a mark in its run's directory (the one place a trainer writes).
    async with connect(server, key) as client:
        allowed = await new_job(client, {"command": [sys.executable, "-c", REPORT_ENV
                                                     + "\nopen('ran', 'w')\n"]})
        assert allowed.status_code == 200, allowed.text
        assert (await finished(client, allowed.json()["id"]))["status"] == "succeeded"
        assert (server.data_dir / "jobs" / allowed.json()["id"] / "attempt-1" / "ran").exists()
        # A job queued behind a long one while the account may still send commands...
        blocker = await new_job(client, {"type": "simulated", "step_delay_s": 0.2},
                                hyperparameters={"max_steps": 1000})
        queued = await new_job(client, {"command": [
            sys.executable, "-c", "open('queued-ran', 'w')"]})
        assert queued.status_code == 200
        # ... then the operator takes the right back, and the blocker ends.
        await operating("accounts", "set", account["id"], "--no-allow-commands", server=server)
        refused = await new_job(client, {"command": [sys.executable, "-c", "pass"]})
        await client.post(f"/v1/fine_tuning/jobs/{blocker.json()['id']}/cancel")
        final = await finished(client, queued.json()["id"])
    assert refused.status_code == 403
    assert final["status"] == "failed" and final["attempt"] == 0
    assert final["message"].startswith("Training failed: this account may not run a command")
    assert final["price"]["charged"] == 0
    assert not list((server.data_dir / "jobs").rglob("queued-ran")), "it never ran"


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory any user may enter (pytest's own are 0700): the data dir of a server
    whose trainers run as another user goes here."""
    with tempfile.TemporaryDirectory(prefix="alallo-shared-") as name:
        path = Path(name)
        path.chmod(0o755)
        yield path


def _unprivileged_uid() -> int:
    """The uid trainers must run as: ``nobody`` when the server runs as root, else its own."""
    return pwd.getpwnam("nobody").pw_uid if os.geteuid() == 0 else os.geteuid()


async def test_a_root_server_runs_trainers_as_the_unprivileged_user_of_its_settings(
        shared_dir: Path) -> None:
    # /bin/sh, which every user may run (the server's own interpreter may sit in a
    # directory only root can enter, as /root/.pyenv does on this machine).
    script = shared_dir / "whoami-trainer.sh"
    script.write_text(
        "#!/bin/sh\n"
        'echo "{\\"type\\": \\"log\\", \\"text\\": \\"uid $(id -u) home $HOME\\"}"\n'
        "mkdir -p ../model && echo weights > ../model/weights || exit 2\n"
        'echo "{\\"type\\": \\"progress\\", \\"step\\": 3, \\"max_steps\\": 3}"\n'
        'echo "{\\"type\\": \\"done\\", \\"model_path\\": \\"$(cd ../model && pwd)\\"}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    server = start_server(shared_dir / "data", ALALLO_TRAINER_USER="nobody",
                          ALALLO_TRAINERS=registered("whoami", ["/bin/sh", str(script)]))
    try:
        async with connect(server) as client:
            response = await new_job(client, {"name": "whoami"})
            job_id = response.json()["id"]
            final = await finished(client, job_id)
            log = await log_of(client, job_id)
    finally:
        stop_server(server)
    assert final["status"] == "succeeded", log
    expected = _unprivileged_uid()
    assert any(line.startswith(f"uid {expected} ") for line in log), log
    model = server.data_dir / "jobs" / job_id / "model" / "weights"
    assert model.read_text() == "weights\n"
    if os.geteuid() == 0:  # the run over, the job's directory is the server's again
        job_dir = (server.data_dir / "jobs" / job_id).stat()
        assert (job_dir.st_uid, stat.S_IMODE(job_dir.st_mode)) == (0, 0o700)
        assert model.stat().st_uid == 0


ROOT = os.geteuid() == 0
"""The suite runs as root (CI, ``make test``), the case these tests are about; run as another
user, trainers run as the server's own user, which is what they then check."""

REACH = """
import json, os, sys
targets, config = json.loads(sys.argv[1]), json.load(open(sys.argv[-1]))
def say(kind, **fields):
    print(json.dumps({"type": kind, **fields}), flush=True)
say("log", text=f"uid {os.getuid()}")
for path in targets:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(1)
        say("log", text=f"reached {path}")
    except OSError as exc:
        say("log", text=f"refused {path}: {exc.strerror}")
say("log", text=f"training file {open(config['training_file']).readline()[:1]}")
os.makedirs(config["output_dir"], exist_ok=True)
say("progress", step=config["max_steps"], max_steps=config["max_steps"])
say("done", model_path=config["output_dir"])
"""
"""A trainer that tries to read each path of its first argument, then its training file."""


def _trainer_uid() -> int:
    return pwd.getpwnam(DEFAULT_TRAINER_USER).pw_uid if ROOT else os.geteuid()


def trainer_uids(job_id: str) -> set[int]:
    """The users of the processes running a job's trainer now (their command line names its
    run's directory; a trainer forked from a warm process shows the cold command's)."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and f"/{job_id}/attempt-" in (
                    proc / "cmdline").read_bytes().decode(errors="replace"):
                status = (proc / "status").read_text().splitlines()
                found.add(int(next(line for line in status if line.startswith("Uid:")).split()[1]))
        except OSError:  # it ended meanwhile
            continue
    return found


async def test_a_root_servers_trainers_run_as_their_own_user_and_reach_none_of_its_files(
        server_factory: Factory) -> None:
    server = server_factory(**SECRETS)  # no ALALLO_TRAINER_USER: the default is the subject
    data = server.data_dir
    async with connect(server) as client:
        # Another job first: a built-in trainer, forked from a warm process.
        other = (await new_job(client, {"type": "simulated", "step_delay_s": 0.05},
                               hyperparameters={"max_steps": 40})).json()["id"]
        await wait_for_job(client, other, lambda job: job["progress"]["step"] >= 1)
        assert trainer_uids(other) == {_trainer_uid()}
        assert (await finished(client, other))["status"] == "succeeded"
        written = sorted(p for p in (data / "jobs" / other).rglob("*") if p.is_file())
        upload_file = next((data / "files").iterdir())
        targets = [f"/proc/{server.process.pid}/environ", data, data / "jobs",
                   data / "jobs" / other, *written, upload_file,
                   *(p for p in data.iterdir() if p.name not in ("jobs", "models"))]
        response = await new_job(client, {"command": [sys.executable, "-c", REACH,
                                                      json.dumps(list(map(str, targets)))]})
        job_id = response.json()["id"]
        final = await finished(client, job_id)
        log = await log_of(client, job_id)
    assert final["status"] == "succeeded", log
    assert f"uid {_trainer_uid()}" in log
    assert "training file {" in log, "its own training file reaches it"
    reached = [line for line in log if line.startswith("reached ")]
    if ROOT:
        assert _trainer_uid() != 0
        assert reached == [], reached
        assert len([line for line in log if line.startswith("refused ")]) == len(targets)
        assert {p.name for p in targets if isinstance(p, Path) and p.parent == data} >= {
            "alallo.db", "api-key", "files"}
    else:  # the server's own user: it reaches what that user may (docs/security.md)
        assert f"reached {data / 'api-key'}" in reached


def _python_behind_a_private_folder(tmp_path: Path) -> Path:
    """An interpreter as ``/root/.pyenv``'s: a virtual environment in a folder only root
    may enter (0700), on this interpreter's base and its packages (a ``.pth``)."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    venv = private / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "alallo-test.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return venv / "bin" / "python"


@pytest.mark.slow
async def test_a_trl_job_trains_as_the_trainer_user_with_the_interpreter_behind_a_private_folder(
        server_factory: Factory, tmp_path: Path) -> None:
    python = _python_behind_a_private_folder(tmp_path)
    server = server_factory(ALALLO_PYTHON=str(python), HF_HOME=str(tmp_path / "hf"))
    async with connect(server) as client:
        response = await new_job(client, "trl")
        job_id = response.json()["id"]
        final = await finished(client, job_id)
        log = await log_of(client, job_id)
    assert final["status"] == "succeeded", log
    assert any((server.data_dir / "jobs" / job_id / "model").iterdir())
    # The built-in model is built by the first trainer that needs it, in the data folder.
    built = server.data_dir / "models" / "alallo--tiny-gpt2"
    assert {p.stat().st_uid for p in built.iterdir()} == {_trainer_uid()}


READ_MODEL = """
import json, pathlib, sys
config = json.load(open(sys.argv[-1]))
for path in sorted(pathlib.Path(config["model"]).iterdir()):  # as a trainer loads it
    path.read_bytes()
print(json.dumps({"type": "progress", "step": 1, "max_steps": 1}), flush=True)
print(json.dumps({"type": "done", "model_path": config["model"]}), flush=True)
"""
"""A trainer that reads every file of the model it is given, as TRL loads it, and ends."""


async def test_a_model_the_server_made_or_the_operator_names_is_read_by_the_trainer_user(
        server_factory: Factory, tmp_path: Path) -> None:
    # Both failed every attempt as a platform error (issue 31): the server's own copy of
    # the built-in model, built when it first served a completion (transformers writes the
    # weights 0600), and an operator's model folder behind a folder only root may enter.
    from alallo.trainers.tiny import build_tiny_gpt2

    server = server_factory(ALALLO_TRAINERS=registered("reader", [sys.executable, "-c",
                                                                   READ_MODEL]))
    private = tmp_path / "operator"
    private.mkdir(mode=0o700)
    local = build_tiny_gpt2(private / "my-model")
    (local / "model.safetensors").chmod(0o600)
    async with connect(server) as client:
        completion = await client.post("/v1/completions", json={
            "model": "alallo/tiny-gpt2", "prompt": "Hi", "max_tokens": 1}, timeout=120)
        assert completion.status_code == 200, completion.text
        built = server.data_dir / "models" / "alallo--tiny-gpt2"
        assert {p.stat().st_uid for p in built.iterdir()} == {os.getuid()}  # the server's
        jobs = [(await new_job(client, {"name": "reader"}, model=model)).json()["id"]
                for model in ("alallo/tiny-gpt2", str(local))]
        for job_id in jobs:
            final = await finished(client, job_id)
            assert final["status"] == "succeeded", (final, await log_of(client, job_id))
    assert private.stat().st_mode & 0o007 == 0  # still closed to other users


def test_a_server_whose_trainer_user_cannot_run_a_trainer_refuses_to_start_in_one_line(
        tmp_path: Path) -> None:
    wrapper = tmp_path / "python"  # runs for root alone, as an interpreter installed 0700
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o700)
    data = tmp_path / "data"
    if not ROOT:  # trainers run as the server's own user, who may run it: it serves
        stop_server(start_server(data, ALALLO_PYTHON=str(wrapper)))
        return
    done = subprocess.run(
        [sys.executable, "-m", "alallo", "serve", "--port", "0", "--data-dir", str(data)],
        env=server_env(data, ALALLO_PYTHON=str(wrapper)), capture_output=True, text=True,
        timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == (f"Error: trainers cannot run as the user {DEFAULT_TRAINER_USER}: cannot "
                    f"run {wrapper} as {DEFAULT_TRAINER_USER}: Permission denied (name another "
                    "user in ALALLO_TRAINER_USER, or make what it needs readable to it)")
    assert "serving at" not in done.stdout
