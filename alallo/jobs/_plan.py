"""`Plan`: where a job runs, the devices it needs and what they cost; the kinds of device (data only)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

__all__ = ["DEVICE_TYPES", "DeviceType", "Plan"]


class Plan(BaseModel):
    """Where a job runs: the devices it needs and what they cost."""

    model_config = ConfigDict(frozen=True)

    device_type: str
    devices: int
    memory_gb: float
    price_per_hour: float
    """USD per hour for all the plan's devices together."""
    step_time_s: float
    """Expected seconds per optimizer step on this plan."""
    startup_s: float
    """Expected seconds from start to the first step (imports, model load)."""
    max_steps: int = 0
    """Steps the plan is for."""
    eval_s: float = 0.0
    """Expected seconds of evaluation on the validation file, all evaluations together
    (not charged: the price counts training only)."""
    tokens_per_step: float | None = None
    """Training tokens one step is priced for: the batch times the examples' average
    length, cut at the model's context (a job's ``trained_tokens`` counts its charged steps
    at this); None for plans made before it was recorded."""

    @property
    def training_s(self) -> float:
        """Expected seconds of training: start-up plus every step."""
        return self.startup_s + self.max_steps * self.step_time_s

    @property
    def price(self) -> float:
        """Expected USD for the whole training."""
        return self.training_s * self.price_per_hour / 3600


@dataclass(frozen=True)
class DeviceType:
    """A kind of accelerator (or the CPU).

    Attributes:
        name: e.g. ``H100-80GB``.
        memory_gb: memory per device, GB.
        peak_tflops: dense BF16 peak, TFLOP/s (for the CPU: what training reaches).
        price_per_hour: USD per device-hour.
        efficiency: share of the peak a fine-tuning step reaches (MFU).
    """

    name: str
    memory_gb: float
    peak_tflops: float
    price_per_hour: float
    efficiency: float = 0.4


DEVICE_TYPES: dict[str, DeviceType] = {
    d.name: d
    for d in (
        DeviceType("H100-80GB", 80, 989, 2.99),
        DeviceType("A100-80GB", 80, 312, 1.79),
        DeviceType("L40S-48GB", 48, 362, 0.99),
        DeviceType("cpu", 16, 0.02, 0.10, efficiency=1.0),
    )
}
