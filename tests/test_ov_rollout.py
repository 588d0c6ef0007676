"""`[rl] rollout_engine = "openvino"` (reinagent/rl/ov_rollout.py): training rollouts sampled by
OpenVINO GenAI from the policy's current weights, refreshed each step by patching a GGUF file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.rl.ov_rollout import OpenVINORollouts, check_engine

from .conftest import one_line_error, run_cli
from .test_local_gguf_export import _embedded_available
from .test_rl import _toml, tiny_model  # noqa: F401  (module-scoped fixture)

needs_embedded = pytest.mark.skipif(not _embedded_available(), reason="needs the embedded model and the local and hf extras")


def test_only_trls_trainer_may_use_it():
    check_engine("openvino", "trl", "reflect")
    check_engine("torch", "reinagent", "grpo")
    with pytest.raises(ConfigError, match="TRL's trainer only"):
        check_engine("openvino", "reinagent", "grpo")  # our learner would take OpenVINO's log-probs as its own
    with pytest.raises(ConfigError, match="valid: torch, openvino"):
        check_engine("vllm", "trl", "grpo")


def test_the_cli_refuses_it_with_the_own_learner(tmp_path):
    config = _toml(tmp_path, "local", rollout_engine="openvino", trainer="reinagent")
    one_line_error(run_cli("rl", "train", "--config", str(config)), "rollout_engine", "trl")


@pytest.fixture(scope="module")
def policy():
    from reinagent.rl.agent import RLAgent
    from reinagent.rl.config import RLAgentConfig

    cfg = RLAgentConfig(env_name="arithmetic20", model="local", max_turns=1, max_response_length=24, react_format=True)
    agent = RLAgent(model="local", config=cfg)
    model, tokenizer = agent.ensure_policy()
    return agent, model, tokenizer


def _ids(episodes):
    return [e.completion_ids for e in episodes]


@pytest.mark.slow
@needs_embedded
def test_a_patched_refresh_equals_a_full_export_and_follows_the_weights(policy):
    """Step 2's weights written over step 1's file must be read as a fresh export of them would be
    (a patch that skipped the q/k permutation, or a tensor, gives other replies)."""
    import torch

    agent, model, tokenizer = policy
    tasks = agent.bench.load_tasks("train")[:4]
    rollout = agent.token_rollout()
    rollout.engine = engine = OpenVINORollouts(tokenizer, 8)
    try:
        engine.version = 1
        before = rollout.run(model, tasks, temperature=0.0)
        assert all(e.completion_ids for e in before)
        saved = {k: v.clone() for k, v in model.state_dict().items()}
        torch.manual_seed(0)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.02)
        engine.version = 2
        patched = rollout.run(model, tasks, temperature=0.0)
        assert len(engine.refresh_s) == 2 and engine.loaded == 2
        fresh_rollout = agent.token_rollout()
        fresh_rollout.engine = fresh = OpenVINORollouts(tokenizer, 8)
        exported = fresh_rollout.run(model, tasks, temperature=0.0)
        fresh.close()
        assert _ids(patched) == _ids(exported)
        assert _ids(patched) != _ids(before)  # the new weights were read, not the old file's
        rollout.engine = None
        by_torch = rollout.run(model, tasks, temperature=0.0)
        # F16 weights and bf16 arithmetic against fp32: most greedy replies agree
        assert sum(a == b for a, b in zip(_ids(patched), _ids(by_torch))) >= 2
    finally:
        model.load_state_dict(saved)
        engine.close()


@pytest.mark.slow
@needs_embedded
def test_sampled_replies_are_fresh_per_row_and_reproducible_per_seed(policy):
    agent, model, tokenizer = policy
    tasks = agent.bench.load_tasks("train")[:2]
    rollout = agent.token_rollout()
    # Each seeded run on a fresh engine, one row at a time. On an AMD EPYC two runs with seed 5 on
    # one engine parted at a near-tie token (row 6, token 7), at 8 in flight and at 1 alike: the
    # second run meets the first's warm prefix cache (likely cause, not proven: cached u8 KV
    # blocks where the first computed them). The seeds are what this test is about.
    engines = []

    def run(seed: int):
        rollout.engine = engine = OpenVINORollouts(tokenizer, 1)
        engine.version = 0
        engines.append(engine)
        return rollout.run(model, tasks, samples=4, temperature=1.0, seed=seed)

    try:
        one, two, other = run(5), run(5), run(6)
        engine = engines[0]
        assert _ids(one) == _ids(two) and _ids(one) != _ids(other)
        assert len({tuple(e.completion_ids) for e in one[:4]}) > 1  # a group's samples are not one sample
        assert len(engine.refresh_s) == 1  # one version: loaded once
        for e in one:
            assert len(e.logprobs) == len(e.completion_ids) and all(v <= 0 for v in e.logprobs)
            # a reply shorter than the budget stopped at an end token, and holds it (as generate()'s do)
            assert len(e.completion_ids) == 24 or e.completion_ids[-1] in rollout.ends
    finally:
        for engine in engines:
            engine.close()


@pytest.mark.slow
@needs_embedded
def test_rl_train_reflect_with_openvino_rollouts(tmp_path):
    pytest.importorskip("trl")
    config = _toml(tmp_path, "local", env_name="arithmetic20", method="reflect", max_turns=1, max_response_length=8,
                   reflection_max_tokens=8, batch_size=1, group_size=2, max_steps=1, save_steps=1,
                   rollout_engine="openvino", learning_rate=1e-5, threads=2)
    done = run_cli("rl", "train", "--config", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 1/1: first attempts " in done.stdout, done.stdout
    [row] = [json.loads(line) for line in (tmp_path / "out" / "train_metrics.jsonl").read_text().splitlines()]
    assert row["step"] == 1 and row["first_attempts"] >= 1
    assert Path(done.stdout.split("checkpoint: ")[1].split()[0], "rl.json").is_file()


@pytest.mark.slow
def test_a_policy_of_another_shape_is_one_line(tiny_model, tmp_path):  # noqa: F811
    pytest.importorskip("trl")
    config = _toml(tmp_path, f"local:{tiny_model}", rollout_engine="openvino", max_steps=1, max_turns=1)
    done = run_cli("rl", "train", "--config", str(config))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]  # after the loaders' progress lines: the one error line
    assert last.startswith("error: rollout_engine") and "embedded model's family" in last and "hidden_size 64" in last
