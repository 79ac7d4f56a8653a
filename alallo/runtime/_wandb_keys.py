"""The W&B API key a job logs in with, in OpenAI's form of the W&B integration.

OpenAI's request names a W&B ``project`` (``entity``, ``name``, ``tags``) and no key: the
organisation registered its key with OpenAI beforehand. Here the operator stores an
account's key (``alallo accounts set ACCOUNT --wandb-key``, in the store's
``account_secrets``), and a job whose integration gives none is created with that key in
its spec. Why at creation, not at each run: the job keeps the key it was accepted with (a
key changed meanwhile does not switch a running job's W&B account between runs). The key is
never shown: the job's answers leave ``api_key`` out (:func:`alallo.runtime.views.job_view`),
the command line says only whether one is stored.
"""

from __future__ import annotations

from .._errors import InvalidRequest
from ..jobs import JobSpec
from ..store import Store

__all__ = ["WANDB_KEY_SECRET", "with_wandb_key"]

WANDB_KEY_SECRET = "wandb_api_key"
"""The name of an account's W&B API key among its secrets."""

NO_KEY = ("integrations: no W&B API key is stored for this account, and the wandb "
          "integration gives none; the operator stores one with `alallo accounts set "
          "ACCOUNT --wandb-key` (or send wandb.api_key with the job)")
"""Why a job naming a W&B project without a key is refused when the account has none."""


async def with_wandb_key(store: Store, account_id: str, spec: JobSpec) -> JobSpec:
    """``spec`` with the account's stored W&B key in each W&B integration that gives none.

    Raises:
        InvalidRequest: such an integration, and no key stored (``param="integrations"``).
        StoreUnavailable: the store failed.
    """
    if all(i.wandb.api_key is not None for i in spec.integrations):
        return spec
    key = await store.account_secret(account_id, WANDB_KEY_SECRET)
    if key is None:
        raise InvalidRequest(NO_KEY, param="integrations")
    keyed = [i if i.wandb.api_key is not None else
             i.model_copy(update={"wandb": i.wandb.model_copy(update={"api_key": key})})
             for i in spec.integrations]
    return spec.model_copy(update={"integrations": keyed})
