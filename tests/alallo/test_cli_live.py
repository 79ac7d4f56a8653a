"""The command line against a real server, as a user types it (journeys 2 and 3)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import EXAMPLES, LiveServer

pytestmark = pytest.mark.any_backend  # the subject does not depend on the store


def alallo(server: LiveServer, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"ALALLO_URL": server.url, "ALALLO_API_KEY": server.api_key, "COLUMNS": "200",
           "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "alallo", *args], capture_output=True,
                            text=True, env=env, timeout=120)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_upload_watch_events_and_cancel_a_finished_job(live_server: LiveServer) -> None:
    upload = alallo(live_server, "files", "upload", str(EXAMPLES / "chat.jsonl"), "--json")
    file = json.loads(upload.stdout)
    assert file["format"] == "messages" and file["line_count"] == 16

    created = alallo(live_server, "jobs", "create", "--model", "alallo/tiny-gpt2",
                     "--training-file", file["id"], "--max-steps", "12", "--trainer",
                     "simulated", "--watch")
    job_id = re.search(r"ft-[0-9a-f]{24}", created.stdout)
    assert job_id is not None, created.stdout
    assert "succeeded" in created.stdout
    assert "Step 10/12: loss" in created.stdout

    events = alallo(live_server, "jobs", "events", job_id.group(0))
    header = events.stdout.splitlines()
    assert any(all(col in line for col in ("Message", "Type", "Created at", "Hash"))
               for line in header)
    assert events.stdout.index("JOB_PENDING") < events.stdout.index("JOB_COMPLETE")

    cancel = alallo(live_server, "jobs", "cancel", job_id.group(0), check=False)
    assert cancel.returncode == 1
    assert (f"cannot cancel {job_id.group(0)}: the job has already finished (succeeded)"
            in " ".join(cancel.stderr.split()))
    assert "Traceback" not in cancel.stderr


def test_a_broken_line_7_is_refused_with_its_number(live_server: LiveServer,
                                                    tmp_path: Path) -> None:
    lines = [json.dumps({"messages": [{"role": "user", "content": f"q{i}"},
                                      {"role": "assistant", "content": f"a{i}"}]})
             for i in range(10)]
    lines[6] = '{"messages": [{"role": "user", "content": "unterminated"}'
    bad = tmp_path / "broken.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    result = alallo(live_server, "files", "upload", str(bad), check=False)
    assert result.returncode == 1
    assert "line 7" in result.stderr and "Traceback" not in result.stderr


def test_a_conversation_without_a_reply_is_refused_with_its_line(live_server: LiveServer,
                                                                 tmp_path: Path) -> None:
    reply = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    question = {"messages": [{"role": "system", "content": "be brief"},
                             {"role": "user", "content": "and then?"}]}
    data = tmp_path / "no-reply.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in (reply, reply, question)) + "\n")
    result = alallo(live_server, "files", "upload", str(data), check=False)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: line 3: no assistant message")
    assert "(param: file)" in result.stderr


@pytest.mark.parametrize("args", [("jobs", "get", "ft-000000000000000000000000"),
                                  ("jobs", "events", "ft-nope")])
def test_unknown_ids_are_one_line(live_server: LiveServer, args: tuple[str, ...]) -> None:
    result = alallo(live_server, *args, check=False)
    assert result.returncode == 1 and "no job" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_metrics_and_the_result_file_from_the_command_line(live_server: LiveServer,
                                                            tmp_path: Path) -> None:
    uploaded = [json.loads(alallo(live_server, "files", "upload", str(EXAMPLES / name),
                                  "--json").stdout)["id"] for name in ("sample.jsonl",) * 2]
    created = alallo(live_server, "jobs", "create", "--model", "alallo/tiny-gpt2",
                     "--training-file", uploaded[0], "--validation-file", uploaded[1],
                     "--max-steps", "20", "--trainer", "simulated", "--watch")
    found = re.search(r"ft-[0-9a-f]{24}", created.stdout)
    assert found is not None and "succeeded" in created.stdout, created.stdout
    job_id = found.group(0)

    table = alallo(live_server, "jobs", "metrics", job_id).stdout
    header = next(line for line in table.splitlines() if "Step" in line)
    assert "Train loss" in header and "Valid loss" in header and "LR" in header
    assert "Grad norm" not in header  # the simulated trainer reports none: no empty column
    steps = [m.group(1) for line in table.splitlines() if (m := re.match(r"\W*(\d+) ", line))]
    assert steps == ["10", "20"], table
    rows = alallo(live_server, "jobs", "metrics", job_id, "--csv", "--after", "10").stdout
    assert rows.splitlines()[0].startswith("step,train_loss,train_accuracy,valid_loss,")
    assert [line.split(",")[0] for line in rows.splitlines()[1:]] == ["20"]

    job = json.loads(alallo(live_server, "jobs", "get", job_id, "--json").stdout)
    (result,) = job["result_files"]
    target = tmp_path / "metrics.csv"
    saved = alallo(live_server, "files", "download", result, "-o", str(target))
    assert f"Saved {result} to {target}" in saved.stdout
    lines = target.read_text().splitlines()
    assert lines[0].startswith("step,train_loss,train_accuracy,valid_loss,")
    assert lines[0] == rows.splitlines()[0], "one set of columns (issue 35)"
    assert [line.split(",")[0] for line in lines[1:]] == ["10", "20"]
    missing = alallo(live_server, "files", "download", "file-nope", check=False)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


def test_chat_takes_a_turn_per_line_and_says_a_bad_model_in_one_line(
        live_server: LiveServer) -> None:
    env = {"ALALLO_URL": live_server.url, "ALALLO_API_KEY": live_server.api_key,
           "COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    talk = subprocess.run([sys.executable, "-m", "alallo", "chat", "alallo/tiny-gpt2",
                           "--max-tokens", "3", "--system", "Be brief."],
                          input="Hello\n\nAnd again\n/exit\nnever sent\n", capture_output=True,
                          text=True, env=env, timeout=120)
    assert talk.returncode == 0, talk.stderr
    assert "Traceback" not in talk.stderr and "Talking to" not in talk.stdout  # not a terminal
    assert talk.stdout.count("\n") >= 2  # an answer to each of the two turns
    unknown = subprocess.run([sys.executable, "-m", "alallo", "chat", "ft:nobody:acct:" + "0" * 24],
                             input="Hello\n", capture_output=True, text=True, env=env,
                             timeout=120)
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert unknown.stderr.startswith("Error: ")
