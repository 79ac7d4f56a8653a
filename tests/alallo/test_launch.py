"""A run's command and environment from its grant: torchrun for several devices, and each
job's own devices in ``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

from pathlib import Path

import pytest

from alallo._trainer_registry import TrainerRegistry
from alallo.capacity import Grant, Placement
from alallo.jobs import CommandTrainer, JobSpec, Plan, SimulatedTrainer
from alallo.runtime._launch import (
    COMMANDS_NOT_ALLOWED,
    command_refusal,
    failure_switch_refusal,
    launch,
    prune_checkpoints,
    trainer_command,
    trainer_env,
)

pytestmark = pytest.mark.unit


def grant(device: str, indices: tuple[int, ...], simulated: bool = False) -> Grant:
    plan = Plan(device_type=device, devices=len(indices), memory_gb=1, price_per_hour=1,
                step_time_s=1, startup_s=1)
    return Grant(Placement("n", device, len(indices), simulated, indices), plan)


def test_each_job_sees_only_its_own_gpus(tmp_path: Path) -> None:
    assert trainer_env(tmp_path, None, grant("H100-80GB", (2, 3)).placement) == {
        "CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert trainer_env(tmp_path, None, grant("cpu", (0,)).placement) == {
        "CUDA_VISIBLE_DEVICES": ""}, "a CPU job uses no GPU"
    assert trainer_env(tmp_path, None, grant("H100-80GB", (0,), simulated=True).placement) == {}


def test_several_devices_start_the_built_in_trainer_under_torchrun(tmp_path: Path) -> None:
    from test_lifecycle import new_job

    job = new_job()
    config = tmp_path / "config.json"
    registry = TrainerRegistry([])
    assert trainer_command(job, grant("cpu", (0,)), config, python="py",
                           registry=registry) == ["py", "-m", "alallo.trainers.trl", str(config)]
    assert trainer_command(job, grant("cpu", (0, 1)), config, python="py",
                           registry=registry) == [
        "py", "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
        "-m", "alallo.trainers.trl", str(config)]


def test_pruning_keeps_the_newest_three_up_to_the_one_recorded(tmp_path: Path) -> None:
    made = {}
    for attempt, step in ((1, 10), (1, 20), (1, 30), (2, 40), (2, 50), (2, 60)):
        made[step] = tmp_path / f"attempt-{attempt}" / "checkpoints" / f"checkpoint-{step}"
        made[step].mkdir(parents=True)
    # 50 recorded; 60 written but not reported yet (the trainer may be writing it).
    prune_checkpoints(tmp_path, str(made[50]))
    assert sorted(s for s, p in made.items() if p.exists()) == [30, 40, 50, 60]
    prune_checkpoints(tmp_path, str(made[60]))  # OpenAI keeps a job's last 3 too
    assert sorted(s for s, p in made.items() if p.exists()) == [40, 50, 60]


def test_the_hub_token_goes_to_the_built_in_trainer_alone(tmp_path: Path) -> None:
    from pydantic import SecretStr
    from test_lifecycle import new_job

    token = SecretStr("hf_" + "x" * 34)
    placement = grant("cpu", (0,)).placement
    built_in = new_job()
    assert launch(built_in, placement, ["py"], tmp_path, None, token).env["HF_TOKEN"] == (
        token.get_secret_value())
    assert "HF_TOKEN" not in launch(built_in, placement, ["py"], tmp_path, None).env
    for trainer in ("simulated", {"command": ["my-trainer"]}, {"name": "registered"}):
        other = built_in.model_copy(update={"spec": built_in.spec.model_copy(
            update={"trainer": JobSpec.model_validate(
                {"model": "m", "training_file": "f", "trainer": trainer}).trainer})})
        assert "HF_TOKEN" not in launch(other, placement, ["py"], tmp_path, None, token).env


@pytest.mark.parametrize("switch", [{"fail_at_step": 2}, {"memory_surprise": 2.0}])
def test_a_failure_switch_runs_only_for_an_account_trusted_with_commands(
        switch: dict[str, float]) -> None:
    trainer = SimulatedTrainer.model_validate(switch)
    name = next(iter(switch))
    param, why = failure_switch_refusal(trainer, allow_commands=False) or ("", "")
    assert param == f"trainer.{name}" and why.startswith(f"{name} makes the simulated")
    assert command_refusal(trainer, allow_commands=False) == why  # refused at run time too
    assert command_refusal(trainer, allow_commands=True) is None
    pace = SimulatedTrainer(step_delay_s=0.5, step_noise=0.3, slow_step_every=2)
    assert command_refusal(pace, allow_commands=False) is None
    assert command_refusal(CommandTrainer(command=["sh"]),
                           allow_commands=False) == COMMANDS_NOT_ALLOWED
