"""The JSON of every answer of the HTTP API (API.md), written once, as TypedDicts.

One owner for each shape: the server builds its answers as these types
(:mod:`alallo.runtime._views`), ``/openapi.json`` is generated from them with
pydantic (:func:`pydantic.TypeAdapter.json_schemas`, docstrings included), and
the Python clients return them, so an editor completes
``job["time_left"]["text"]`` and a type checker catches ``job["progres"]``. At
runtime every result is still the plain ``dict`` that ``json.loads`` made (a
TypedDict is a dict): a field the server adds before these types name it is
there to read.

This module imports nothing of alallo, so the clients use it without the
server. The job's own shapes are in :mod:`alallo.api._job_shapes`.
"""

# No ``from __future__ import annotations``: ``NotRequired`` is found in a
# TypedDict's annotations only when they are evaluated (PEP 655).
# ``typing_extensions.TypedDict`` rather than ``typing``'s: pydantic reads it
# on Python < 3.12 (and its attribute docstrings, for OpenAPI's descriptions).
from typing import Generic, Literal, NotRequired, TypeVar

from typing_extensions import TypedDict

__all__ = [
    "Account",
    "AccountSpend",
    "Capacity",
    "CapacityNode",
    "DashboardLink",
    "ErrorBody",
    "ErrorDetail",
    "Estimate",
    "EstimatePlan",
    "EstimatePrice",
    "FileDeleted",
    "FileList",
    "FileObject",
    "Health",
    "JobError",
    "Model",
    "ModelList",
    "NodeDrain",
    "Page",
    "TimeRange",
    "TogetherPriceEstimate",
    "Trainer",
    "TrainerList",
    "document",
]

T = TypeVar("T")


class Page(TypedDict, Generic[T]):
    """One page of a list (``GET /v1/files``, ``/v1/fine_tuning/jobs`` ...).

    ``data`` holds the items in the list's order; ``has_more`` says whether a
    request with ``after`` set to the last item's id (or ``seq``/``n``) finds more.
    """

    object: Literal["list"]
    data: list[T]
    has_more: bool


# -- files ------------------------------------------------------------------------


class FileObject(TypedDict):
    """An uploaded training file (``upload_file``, ``get_file``, ``iter_files``)."""

    id: str
    """``file-…``."""
    object: Literal["file"]
    filename: str
    bytes: int
    """Size in bytes."""
    purpose: str
    """``fine-tune`` (uploaded), or ``fine-tune-results`` (a job's metrics CSV)."""
    created_at: int
    """Unix seconds."""
    line_count: int
    """Examples (JSONL lines) in the file; rows of a metrics CSV."""
    format: Literal["text", "messages", "prompt_completion", "preference", "chosen_rejected",
                    "reinforcement", "csv"]
    status: Literal["processed", "error"]
    status_details: str | None
    expires_at: int | None
    """When it expires (Unix s; ``expires_after`` at upload), or None: kept until deleted."""


class FileList(TypedDict):
    """A page of the account's files, newest first unless ``order=asc`` (``list_files``)."""

    object: Literal["list"]
    data: list[FileObject]
    has_more: bool
    first_id: str | None
    """The page's first file id; None when it is empty (as OpenAI's)."""
    last_id: str | None
    """The page's last file id: ``after`` for the next page."""


class FileDeleted(TypedDict):
    """The answer to ``delete_file``."""

    id: str
    object: Literal["file"]
    deleted: bool


# -- models, capacity and estimates ---------------------------------------------------


class ModelDeleted(TypedDict):
    """The answer to ``DELETE /v1/models/{id}`` (OpenAI's)."""

    id: str
    object: Literal["model"]
    deleted: bool


class Model(TypedDict):
    """A model (``list_models``, ``get_model``; OpenAI's ``model``): of the catalogue, a
    fine-tuned model, or a checkpoint model (``ft:…:ckpt-step-N``)."""

    id: str
    """E.g. ``alallo/tiny-gpt2``: what ``create_job(model=...)`` takes."""
    object: Literal["model"]
    created: int
    """Unix seconds: when a fine-tuned model's job finished, when a checkpoint was saved, when
    a catalogue model's files were written on this server (0: it has none here yet)."""
    owned_by: str
    """``alallo`` (the built-in catalogue), ``local`` (a model directory on this server's
    disk) or, for a Hugging Face hub model in the server's cache, its organisation; the
    account, for a fine-tuned or checkpoint model."""
    revision: str | None
    """A hub model's commit hash in the cache (the weights a job of it trains); else None."""
    parameters: int
    """Number of weights."""
    context_length: int
    """Longest example, in tokens."""
    adapters: list[str]
    """``lora`` and/or ``full``."""
    precisions: list[str]
    """``16-bit`` and/or ``4-bit``."""
    runnable_here: bool
    """Whether this server's nodes can train it."""


class ModelList(TypedDict):
    """The catalogue (``list_models``)."""

    object: Literal["list"]
    data: list[Model]
    has_more: bool


class Trainer(TypedDict):
    """A trainer a job may name (``list_trainers``): built in, or registered by the operator."""

    object: Literal["trainer"]
    name: str
    """What ``create_job(trainer=...)`` takes, e.g. ``trl`` or ``my-sft``."""
    description: str
    built_in: bool


class TrainerList(TypedDict):
    """The trainers of the server (``list_trainers``), built-in ones first."""

    object: Literal["list"]
    data: list[Trainer]
    has_more: bool


class CapacityNode(TypedDict):
    """A node of the pool and what runs on it."""

    name: str
    device_type: str
    """E.g. ``cpu``, ``H200``."""
    devices: int
    free: int
    """Devices not held by a job."""
    busy: dict[str, int]
    """Devices held, by job id of the account; other accounts' jobs together as ``others``."""
    device_indices: dict[str, list[int]]
    """Which devices each job holds, keyed as ``busy``: their indices on the node, 0-based
    (on a GPU node the trainer's ``CUDA_VISIBLE_DEVICES``). No two jobs hold the same one."""
    simulated: bool
    """Runs the simulated trainer (the fleet simulator); no real device."""
    ray: bool
    """A node of the Ray cluster the server trains on; its name is its Ray node id."""
    draining: bool
    memory_gb: float
    """Memory per device, in GB."""
    price_per_hour: float
    """USD per device-hour."""


class Capacity(TypedDict):
    """The capacity pool and the queue (``capacity``)."""

    nodes: list[CapacityNode]
    queue_length: int
    """Jobs of every account waiting for devices."""
    queue: list[str]
    """The account's job ids waiting for devices, next first."""


class NodeDrain(TypedDict):
    """A node drained or opened again (``drain_node``), and the jobs moved off it."""

    node: str
    draining: bool
    moved: list[str]
    """Job ids moved to other nodes (from their checkpoints)."""


class TimeRange(TypedDict):
    """A time range, as a job's ``time_left`` or ``estimate`` and an estimate's ``time``."""

    low_s: int
    """Seconds, the short end."""
    high_s: int
    """Seconds, the long end."""
    text: str
    """As users read it, e.g. ``40 min to 1.3 h``."""
    basis: str
    """What it rests on, e.g. ``pace`` (measured steps) or ``plan``."""


class EstimatePrice(TypedDict):
    """The price range of an estimate, in ``currency``."""

    low: float
    high: float
    currency: str
    """``USD``."""


class EstimatePlan(TypedDict):
    """The devices a job runs on (or would)."""

    devices: int
    device_type: str
    memory_gb: float


class Estimate(TypedDict):
    """The answer to "Estimate time and price" (``estimate``).

    When ``available`` is false, ``reason`` and ``detail`` say why and
    ``time``, ``price`` and ``plan`` are None.
    """

    available: bool
    reason: str | None
    """E.g. ``Not available right now.``; None when the job can run."""
    detail: NotRequired[str | None]
    """The cause in words when it cannot run (e.g. the memory it needs); None otherwise."""
    time: TimeRange | None
    price: EstimatePrice | None
    capacity_free: bool
    """Whether devices are free now (else ``note`` says the job would wait)."""
    note: str | None
    plan: EstimatePlan | None
    allowed_to_proceed: bool
    """Whether the account's balance (and billing limit) covers the high price."""
    warnings: list[str]
    """What the job's data would lose, e.g. examples longer than the model's context, cut
    to it (their lines named); empty when nothing is lost."""
    train_tokens: int | None
    """Training tokens the whole run would be billed for (its ``trained_tokens`` if it ran
    to the end: every step at the tokens its plan prices a step for); None when the job
    cannot run."""


class TogetherPriceEstimate(TypedDict):
    """Together's price estimate (``together_estimate``, ``POST /v1/fine-tunes/estimate-price``):
    Together's ``AvailableEstimate`` when ``estimation_available``, else its
    ``UnavailableEstimate`` (``unavailable_reason`` alone); answered from :class:`Estimate`."""

    estimation_available: bool
    allowed_to_proceed: NotRequired[bool]
    """Whether the account's balance and billing limit cover ``estimated_total_price``."""
    estimated_total_price: NotRequired[float | None]
    """USD: the high end of alallo's price range."""
    estimated_train_token_count: NotRequired[int | None]
    """Training tokens the run would be billed for."""
    estimated_eval_token_count: NotRequired[int]
    """``n_evals`` times the validation file's tokens."""
    user_limit: NotRequired[float]
    """The account's billing limit (USD below zero it may spend: Together's credit limit)."""
    unavailable_reason: NotRequired[str]
    """Why no node can run the job, e.g. ``Not available right now.`` and the cause."""


class JobError(TypedDict):
    """Why a job failed (its ``error``), and the ``error`` of every refusal (:class:`ErrorBody`)."""

    code: str
    """E.g. ``invalid_request_error``, ``not_found``, ``user_error``."""
    message: str
    param: str | None
    """The request's field at fault (``training_file``, ``hyperparameters.n_epochs``), or None."""


class ErrorDetail(TypedDict):
    """A refusal's ``error`` (and a completion stream's part way), as OpenAI sends it."""

    message: str
    type: str
    """``invalid_request_error`` for a 4xx, ``server_error`` for a 5xx (OpenAI's)."""
    param: str | None
    """The request's field at fault (``training_file``, ``hyperparameters.n_epochs``), or None."""
    code: str
    """alallo's code, for programs: ``invalid_request``, ``not_found``, ``too_many_streams``..."""


class ErrorBody(TypedDict):
    """Every refusal (HTTP 4xx, 503): ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorDetail


# -- the account ----------------------------------------------------------------------


class AccountSpend(TypedDict):
    """What an account has paid to date: every charge and refund of its ledger, its jobs'
    steps and its charged completions alike (USD, to the nano-dollar), in the words of a
    job's :class:`Price`."""

    charged: float
    """What the account pays: ``gross`` less ``refunded`` (the sum of its jobs'
    ``price.charged`` and of its completions' charges)."""
    refunded: float
    """Given back (failed jobs, free cancels), as the jobs' ``REFUND`` events say."""
    gross: float
    """Charged before refunds."""


class Account(TypedDict):
    """The caller's account (``GET /v1/account``): who it is, and its money, in ``currency``.

    A job starts only while ``available`` covers the low end of its price estimate; a
    running job is cancelled when its charges bring ``available`` to zero (docs/cancelling.md).
    """

    id: str
    """``acct-…`` (``acct-local`` for the server's own key)."""
    object: Literal["account"]
    name: str
    created_at: int
    """Unix seconds."""
    balance: float
    """The money on the account now: charges take from it as steps complete, refunds give
    back; below zero once it uses the billing limit."""
    billing_limit: float
    """How far below zero the balance may go (set by the operator)."""
    available: float
    """``balance`` plus ``billing_limit``: what new charges may still take."""
    spend: AccountSpend
    currency: str
    """``USD``."""


# -- operations -----------------------------------------------------------------------


class Health(TypedDict):
    """The answer to ``healthz``."""

    status: Literal["ok"]


class DashboardLink(TypedDict):
    """A one-time sign-in link to the dashboard."""

    path: str
    """``/signin/<token>``, to open on the server's address."""
    expires_in: int
    """Seconds it stays valid."""


DOCUMENTED = {"use_attribute_docstrings": True}
"""The pydantic config (a ``pydantic.ConfigDict``; a plain dict, so the clients need not import
pydantic) that puts each key's docstring in ``/openapi.json``."""


def document(*shapes: type) -> None:
    """Let pydantic read each shape's key docstrings, as :func:`pydantic.with_config` would."""
    for shape in shapes:
        shape.__pydantic_config__ = DOCUMENTED  # type: ignore[attr-defined]


document(*(value for value in list(globals().values())
           if isinstance(value, type) and value.__module__ == __name__ and value is not Page))
