"""OpenAI's graders (issue 34), each against known scores, through the ``openai`` SDK's
``fine_tuning.alpha.graders.run`` and ``.validate`` on a live server, and the python
grader's sandbox against hostile graders: each scores 0 with its reason, the server and the
next grader unaffected."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from support import LiveServer

from alallo.trainers.graders import (
    GRADER,
    Limits,
    check,
    grade,
    grade_many,
    run_python,
    similarity,
)

ITEM = {"answer": "Paris", "city": {"name": "Paris"}}


@pytest.fixture(scope="module")
def sandbox_user(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, int] | None:
    """The user the sandbox runs as: on a root machine the trainer user, opened to the
    interpreter as a server's start opens it (so that these tests need no server first)."""
    import trio

    from alallo import Settings
    from alallo.runtime._trainer_access import open_to_trainer_user, resolve_trainer_user

    settings = Settings(data_dir=tmp_path_factory.mktemp("sandbox") / "data")
    user = resolve_trainer_user(settings)
    if user is None:
        return None
    settings.data_dir.mkdir(parents=True)
    trio.run(open_to_trainer_user, settings, user)
    return user.uid, user.gid


@pytest.fixture
def sdk(live_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.api_key,
                       timeout=120) as client:
        yield client


@pytest.mark.unit
@pytest.mark.parametrize(("operation", "sample", "score"), [
    ("eq", "Paris", 1.0), ("eq", "paris", 0.0), ("ne", "Rome", 1.0), ("ne", "Paris", 0.0),
    ("like", "It is Paris.", 1.0), ("like", "It is paris.", 0.0),
    ("ilike", "it is PARIS", 1.0), ("ilike", "Rome", 0.0)])
def test_string_check(operation: str, sample: str, score: float) -> None:
    grader = GRADER.validate_python({"type": "string_check", "name": "s", "operation": operation,
                                     "input": "{{ sample.output_text }}",
                                     "reference": "{{ item.answer }}"})
    assert grade(grader, sample, ITEM).reward == score


@pytest.mark.unit
def test_text_similarity_metrics_give_their_libraries_scores() -> None:
    assert similarity("fuzzy_match", "Paris", "Paris") == 1.0
    assert similarity("fuzzy_match", "Pariss", "Paris") == pytest.approx(10 / 11)  # Indel
    assert similarity("bleu", "the cat sat on the mat", "the cat sat on the mat") == 1.0
    assert similarity("bleu", "a dog", "the cat sat on the mat") == 0.0
    assert 0 < similarity("bleu", "the cat sat on a mat", "the cat sat on the mat") < 1
    assert similarity("gleu", "the cat sat", "the cat sat") == 1.0
    assert similarity("rouge_1", "the cat sat", "the cat sat down") == pytest.approx(6 / 7)
    assert similarity("rouge_2", "the cat sat", "the cat sat down") == pytest.approx(0.8)
    assert similarity("rouge_5", "the cat sat", "the cat sat down") == 0.0
    assert similarity("rouge_l", "cat the sat", "the cat sat") == pytest.approx(2 / 3)
    for metric in ("cosine", "meteor"):
        with pytest.raises(ValueError, match="this server"):
            check(GRADER.validate_python({"type": "text_similarity", "name": "t",
                                          "input": "a", "reference": "b",
                                          "evaluation_metric": metric}))


@pytest.mark.unit
def test_templates_read_the_item_and_the_samples_json() -> None:
    grader = GRADER.validate_python({"type": "string_check", "name": "s", "operation": "eq",
                                     "input": "{{ sample.output_json.city }}",
                                     "reference": "{{ item.city.name }}"})
    assert grade(grader, json.dumps({"city": "Paris"}), ITEM).reward == 1.0
    missing = grade(grader, json.dumps({"city": "Paris"}), {"answer": "x"})
    assert missing.reward == 0.0 and missing.errors["invalid_variable_error"]


@pytest.mark.unit
def test_multi_evaluates_its_formula_over_its_graders_never_with_eval() -> None:
    grader = GRADER.validate_python({
        "type": "multi", "name": "m", "calculate_output": "0.5 * exact + 0.5 * close ^ 2",
        "graders": {
            "exact": {"type": "string_check", "name": "exact", "operation": "eq",
                      "input": "{{ sample.output_text }}", "reference": "{{ item.answer }}"},
            "close": {"type": "text_similarity", "name": "close", "input":
                      "{{ sample.output_text }}", "reference": "{{ item.answer }}",
                      "evaluation_metric": "fuzzy_match"}}})
    graded = grade(grader, "Pariss", ITEM)
    assert graded.sub_rewards == {"exact": 0.0, "close": pytest.approx(10 / 11)}
    assert graded.reward == pytest.approx(0.5 * (10 / 11) ** 2)
    assert grade(grader, "Paris", ITEM).reward == 1.0
    alone = GRADER.validate_python({  # the openai package's type: one grader, by its name
        "type": "multi", "name": "m", "calculate_output": "exact * 2",
        "graders": {"type": "string_check", "name": "exact", "operation": "eq",
                    "input": "{{ sample.output_text }}", "reference": "{{ item.answer }}"}})
    assert grade(alone, "Paris", ITEM).reward == 2.0
    hostile = grader.model_copy(update={"calculate_output": "__import__('os').getpid()"})
    with pytest.raises(ValueError, match="names no grader"):
        check(hostile)
    assert grade(hostile, "Paris", ITEM).errors["formula_parse_error"]


@pytest.mark.unit
def test_the_python_grader_scores_with_the_users_function(
        sandbox_user: tuple[int, int] | None) -> None:
    source = "def grade(sample, item):\n    return sample['output_text'].count('a') / 4\n"
    scores, _ = run_python(source, [{"sample": {"output_text": t}, "item": {}}
                                    for t in ("aaaa", "ab", "b")], user=sandbox_user)
    assert [s.score for s in scores] == [1.0, 0.25, 0.0]


@pytest.mark.unit
def test_a_steps_answers_are_graded_in_one_sandbox_and_a_multis_formula_per_answer(
        sandbox_user: tuple[int, int] | None) -> None:
    pid = {"type": "python", "name": "pid", "source": "import os\ndef grade(sample, item):\n"
                                                      "    return os.getpid()\n"}
    grader = GRADER.validate_python({"type": "multi", "name": "m", "calculate_output":
                                     "exact + 0 * pid", "graders": {"pid": pid, "exact": {
                                         "type": "string_check", "name": "exact",
                                         "input": "{{ sample.output_text }}",
                                         "reference": "{{ item.answer }}", "operation": "eq"}}})
    samples = [f"word {i}" for i in range(12)]
    graded = grade_many(grader, samples, [{"answer": "word 3"}] * 12, user=sandbox_user)
    assert [g.reward for g in graded] == [float(i == 3) for i in range(12)]
    assert len({g.sub_rewards["pid"] for g in graded}) == 1, "one process for the batch"
    assert [g.reward for g in graded] == [grade(grader, s, {"answer": "word 3"},
                                                user=sandbox_user).reward for s in samples]


HOSTILE = {  # the grader, and what its 0 must say (the sandbox stopped it, not a failed start)
    "reads /etc/passwd": ("def grade(s, i):\n    return len(open('/etc/passwd').read())",
                          ("PermissionError",)),
    "reads the server's data": ("import os\ndef grade(s, i):\n"
                                "    return len(os.listdir(i['data']))", ("PermissionError",)),
    "opens a socket": ("import socket\ndef grade(s, i):\n"
                       "    socket.create_connection(('127.0.0.1', i['port']), timeout=2)\n"
                       "    return 1", ("PermissionError", "unreachable")),
    "forks without end": ("import os\ndef grade(s, i):\n    while True:\n        os.fork()",
                          ("BlockingIOError",)),
    "allocates without end": ("def grade(s, i):\n    x = []\n    while True:\n"
                              "        x.append(bytearray(10 ** 7))", ("out of memory",)),
    "loops forever": ("def grade(s, i):\n    while True:\n        pass", ("did not return",)),
    "returns no number": ("def grade(s, i):\n    return 'high'", ("not a finite number",)),
}


@pytest.mark.unit
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_a_hostile_python_grader_scores_0_with_its_reason(
        hostile: str, tmp_path: Any, sandbox_user: tuple[int, int] | None) -> None:
    import socket

    (tmp_path / "secret").write_text("x")
    with socket.socket() as listening:  # something to connect to, were it reachable
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        source, reasons = HOSTILE[hostile]
        scores, _ = run_python(source, [
            {"sample": {"output_text": "a"}, "item": {"data": str(tmp_path), "port": port}}],
            Limits(wall_s=2, memory_mb=512), user=sandbox_user)
    (score,) = scores
    assert score.score == 0.0 and any(r in (score.error or "") for r in reasons), score
    again, _ = run_python("def grade(s, i):\n    return 1", [{"sample": {}, "item": {}}],
                          user=sandbox_user)
    assert again[0].score == 1.0, "the next grader is graded"


@pytest.mark.unit
def test_a_grader_printing_megabytes_keeps_a_kilobyte_of_it(
        sandbox_user: tuple[int, int] | None) -> None:
    scores, output = run_python("def grade(s, i):\n    print('x' * 50_000_000)\n    return 1",
                                [{"sample": {}, "item": {}}], user=sandbox_user)
    assert scores[0].score == 1.0 and 0 < len(output) <= 1024


@pytest.mark.any_backend  # the graders are the subject, not the store
def test_graders_run_and_validate_through_the_openai_sdk(sdk: openai.OpenAI) -> None:
    fuzzy = {"type": "text_similarity", "name": "close", "input": "{{ sample.output_text }}",
             "reference": "{{ item.answer }}", "evaluation_metric": "fuzzy_match"}
    validated = sdk.fine_tuning.alpha.graders.validate(grader=fuzzy)  # type: ignore[arg-type]
    assert validated.grader is not None
    run = sdk.fine_tuning.alpha.graders.run(grader=fuzzy, model_sample="Pariss",  # type: ignore[arg-type]
                                            item=ITEM)
    assert run.reward == pytest.approx(10 / 11) == grade(GRADER.validate_python(fuzzy), "Pariss",
                                                         ITEM).reward
    assert run.metadata.name == "close" and not run.metadata.errors.other_error

    python = {"type": "python", "name": "count",
              "source": "def grade(sample, item):\n    return sample['output_text'].count('a')"}
    assert sdk.fine_tuning.alpha.graders.run(grader=python, model_sample="banana",  # type: ignore[arg-type]
                                             item={}).reward == 3.0
    broken = sdk.fine_tuning.alpha.graders.run(  # type: ignore[arg-type]
        grader={**python, "source": "def grade(sample, item):\n    return 1 / 0"},
        model_sample="x", item={})
    assert broken.reward == 0.0 and broken.metadata.errors.python_grader_runtime_error
    assert "ZeroDivisionError" in (broken.metadata.errors.python_grader_runtime_error_details
                                   or "")

    for grader, param in [({**fuzzy, "evaluation_metric": "cosine"}, "grader.evaluation_metric"),
                          ({**python, "source": "x = 1"}, "grader.source"),
                          ({**fuzzy, "operation": "eq"}, "grader.text_similarity.operation"),
                          ({"type": "multi", "name": "m", "calculate_output": "a + b",
                            "graders": {"a": fuzzy}}, "grader.calculate_output")]:
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.fine_tuning.alpha.graders.validate(grader=grader)  # type: ignore[arg-type]
        assert refused.value.param == param, (param, refused.value.message)


@pytest.mark.any_backend
def test_score_model_asks_a_model_of_the_account_through_the_servers_chat(
        sdk: openai.OpenAI) -> None:
    judge = {"type": "score_model", "name": "judge", "model": "alallo/tiny-gpt2",
             "range": [0, 1], "input": [{"role": "user", "content":
                                         "Score {{ sample.output_text }} against {{ item.answer }}"}],
             "sampling_params": {"max_completions_tokens": 4, "temperature": 0}}
    run = sdk.fine_tuning.alpha.graders.run(grader=judge, model_sample="Paris",  # type: ignore[arg-type]
                                            item=ITEM)
    errors = run.metadata.errors
    # The tiny model answers bytes, not a number: parsed as OpenAI does, or flagged so.
    assert 0.0 <= run.reward <= 1.0
    assert errors.model_grader_parse_error or not errors.model_grader_server_error, errors
    missing = sdk.fine_tuning.alpha.graders.run(  # type: ignore[arg-type]
        grader={**judge, "model": "nobody/nothing"}, model_sample="Paris", item=ITEM)
    assert missing.reward == 0.0 and missing.metadata.errors.model_grader_server_error
    # OpenAI's sampling parameters by their names (max_completions_tokens), nothing else.
    with pytest.raises(openai.BadRequestError, match="max_tokens") as refused:
        sdk.fine_tuning.alpha.graders.run(grader={  # type: ignore[arg-type]
            **judge, "sampling_params": {"max_tokens": 4}}, model_sample="Paris", item=ITEM)
    assert refused.value.body["param"].startswith("grader")  # type: ignore[index]


@pytest.mark.any_backend
def test_the_cli_validates_and_runs_a_grader_file(live_server: LiveServer, tmp_path: Any) -> None:
    import subprocess
    import sys

    def alallo(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"ALALLO_URL": live_server.url, "ALALLO_API_KEY": live_server.api_key,
               "COLUMNS": "100", "PATH": "/usr/bin:/bin"}
        return subprocess.run([sys.executable, "-m", "alallo", "graders", *args],
                              capture_output=True, text=True, env=env, timeout=120)

    grader = tmp_path / "grader.json"
    grader.write_text(json.dumps({
        "type": "multi", "name": "both", "calculate_output": "exact + close",
        "graders": {"exact": {"type": "string_check", "name": "exact", "operation": "eq",
                              "input": "{{ sample.output_text }}",
                              "reference": "{{ item.answer }}"},
                    "close": {"type": "python", "name": "close", "source":
                              "def grade(sample, item):\n    return 1 / 0"}}}))
    checked = alallo("validate", str(grader))
    assert checked.returncode == 0 and "Valid: multi grader both" in checked.stdout, checked
    ran = alallo("run", str(grader), "--sample", "Paris", "--item", json.dumps(ITEM))
    assert ran.returncode == 0, ran.stderr
    assert "Reward 1" in ran.stdout and "exact" in ran.stdout
    assert "python_grader_runtime_error: ZeroDivisionError" in ran.stdout, ran.stdout
    as_json = json.loads(alallo("run", str(grader), "--sample", "Rome", "--item",
                                json.dumps(ITEM), "--json").stdout)
    assert as_json["sub_rewards"] == {"exact": 0.0, "close": 0.0}

    grader.write_text(json.dumps({"type": "python", "name": "p", "source": "x = 1"}))
    refused = alallo("validate", str(grader))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "grader.source: it defines no function grade" in refused.stderr, refused.stderr
    missing = alallo("run", str(tmp_path / "none.json"), "--sample", "x")
    assert missing.returncode == 1 and "cannot read" in missing.stderr


@pytest.mark.any_backend
async def test_both_python_clients_run_a_grader(live_server: LiveServer) -> None:
    from alallo.client import AsyncClient, Client

    exact = {"type": "string_check", "name": "exact", "operation": "ilike",
             "input": "{{ sample.output_text }}", "reference": "{{ item.answer }}"}
    with Client(live_server.url, api_key=live_server.api_key) as client:
        assert client.validate_grader(exact)["grader"]["operation"] == "ilike"
        assert client.run_grader(exact, "in paris", ITEM)["reward"] == 1.0
    async with AsyncClient(live_server.url, api_key=live_server.api_key) as aclient:
        assert (await aclient.run_grader(exact, "in Rome", ITEM))["reward"] == 0.0
        from alallo import InvalidRequest
        with pytest.raises(InvalidRequest) as refused:
            await aclient.validate_grader({**exact, "operation": "like_not"})
        assert refused.value.param == "grader.string_check.operation"
