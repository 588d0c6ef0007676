"""GRPO through TRL's GRPOTrainer fed by our multi-turn token rollouts (reinagent/rl/trl_grpo.py):
a few steps with a tiny random model, the environment mask as TRL receives and applies it, our own
loss equal to TRL's on the same batch, and a SIGKILLed `rl train` that resumes without duplicates."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.rl import RLAgent, build_rl_config

from .test_rl import _rewarded, _toml, tiny_model  # noqa: F401  (the module-scoped tiny model fixture)

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

pytestmark = pytest.mark.slow


def test_trainer_key_is_checked():
    assert build_rl_config({}).trainer == "trl"
    with pytest.raises(ConfigError) as err:
        build_rl_config({"trainer": "deepspeed"})
    assert "trl" in str(err.value) and "reinagent" in str(err.value) and "\n" not in str(err.value)


def test_micro_split_divides_the_generation():
    from reinagent.rl.trl_grpo import micro_split

    assert micro_split(16, 8) == (8, 2)
    assert micro_split(12, 8) == (6, 2)
    assert micro_split(4, 8) == (4, 1)
    assert micro_split(7, 4) == (1, 7)


def test_trl_trains_with_env_mask_and_matches_our_loss(tiny_model, tmp_path, monkeypatch):  # noqa: F811
    from trl import GRPOTrainer

    from reinagent.rl import rollout as rollout_module
    from reinagent.rl.grpo import completion_logps, group_advantages, make_batch, token_loss
    from reinagent.rl.policy import load_policy

    _rewarded(monkeypatch)
    episodes_seen: list = []
    real_run = rollout_module.TokenRollout.run

    def run(self, *args, **kwargs):
        episodes = real_run(self, *args, **kwargs)
        episodes_seen.append(episodes)
        return episodes

    monkeypatch.setattr(rollout_module.TokenRollout, "run", run)
    checks: list[dict] = []
    real_loss = GRPOTrainer._compute_loss

    def compute_loss(self, model, inputs):
        loss = real_loss(self, model, inputs)
        episodes = episodes_seen[-1]
        # the mask TRL applies is the episodes' env_mask (its padding is 1, but completion_mask 0 there)
        applied = (inputs["completion_mask"] * inputs["tool_mask"]).tolist()
        by_ids = {tuple(e.completion_ids): e for e in episodes}
        for row, ids in enumerate(inputs["completion_ids"].tolist()):
            ep = by_ids[tuple(ids[: int(inputs["completion_mask"][row].sum())])]
            assert applied[row][: len(ep.env_mask)] == ep.env_mask and not any(applied[row][len(ep.env_mask):])
        # our own loss (grpo.py) on the same episodes and weights
        with torch.no_grad():
            batch = make_batch(episodes, group_advantages(episodes), self._tokenizer.pad_token_id)
            rows = slice(0, len(episodes))
            logps = completion_logps(model, batch, rows, self.temperature)
            ref = completion_logps(self.ref_model, batch, rows, self.temperature)
            ours, _, _ = token_loss(logps, logps, ref, batch.advantages, batch.loss_mask, self.epsilon_low, self.beta)
            ours = ours.sum() / batch.loss_mask.sum()
        checks.append({"trl": float(loss.detach()), "ours": float(ours),
                       "feedback": sum(1 for e in episodes for m in e.env_mask if m == 0)})
        return loss

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", compute_loss)
    model, tokenizer = load_policy(f"local:{tiny_model}")
    before = model.lm_head.weight.detach().clone()
    agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", max_turns=2, max_response_length=4,
                    num_tasks=4, batch_size=2, group_size=2, max_steps=3, learning_rate=1e-2, kl_coef=0.1,
                    threads=1, micro_batch=8, output_dir=str(tmp_path / "out"))
    summary = agent.train()

    assert len(checks) == 3  # one micro-batch (4 episodes <= micro_batch) per step
    assert all(c["feedback"] > 0 for c in checks), "two-turn episodes carry feedback tokens to mask"
    # step 1 is on-policy with equal-length replies: the loss value is 0 (its gradient is not); KL
    # against the reference makes the later values differ from 0
    assert any(c["trl"] != 0 for c in checks[1:]), checks
    for c in checks:
        assert math.isfinite(c["trl"])
        assert c["ours"] == pytest.approx(c["trl"], rel=1e-4, abs=1e-6), checks
    rows = [json.loads(line) for line in Path(summary.metrics).read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3] and all(r["trainer"] == "trl" for r in rows)
    for row in rows:
        assert row["reward_mean"] == pytest.approx(0.5) and row["episodes"] == 4
        for key in ("loss", "reward_std", "kl", "tokens_per_s", "rollout_tokens_per_s"):
            assert math.isfinite(row[key]), (key, row)
    assert rows[-1]["kl"] > 0  # the policy moved away from TRL's reference model
    assert not torch.allclose(before, model.lm_head.weight)
    # the final checkpoint loads as --model local:PATH
    again, _ = load_policy(f"local:{summary.checkpoint}")
    assert torch.allclose(again.lm_head.weight, model.lm_head.weight)


# A `rl train` that SIGKILLs itself right after writing step 3's metrics row, before TRL saves
# checkpoint-3: the worst moment, since step 3's row and rollouts exist but its checkpoint does not.
KILLER = """
import os, signal, sys
from reinagent.rl import trl_grpo
real = trl_grpo.MetricsCallback.write
def write(self, step, logs):
    real(self, step, logs)
    if step == 3:
        os.kill(os.getpid(), signal.SIGKILL)
trl_grpo.MetricsCallback.write = write
from reinagent.cli import main
sys.argv = ["reinagent", "rl", "train", "--config", sys.argv[1]]
main()
"""


def test_killed_training_resumes_without_duplicates(tiny_model, tmp_path):  # noqa: F811
    from reinagent.store import read_log, read_records

    from .conftest import run_cli

    config = _toml(tmp_path, f"local:{tiny_model}", max_steps=5, save_steps=2)
    out = tmp_path / "out"
    killed = subprocess.run([sys.executable, "-c", KILLER, str(config)], capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in (out / "train_metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3] and not (out / "checkpoint").exists()
    assert (out / "trainer" / "checkpoint-2").is_dir() and not (out / "trainer" / "checkpoint-3").exists()

    done = run_cli("rl", "train", "--config", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "train_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    records = read_records(out / "rollouts")
    trials = sorted(r.trial for r in records)
    assert trials == sorted([1, 2, 3, 4, 5] * 4)  # batch_size 2 x group_size 2 per step, step 3 once
    assert len(read_log(out / "rollouts")) > len(records)  # step 3's first episodes are superseded, not lost
    assert (out / "checkpoint" / "rl.json").is_file()
    # a finished run is not trained again by accident
    again = run_cli("rl", "train", "--config", str(config))
    lines = [line for line in again.stderr.splitlines() if line.strip() and "Loading weights" not in line]
    assert again.returncode == 2 and len(lines) == 1, again.stderr[-2000:]
    assert all(word in lines[0] for word in ("5 steps", "max_steps", "overwrite")), lines


def test_bf16_precision_trains_under_autocast_with_fp32_weights(tiny_model, tmp_path):  # noqa: F811
    """train_precision = "bf16": TRL's forward/backward run under CPU bf16 autocast, the weights (and so
    the optimiser's master copy and the checkpoint) stay fp32; our own loop refuses it."""
    from reinagent.rl.policy import load_policy

    model, tokenizer = load_policy(f"local:{tiny_model}")
    seen = []

    def record(module, args):
        if torch.is_grad_enabled():  # the update's passes (rollouts run without gradients, in fp32)
            seen.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None)

    model.model.register_forward_pre_hook(record)  # the decoder, inside whatever forward wrapper TRL adds
    settings = dict(env_name="arithmetic", max_turns=1, max_response_length=4, num_tasks=2, batch_size=1,
                    group_size=2, max_steps=1, kl_coef=0.0, threads=1, train_precision="bf16")
    agent = RLAgent(model=model, tokenizer=tokenizer, output_dir=str(tmp_path / "out"), **settings)
    agent.train()
    assert seen and set(seen) == {torch.bfloat16}, seen
    from huggingface_hub import constants
    from huggingface_hub.utils import _telemetry

    # TRL's trainer pinged huggingface.co from a thread; we send nothing (trl_grpo.no_telemetry)
    assert constants.HF_HUB_DISABLE_TELEMETRY is True and _telemetry._TELEMETRY_THREAD is None
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    ours = RLAgent(model=model, tokenizer=tokenizer, output_dir=str(tmp_path / "ours"), trainer="reinagent", **settings)
    with pytest.raises(ConfigError, match="train_precision = .bf16. trains through TRL only"):
        ours.train()
