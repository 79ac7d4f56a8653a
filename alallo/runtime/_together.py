"""Together's price estimate, ``POST /v1/fine-tunes/estimate-price``, answered from alallo's
own estimate (:meth:`alallo.Runtime.estimate`).

Together's SDK asks it before every ``fine_tuning.create`` (and warns when
``allowed_to_proceed`` is false); its request and answer are Together's
(``FineTuningEstimatePriceParams``, ``AvailableEstimate`` / ``UnavailableEstimate``):

- the request's ``model``, ``training_file``, ``validation_file``, ``from_checkpoint``,
  ``n_epochs`` and ``training_method`` are a job spec's; ``training_type`` ``{"type":
  "Full"}`` is ``adapter: full``, ``{"type": "Lora", "lora_r", "lora_alpha",
  "lora_dropout", "lora_trainable_modules"}`` LoRA with those hyperparameters (the
  modules comma-separated, or ``all-linear``); ``n_evals`` counts the evaluation tokens
  (it needs a ``validation_file``). Any other field is refused by name (422), as the
  spec's are.
- ``estimated_total_price`` is the high end of alallo's price range (what
  ``allowed_to_proceed`` is decided on); ``estimated_train_token_count`` the tokens the
  run would be billed for; ``estimated_eval_token_count`` ``n_evals`` times the
  validation file's tokens; ``user_limit`` the account's billing limit (how far below
  zero its balance may go: Together's credit limit). A job no node can run answers
  ``estimation_available: false`` with the reason (``Not available right now.``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._errors import InvalidRequest
from ..capacity import tokens_per_example

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["TogetherEstimateRequest", "together_estimate"]

REQUEST = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
"""Checked as a job spec is (:data:`alallo.jobs._hyperparameters.REQUEST`)."""


class _FullTraining(BaseModel):
    model_config = REQUEST

    type: Literal["Full"]


class _LoraTraining(BaseModel):
    model_config = REQUEST

    type: Literal["Lora"]
    lora_r: int | None = None
    lora_alpha: int | None = None
    lora_dropout: float | None = None
    lora_trainable_modules: str | None = None


class TogetherEstimateRequest(BaseModel):
    """Together's ``FineTuningEstimatePriceParams``, checked as strictly as a job spec."""

    model_config = REQUEST

    training_file: str = Field(min_length=1)
    model: str = Field(min_length=1)
    """Required here (Together's SDK sends ``""`` with only a ``from_checkpoint``: then
    refused, naming ``model``)."""
    validation_file: str | None = None
    from_checkpoint: str | None = None
    n_epochs: int | None = Field(default=None, ge=1, le=100)
    n_evals: int = Field(default=0, ge=0, le=1000)
    training_method: dict[str, Any] | None = None
    """``{"method": "sft"|"dpo", ...}``: checked as a job spec's ``training_method``."""
    training_type: _FullTraining | _LoraTraining | None = Field(default=None,
                                                                discriminator="type")

    def job_spec(self) -> dict[str, Any]:
        """The alallo job spec this request prices (validated by the runtime)."""
        spec: dict[str, Any] = {"model": self.model, "training_file": self.training_file}
        hyperparameters: dict[str, Any] = {}
        if self.validation_file:
            spec["validation_file"] = self.validation_file
        if self.from_checkpoint:
            spec["from_checkpoint"] = self.from_checkpoint
        if self.n_epochs is not None:
            hyperparameters["n_epochs"] = self.n_epochs
        if self.training_method is not None:
            spec["training_method"] = self.training_method
        kind = self.training_type
        if isinstance(kind, _FullTraining):
            spec["adapter"] = "full"
        elif isinstance(kind, _LoraTraining):
            modules = kind.lora_trainable_modules
            hyperparameters.update({key: value for key, value in {
                "lora_rank": kind.lora_r, "lora_alpha": kind.lora_alpha,
                "lora_dropout": kind.lora_dropout,
                "lora_target_modules": (None if modules is None else modules
                                        if modules == "all-linear"
                                        else [m.strip() for m in modules.split(",") if m.strip()]),
            }.items() if value is not None})
        if hyperparameters:
            spec["hyperparameters"] = hyperparameters
        return spec


async def together_estimate(runtime: Runtime, account_id: str,
                            body: Mapping[str, Any]) -> dict[str, Any]:
    """Together's estimate of ``body`` for the account: an ``AvailableEstimate`` or an
    ``UnavailableEstimate`` as a dict (see the module).

    Raises:
        pydantic.ValidationError: a field Together's request does not have, or a bad value.
        InvalidRequest: ``n_evals`` without a ``validation_file``; an unknown model or
            file; what :meth:`alallo.Runtime.estimate` refuses.
        Forbidden: as :meth:`alallo.Runtime.estimate`.
    """
    request = TogetherEstimateRequest.model_validate(dict(body))
    if request.n_evals and not request.validation_file:
        raise InvalidRequest("n_evals counts evaluations on a validation_file: give one",
                             param="n_evals")
    estimate = await runtime.estimate(account_id, request.job_spec())
    if not estimate["available"]:
        reason = estimate["reason"] or "Not available right now."
        detail = estimate.get("detail")
        return {"estimation_available": False,
                "unavailable_reason": f"{reason} {detail}" if detail else reason}
    eval_tokens = 0
    if request.n_evals and request.validation_file:
        validation = await runtime.files.get(account_id, request.validation_file)
        try:
            model = await runtime.planning.find_model(request.model)
            per_example = min(tokens_per_example(model, validation.bytes, validation.line_count),
                              model.context_length or float("inf"))
        except InvalidRequest:  # a fine-tuned model's id: counted as a base model's text
            per_example = validation.bytes / max(validation.line_count, 1) / 4
        eval_tokens = round(request.n_evals * validation.line_count * per_example)
    _balance, billing_limit = await runtime.store.balance(account_id)
    price = estimate["price"]
    return {
        "estimation_available": True,
        "allowed_to_proceed": estimate["allowed_to_proceed"],
        "estimated_total_price": price["high"] if price else None,
        "estimated_train_token_count": estimate.get("train_tokens"),
        "estimated_eval_token_count": eval_tokens,
        "user_limit": billing_limit,
    }

