"""scripts/gpu_check.sh and scripts/random_model.py: the device check of RL training on a GPU
(docs/learning.md, "On one GPU"). The GPU run itself needs a lent machine; these check, on any
machine, that the random model is what the check claims and that one failed part does not hide
the others."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory) -> Path:
    """The embedded model's config and tokenizer files, weights left out, shrunk to 2 layers."""
    from reinagent.distil.train import resolve_base_model

    base = Path(resolve_base_model("local"))
    folder = tmp_path_factory.mktemp("config")
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                 "chat_template.jinja"):
        if (base / name).is_file():
            shutil.copy2(base / name, folder / name)
    config = json.loads((folder / "config.json").read_text())
    config.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16})
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def build(config_dir: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "random_model.py"), str(config_dir), str(out)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_random_model_has_the_config_and_tokenizer_and_is_seeded(config_dir, tmp_path):
    import torch

    from reinagent.rl.policy import load_policy

    first, second = build(config_dir, tmp_path / "a"), build(config_dir, tmp_path / "b")
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:]
    assert "random llama model" in first.stdout
    model, tokenizer = load_policy(f"local:{tmp_path / 'a'}")
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size == 49152
    assert tokenizer.apply_chat_template([{"role": "user", "content": "1+1"}], tokenize=False).startswith("<|im_start|>")
    other, _ = load_policy(f"local:{tmp_path / 'b'}")
    for (name, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        assert torch.equal(a, b), f"{name} differs between two builds: the seed is not fixed"


def test_random_model_usage_error(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "random_model.py")], capture_output=True, text=True)
    assert done.returncode != 0 and "usage:" in done.stderr


def test_gpu_check_goes_on_after_a_failed_part_and_logs_every_part(config_dir, tmp_path):
    """With a Python that fails every command, each part still runs and reports its exit status."""
    fake = tmp_path / "failing-python"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(config_dir), str(out)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PY": str(fake), "DEVICE": "cpu", "OUT": ""})
    log = (out / "gpu_check.log").read_text()
    assert done.stdout == log
    assert "RANDOM WEIGHTS" in log
    parts = ["build random model", "rl train reflect (bf16)", "rl train grpo (bf16)", "rl_throughput fp32",
             "rl_throughput bf16", "rl_throughput bf16, 16 x 8"]
    for part in parts:
        assert f"== {part}: exit " in log, part
    summary = next(line for line in log.splitlines() if line.startswith("# summary"))
    assert all(f"{part}: exit 3" in summary for part in parts), summary
