"""Use alallo through the official ``openai`` package: upload, create, follow, page events.

    ALALLO_URL=http://127.0.0.1:8000 ALALLO_API_KEY=sk-alallo-... python examples/openai_sdk.py

Point the SDK's ``base_url`` at alallo's ``/v1`` and give it an alallo key.
alallo's own fields (the simulated trainer, ``max_steps``) go in
``extra_body``; OpenAI's ``method`` object and ``"auto"`` work as in OpenAI.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import openai

SAMPLE = Path(__file__).with_name("sample.jsonl")
FINAL = {"succeeded", "failed", "cancelled"}


def main() -> None:
    url = os.environ.get("ALALLO_URL", "http://127.0.0.1:8000")
    key = os.environ.get("ALALLO_API_KEY") or Path(".alallo/api-key").read_text().strip()
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key) as client:
        with SAMPLE.open("rb") as f:
            file = client.files.create(file=f, purpose="fine-tune")
        print(f"uploaded {file.filename} as {file.id} ({file.bytes} bytes)")

        job = client.fine_tuning.jobs.create(
            model="alallo/tiny-gpt2", training_file=file.id, suffix="sdk",
            method={"type": "supervised", "supervised": {"hyperparameters": {
                "n_epochs": "auto", "batch_size": 4, "learning_rate_multiplier": 2}}},
            extra_body={"hyperparameters": {"max_steps": 8}, "trainer": "simulated"},
        )
        print(f"created {job.id}: {job.status}")
        while job.status not in FINAL:  # the OpenAI way; alallo also streams (see follow_*.py)
            time.sleep(0.2)
            job = client.fine_tuning.jobs.retrieve(job.id)
        print(f"finished {job.status}: {job.fine_tuned_model}")
        print(f"hyperparameters: {job.hyperparameters}")

        # Newest first, as OpenAI's: messages, and a metrics event (data: step, train_loss...)
        # per logged step; the SDK pages toward older events by itself.
        for event in client.fine_tuning.jobs.list_events(job.id, limit=5):
            print(f"event {event.type}: {event.message}")
        recent = [j.id for j in client.fine_tuning.jobs.list(limit=3)]
        print(f"newest jobs: {', '.join(recent)}")


if __name__ == "__main__":
    main()
