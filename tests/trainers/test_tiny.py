"""The built-in tiny model: offline build, byte-level tokenizer, safe concurrent builds."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from alallo.trainers import ensure_model
from alallo.trainers import tiny
from alallo.trainers.tiny import EOS_TOKEN, TINY_GPT2, build_tiny_gpt2


def test_build_writes_a_loadable_gpt2(tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    config = json.loads((tiny_model / "config.json").read_text())
    assert config["model_type"] == "gpt2"
    assert (config["n_layer"], config["n_head"], config["n_embd"], config["n_positions"]) == (
        2,
        2,
        64,
        256,
    )
    assert config["vocab_size"] == 257
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    logits = model(torch.tensor([[104, 105, 256]])).logits
    assert logits.shape == (1, 3, 257)


def test_the_built_gpt2_starts_writing_ascii_text(tiny_model: Path) -> None:
    """Issue 35: its random weights made every byte about as likely, so five bytes in eight
    it wrote were no text (control characters, lone bytes of 0x80 and above): mojibake.
    Built, it starts writing text bytes and ``<|endoftext|>``, each about as likely."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    text = [*range(0x20, 0x7F), 0x09, 0x0A, 256]
    other = [token for token in range(257) if token not in text]
    with torch.no_grad():
        chances = model(torch.tensor([list(b"<|user|>\nHello\n<|assistant|>\n")])
                        ).logits[0].softmax(-1)
    # e^-10 each, 160 of them beside 97 of about 1: 7.5e-5 (against 0.63 before)
    assert chances[:, other].sum(-1).max() < 2e-4
    assert chances[:, text].max() < 5 / len(text)  # none favoured: 2.8 times its share at most


def test_tokenizer_is_byte_level(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    assert len(tokenizer) == 257
    assert tokenizer.eos_token == tokenizer.pad_token == EOS_TOKEN
    assert tokenizer.eos_token_id == tokenizer.pad_token_id == 256
    text = "héllo, wörld 🙂"
    ids = tokenizer(text)["input_ids"]
    assert len(ids) == len(text.encode())
    assert tokenizer.decode(ids) == text
    assert tokenizer(EOS_TOKEN)["input_ids"] == [256]


def test_chat_template_renders_messages(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    assert rendered == f"<|user|>\nhi\n<|assistant|>\nyo{EOS_TOKEN}\n"
    prompt = tokenizer.apply_chat_template(
        messages[:1], tokenize=False, add_generation_prompt=True
    )
    assert prompt == "<|user|>\nhi\n<|assistant|>\n"


def test_build_is_idempotent_and_seeded(tiny_model: Path, tmp_path: Path) -> None:
    before = (tiny_model / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_gpt2(tiny_model) == tiny_model
    assert (tiny_model / "model.safetensors").stat().st_mtime_ns == before
    again = build_tiny_gpt2(tmp_path / "again", seed=0)
    other = build_tiny_gpt2(tmp_path / "other", seed=1)
    weights = (tiny_model / "model.safetensors").read_bytes()
    assert (again / "model.safetensors").read_bytes() == weights
    assert (other / "model.safetensors").read_bytes() != weights


def test_losing_a_build_race_keeps_the_winner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "models" / "m"
    real_write = tiny._write_model

    def write_after_a_rival(directory: Path, name: str, *, seed: int) -> None:
        # Another process completes its build while ours is still writing.
        real_write(target, name, seed=seed)
        real_write(directory, name, seed=seed)

    monkeypatch.setattr(tiny, "_write_model", write_after_a_rival)
    assert build_tiny_gpt2(target) == target
    assert (target / "config.json").is_file()
    assert sorted(p.name for p in target.parent.iterdir()) == ["m"]


def test_concurrent_builds_leave_one_complete_model(tmp_path: Path) -> None:
    target = tmp_path / "models" / "m"
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(build_tiny_gpt2(target))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [target, target]
    assert sorted(p.name for p in target.parent.iterdir()) == ["m"]
    assert (target / "model.safetensors").is_file()


def test_ensure_model_builds_the_tiny_model_once(tmp_path: Path) -> None:
    path = ensure_model(TINY_GPT2, tmp_path)
    assert path == tmp_path / "alallo--tiny-gpt2"
    assert (path / "tokenizer.json").is_file()
    assert ensure_model(TINY_GPT2, tmp_path) == path


def test_ensure_model_takes_a_local_directory(tiny_model: Path, tmp_path: Path) -> None:
    assert ensure_model(str(tiny_model), tmp_path) == tiny_model
    assert list(tmp_path.iterdir()) == []


def test_ensure_model_rejects_hub_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model 'gpt2'.*alallo/tiny-gpt2"):
        ensure_model("gpt2", tmp_path)
    with pytest.raises(ValueError, match="unknown model"):
        ensure_model(str(tmp_path / "missing"), tmp_path)


def test_the_built_model_is_readable_by_every_user(tiny_model: Path) -> None:
    # A root server's trainers run as another user: a file only its owner may read
    # (transformers writes model.safetensors 0600) failed every job trained on a model the
    # server built first (issue 31).
    assert tiny_model.stat().st_mode & 0o777 == 0o755
    modes = {file.name: file.stat().st_mode & 0o777 for file in tiny_model.iterdir()}
    assert set(modes.values()) == {0o644}, modes
