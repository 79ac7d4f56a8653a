"""Plans and estimates for the local capacity node.

The embedded default has one capacity node: this machine's CPU. A job's
plan is that node; its training time is ``startup + max_steps × step time``
with the step time scaled from a measured baseline (the tiny model, batch 4,
128 tokens) by parameter count and batch size. The range is wider on the
upper side, as the seeds ask, because a job may wait for capacity.
"""

from __future__ import annotations

from ._catalogue import CatalogueModel
from ._job import Plan
from ._spec import JobSpec
from ._timetext import TimeRange

__all__ = ["ESTIMATE_HIGH", "ESTIMATE_LOW", "LOCAL_CPU", "estimate_time", "plan_for"]

ESTIMATE_LOW = 0.8
"""Low end of an estimate as a share of the expected time."""
ESTIMATE_HIGH = 1.5
"""High end of an estimate as a share of the expected time (wider: queue wait)."""
LOCAL_CPU = "cpu"
DEFAULT_CPU_PRICE_PER_HOUR = 0.10
"""USD per hour of the local CPU node (a nominal price, so the ledger has figures)."""
_BASELINE_PARAMETERS = 133_000
_BASELINE_STEP_S = 0.06
"""Seconds per step of the tiny model on one CPU core, batch 4 (measured)."""
_STARTUP_S = 8.0
"""Trainer start: Python imports plus model load, measured on the tiny model."""
_SIMULATED_STARTUP_S = 0.3


def plan_for(model: CatalogueModel, spec: JobSpec, *,
             cpu_price_per_hour: float = DEFAULT_CPU_PRICE_PER_HOUR) -> Plan:
    """The plan of a job on the local CPU node (USD per hour as the operator set it)."""
    from ._spec import SimulatedTrainer

    batch = spec.hyperparameters.batch_size or 4
    if isinstance(spec.trainer, SimulatedTrainer):
        step_s = spec.trainer.step_delay_s
        startup_s = _SIMULATED_STARTUP_S
    else:
        scale = max(1.0, model.parameters / _BASELINE_PARAMETERS) * batch / 4
        step_s = _BASELINE_STEP_S * scale
        startup_s = _STARTUP_S
    bytes_per_parameter = 0.5 if spec.precision == "4-bit" else 2.0
    training_factor = 1.2 if spec.adapter == "lora" else 4.0
    memory_gb = model.parameters * bytes_per_parameter * training_factor / 1e9
    return Plan(
        device_type=LOCAL_CPU,
        devices=1,
        memory_gb=round(max(memory_gb, 0.1), 2),
        price_per_hour=cpu_price_per_hour,
        step_time_s=step_s,
        startup_s=startup_s,
    )


def estimate_time(plan: Plan, max_steps: int) -> TimeRange:
    """The training time range of ``max_steps`` on ``plan``."""
    expected = plan.startup_s + max_steps * plan.step_time_s
    return TimeRange(low_s=expected * ESTIMATE_LOW, high_s=expected * ESTIMATE_HIGH)


def estimate_price(plan: Plan, time: TimeRange) -> tuple[float, float]:
    """(low, high) USD for a time range on ``plan``."""
    per_s = plan.price_per_hour / 3600
    return (round(time.low_s * per_s, 6), round(time.high_s * per_s, 6))
