"""`Plan`: where a job runs, the devices it needs and what they cost (data only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Plan"]


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

    @property
    def training_s(self) -> float:
        """Expected seconds of training: start-up plus every step."""
        return self.startup_s + self.max_steps * self.step_time_s

    @property
    def price(self) -> float:
        """Expected USD for the whole training."""
        return self.training_s * self.price_per_hour / 3600
