"""The adapter's config as a model's archive ships it (:mod:`alallo.runtime._fine_tuned`):
its base named by id, pinned to the job's commit for a hub model, so that the adapter
loads elsewhere (issue 35; the HTTP download is tests/gateway/test_models_out.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_lifecycle import new_job

from alallo import JobSpec
from alallo.runtime._fine_tuned import _portable_config

pytestmark = pytest.mark.unit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(("model", "revision", "base", "pinned"), [
    ("acme/tiny@main", COMMIT, "acme/tiny", COMMIT),
    ("alallo/tiny-gpt2", None, "alallo/tiny-gpt2", None),
    ("/srv/models/mine", None, "/srv/models/mine", None),  # a path is its only name
])
def test_the_shipped_config_names_the_base_by_id(tmp_path: Path, model: str,
                                                 revision: str | None, base: str,
                                                 pinned: str | None) -> None:
    config = tmp_path / "adapter_config.json"
    config.write_text(json.dumps({"base_model_name_or_path": "/data/models/x", "r": 8,
                                  "revision": None}))
    job = new_job().model_copy(update={
        "spec": JobSpec(model=model, training_file="file-1"), "model_revision": revision})
    shipped = json.loads(_portable_config(config, job))
    assert shipped == {"base_model_name_or_path": base, "r": 8, "revision": pinned}
    assert json.loads(config.read_text())["base_model_name_or_path"] == "/data/models/x"
