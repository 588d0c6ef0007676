"""reinagent.rl: the seed's config and API, token rollouts and their masks, the GRPO loss, training
(sync and async) with a tiny random model, checkpoints that load, and the `rl` CLI's errors.

Policies are either a tiny 2-layer model built from the embedded model's config and tokenizer
(seconds), or a scripted policy that "generates" fixed replies, so that rewards, feedback and
masks are exact and nothing depends on model luck.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.rl import RLAgent, RLAgentConfig, build_rl_config
from reinagent.rl.config import SEED_KEYS
from reinagent.rl.grpo import Learner, group_advantages, make_batch, token_loss
from reinagent.rl.rollout import TokenEpisode
from reinagent.rollouts.multi_turn import FEEDBACK

from .conftest import one_line_error, run_cli

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


# ----- config ------------------------------------------------------------------------------------

def test_seed_fields_and_defaults():
    cfg = RLAgentConfig()
    seed = {"max_turns": 10, "max_prompt_length": 2048, "max_response_length": 512, "max_obs_length": 1024,
            "react_format": True, "env_port": 8000, "env_server_base": "http://127.0.0.1",
            "rollout_strategy": "StandardReAct", "storage_backend": "file", "max_workers": 10}
    assert {k: getattr(cfg, k) for k in seed} == seed
    assert set(SEED_KEYS) <= set(RLAgentConfig.model_fields)
    assert [RLAgentConfig(rollout_strategy=n).rollout for n in ("StandardReAct", "ToT", "MCTS")] == ["react", "tot", "mcts"]


def test_config_errors_name_the_valid_choices():
    with pytest.raises(ConfigError, match=r"unknown key 'max_turn' in \[rl\]; valid: max_turns, "):
        build_rl_config({"max_turn": 3})
    with pytest.raises(ConfigError, match="valid: StandardReAct, ToT, MCTS"):
        build_rl_config({"rollout_strategy": "BFS"})
    with pytest.raises(ConfigError, match="storage_backend.*valid: file"):
        build_rl_config({"storage_backend": "redis"})
    with pytest.raises(ConfigError, match="env_name is required; valid: .*arithmetic"):
        RLAgent(model="local", config=RLAgentConfig())
    with pytest.raises(ConfigError, match="unknown env_name 'webshop'.*none answered"):
        RLAgent(model="local", env_name="webshop", env_port=9)  # nothing listens on the discard port


BAD_TOML = [
    ("[rl]\nenv_name = \"arithmetic\"\nmax_turn = 3\n", ["unknown key 'max_turn'", "valid: max_turns"]),
    ("[rl\nenv_name = 1\n", ["is not valid TOML"]),
    ("[other]\nx = 1\n", ["no [rl] table"]),
    ("[rl]\nenv_name = \"nope\"\nenv_port = 9\n", ["unknown env_name 'nope'", "arithmetic"]),
    ("[rl]\nenv_name = \"arithmetic\"\nmodel = \"local:/no/such/model\"\n", ["/no/such/model"]),
    ("[rl]\nenv_name = \"arithmetic\"\nmodel = \"scripted:x.yaml\"\n", ["cannot be trained here", "local:PATH"]),
]


@pytest.mark.parametrize("text, needles", BAD_TOML, ids=["key", "toml", "table", "env", "model", "untrainable"])
def test_bad_toml_is_a_config_error(tmp_path, text, needles):
    from reinagent.rl.toml import load_rl_config

    path = tmp_path / "rl.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        RLAgent(config=load_rl_config(path)).train()
    assert all(n in str(err.value) for n in needles) and "\n" not in str(err.value)


@pytest.mark.parametrize("case", [0, 4], ids=["key", "model"])
def test_cli_bad_input_is_one_line(tmp_path, case):
    """The CLI prints those errors as one line (two cases: every case above goes the same way)."""
    text, needles = BAD_TOML[case]
    path = tmp_path / "rl.toml"
    path.write_text(text)
    one_line_error(run_cli("rl", "train", "--config", str(path)), *needles)


# ----- the loss ----------------------------------------------------------------------------------

def _episode(group, reward, prompt, completion, mask, logps=None):
    return TokenEpisode(task_id=f"t{group}", group=group, sample=0, prompt_ids=prompt, messages=[],
                        completion_ids=completion, env_mask=mask, logprobs=logps or [0.0] * len(completion), reward=reward)


def test_group_advantages():
    eps = [_episode(0, r, [1], [2], [1]) for r in (1.0, 0.0, 0.0, 1.0)] + [_episode(1, 1.0, [1], [2], [1])] * 2
    adv = group_advantages(eps)
    std = math.sqrt(1 / 3)  # unbiased std of (1, 0, 0, 1)
    assert adv[:4] == pytest.approx([0.5 / (std + 1e-4), -0.5 / (std + 1e-4), -0.5 / (std + 1e-4), 0.5 / (std + 1e-4)])
    assert adv[4:] == [0.0, 0.0]  # all equal: no signal


def test_token_loss_ignores_masked_tokens_even_when_not_finite():
    logps = torch.tensor([[-1.0, float("nan"), -2.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    loss, _, _ = token_loss(logps, logps.detach(), None, torch.tensor([2.0]), mask, 0.2, 0.0)
    assert torch.isfinite(loss).all() and loss[0, 1] == 0
    assert loss[0, 0].item() == pytest.approx(-2.0)  # ratio 1: -A
    # a ratio far above 1 + eps is clipped for a positive advantage
    clipped, _, flags = token_loss(torch.tensor([[0.0]]), torch.tensor([[-1.0]]), None, torch.tensor([1.0]),
                                   torch.tensor([[1.0]]), 0.2, 0.0)
    assert clipped.item() == pytest.approx(-1.2) and flags.all()


# ----- tiny model --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer random model with the embedded model's tokenizer and chat template."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from reinagent.distil.train import resolve_base_model

    base = resolve_base_model("local")
    config = AutoConfig.from_pretrained(base)
    config.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16})
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny") / "model"
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tiny_model):
    from reinagent.rl.policy import load_policy

    return load_policy(f"local:{tiny_model}")


class ScriptedPolicy:
    """Stands in for a transformers model in rollouts: every row's reply on turn t is replies[t]."""

    def __init__(self, tokenizer, replies):
        self.tok, self.replies, self.calls, self.training = tokenizer, replies, 0, False

    def eval(self):
        self.training = False
        return self

    def train(self, mode=True):
        self.training = mode
        return self

    def generate(self, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **_):
        from types import SimpleNamespace

        ids = self.tok(self.replies[min(self.calls, len(self.replies) - 1)], add_special_tokens=False)["input_ids"]
        ids = (ids + [eos_token_id[0]])[:max_new_tokens]
        self.calls += 1
        rows = input_ids.shape[0]
        new = torch.tensor([ids] * rows)
        vocab = len(self.tok)
        logits = [torch.full((rows, vocab), -1e4).scatter(1, new[:, i:i + 1], 0.0) for i in range(len(ids))]
        return SimpleNamespace(sequences=torch.cat([input_ids, new], dim=1), logits=tuple(logits))


def _rollout(tokenizer, **settings):
    agent = RLAgent(model=ScriptedPolicy(tokenizer, []), tokenizer=tokenizer, env_name="arithmetic", **settings)
    return agent, agent.token_rollout()


def test_multi_turn_rollout_masks_feedback_and_discounts_reward(tiny):
    _, tokenizer = tiny
    agent, rollout = _rollout(tokenizer, max_turns=3, turn_discount=0.5)
    task = agent.bench.load_tasks("test")[0]
    policy = ScriptedPolicy(tokenizer, ["Thought: no idea.", "Thought: guess.\nAction: Finish[100]",
                                        f"Thought: {task.solution}.\nAction: Finish[{task.answer}]"])
    [ep] = rollout.run(policy, [task])
    assert ep.success and ep.turns == 3 and ep.reward == pytest.approx(0.25)  # right on turn 3: 0.5**2
    assert len(ep.env_mask) == len(ep.completion_ids) == len(ep.logprobs)
    # the policy's tokens are exactly its three replies; everything between them is the environment's
    runs, current = [], []
    for token, trained in zip(ep.completion_ids, ep.env_mask):
        if trained:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    runs.append(current)
    replies = [tokenizer.decode(r, skip_special_tokens=True) for r in runs]
    assert replies == policy.replies
    env_text = tokenizer.decode([t for t, m in zip(ep.completion_ids, ep.env_mask) if not m])
    assert "Invalid answer" in env_text and FEEDBACK in env_text and "<|im_start|>user" in env_text
    assert env_text.endswith("<|im_start|>assistant\n")
    assert all(v == 0.0 for v, m in zip(ep.logprobs, ep.env_mask) if not m)
    # the token context is the chat template's rendering of the conversation the episode recorded
    whole = tokenizer.decode(ep.prompt_ids + ep.completion_ids)
    assert whole == tokenizer.apply_chat_template(ep.messages, tokenize=False).rstrip("\n")
    record = ep.trajectory()
    assert [s.observation.splitlines()[0] for s in record.steps][:2] == [
        "Invalid answer: no number found. Reply with Finish[<number>].", "Answer submitted: 100"]


def test_token_limits_are_applied(tiny):
    _, tokenizer = tiny
    agent, rollout = _rollout(tokenizer, max_turns=2, max_prompt_length=24, max_response_length=3, max_obs_length=4)
    task = agent.bench.load_tasks("test")[0]
    [ep] = rollout.run(ScriptedPolicy(tokenizer, ["Thought: a long reply that goes on"]), [task])
    assert ep.prompt_truncated and len(ep.prompt_ids) == 24
    assert tokenizer.decode(ep.prompt_ids).endswith("<|im_start|>assistant\n")  # the end is kept
    first_reply = ep.env_mask.index(0)
    assert first_reply == 3  # cut at max_response_length; the end-of-turn token is the environment's
    assert ep.completion_ids[3] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert len(tokenizer(ep.messages[-2]["content"], add_special_tokens=False)["input_ids"]) <= 4  # observation cut


def test_environment_tokens_carry_no_gradient(tiny):
    """Changing feedback tokens after the last generated token changes neither the loss nor the
    gradient; training on them (mask all ones) would."""
    model, tokenizer = tiny
    prompt, reply = [1, 2, 3, 4], [5, 6, 7]

    def grads(env_tokens, mask_env=0):
        eps = [_episode(0, 1.0, prompt, reply + env_tokens, [1] * 3 + [mask_env] * len(env_tokens)),
               _episode(0, 0.0, prompt, reply[::-1] + env_tokens, [1] * 3 + [mask_env] * len(env_tokens))]
        learner = Learner(model, None, tokenizer, learning_rate=1e-3, clip_eps=0.2, kl_coef=0.0, temperature=1.0, micro_batch=8)
        batch = make_batch(eps, group_advantages(eps), 0)
        from reinagent.rl.grpo import completion_logps

        model.zero_grad()
        logps = completion_logps(model, batch, slice(0, 2), 1.0)
        loss, _, _ = token_loss(logps, logps.detach(), None, batch.advantages, batch.loss_mask, 0.2, 0.0)
        loss.sum().backward()
        del learner
        return float(loss.sum().detach()), model.lm_head.weight.grad.clone() if model.lm_head.weight.grad is not None else \
            model.model.embed_tokens.weight.grad.clone()

    loss_a, grad_a = grads([100, 101, 102])
    loss_b, grad_b = grads([900, 901, 902])
    assert loss_a == pytest.approx(loss_b) and torch.allclose(grad_a, grad_b)
    loss_c, grad_c = grads([900, 901, 902], mask_env=1)
    assert not torch.allclose(grad_b, grad_c)


def _toml(tmp_path: Path, model: str, **extra) -> Path:
    values = {"env_name": "arithmetic", "model": model, "max_turns": 2, "max_response_length": 6, "num_tasks": 4,
              "batch_size": 2, "group_size": 2, "max_steps": 2, "learning_rate": 1e-3, "threads": 1,
              "output_dir": str(tmp_path / "out"), **extra}
    lines = ["[rl]"] + [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path = tmp_path / "rl.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_cli_train_writes_metrics_rollouts_and_a_loadable_checkpoint(tiny_model, tmp_path):
    done = run_cli("rl", "train", "--config", str(_toml(tmp_path, f"local:{tiny_model}")))
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoint = Path(done.stdout.split("checkpoint: ")[1].split()[0])
    rows = [json.loads(line) for line in (tmp_path / "out" / "train_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        for key in ("loss", "reward_mean", "reward_std", "kl", "tokens_per_s"):
            assert math.isfinite(row[key]), (key, row)
        assert row["episodes"] == 4 and row["staleness"] == 0
    from reinagent.store import read_records

    records = read_records(tmp_path / "out" / "rollouts")
    assert len(records) == 8 and {r.trial for r in records} == {1, 2}
    assert (checkpoint / "rl.json").is_file()
    report = run_cli("report", str(tmp_path / "out"))
    assert report.returncode == 0 and "reward_mean" in report.stdout, report.stderr[-2000:]
    # the checkpoint loads as --model local:PATH
    again = run_cli("run", "--benchmark", "arithmetic", "--model", f"local:{checkpoint}", "--num-envs", "1",
                    "--num-trials", "1", "--max-tokens", "4", "--run-dir", str(tmp_path / "eval"), "--quiet")
    assert again.returncode == 0, again.stderr[-2000:]


@pytest.mark.slow
def test_grpo_moves_the_policy_toward_rewarded_replies(tiny_model, tmp_path, monkeypatch):
    """Rewards that differ within a group give a non-zero loss and change the weights, and the
    async mode keeps every batch at most one policy version stale."""
    from reinagent.rl.policy import load_policy

    model, tokenizer = load_policy(f"local:{tiny_model}")
    before = model.lm_head.weight.detach().clone() if hasattr(model, "lm_head") else None
    agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", max_turns=1, max_response_length=4,
                    num_tasks=4, batch_size=2, group_size=2, max_steps=3, learning_rate=1e-2, kl_coef=0.1,
                    async_mode=True, threads=1, output_dir=str(tmp_path / "out"))

    # a reward that differs inside every group (sample 0 wins), so the advantages are not zero
    from reinagent.rl import rollout as rollout_module

    real_play = rollout_module.TokenRollout._play

    def play(self, ep, ids, logps, task, envs):
        real_play(self, ep, ids, logps, task, envs)
        ep.reward = float(ep.sample == 0)  # within each group, sample 0 wins
        ep.success = bool(ep.reward)

    monkeypatch.setattr(rollout_module.TokenRollout, "_play", play)
    summary = agent.train()
    rows = [json.loads(line) for line in Path(summary.metrics).read_text().splitlines()]
    assert [r["staleness"] for r in rows] == [0, 1, 1] and summary.max_staleness == 1
    assert [r["policy_version"] for r in rows] == [0, 1, 2]
    assert all(math.isfinite(r["loss"]) and r["loss"] != 0 for r in rows)
    assert rows[-1]["kl"] > 0  # the policy moved away from the reference
    assert before is not None and not torch.allclose(before, model.lm_head.weight)


def test_run_with_a_transformers_policy_and_collect(tiny, tmp_path):
    model, tokenizer = tiny
    agent = RLAgent(model=model, tokenizer=tokenizer, config=RLAgentConfig(env_name="arithmetic", max_turns=1,
                                                                           max_response_length=4, max_workers=2))
    result = agent.run(task_description="What is 3 + 4?")
    assert result.task_id == "train/3+4" and result.reward in (0.0, 1.0) and result.trajectory.steps
    assert agent.run(task_description="compute 12 - 30").task_id == "12-30"  # any sum, not only the splits
    run_dir = agent.collect(num_tasks=3, run_dir=tmp_path / "collect")
    from reinagent.store import read_records, read_spec

    assert len(read_records(run_dir)) == 3 and read_spec(run_dir).config["benchmark"] == "arithmetic"
    with pytest.raises(ConfigError, match="no arithmetic task matches"):
        agent.run(task_description="the capital of France")


def test_run_with_a_model_string_uses_reinagent_rollouts(tmp_path, script):
    model = script([{"when": "What is 3 \\+ 4", "reply": "Thought: 3 + 4 = 7.\nAction: Finish[7]"}])
    agent = RLAgent(model=model, env_name="arithmetic", max_turns=1, rollout_strategy="StandardReAct")
    result = agent.run(task_description="What is 3 + 4?")
    assert result.success and result.reward == 1.0 and result.trajectory.rollout == "react"
    toml = tmp_path / "rl.toml"
    toml.write_text(f'[rl]\nenv_name = "arithmetic"\nmodel = "{model}"\nnum_tasks = 2\noutput_dir = "{tmp_path / "o"}"\n')
    done = run_cli("rl", "run", "--config", str(toml), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = (done.stderr + done.stdout).split("run directory: ")[-1].split()[0]  # named on stderr as it starts
    assert run_cli("report", run_dir).returncode == 0


def test_unregistered_env_name_uses_the_env_server_that_answers(monkeypatch):
    """env_name that is not a registered benchmark: the env server at env_server_base:env_port,
    when its /health answers (here a stand-in for `reinagent serve-env`)."""
    from reinagent.rl import envs

    asked = []

    def health(url, timeout_s=2.0):
        asked.append(url)
        return {"status": "ok", "benchmark": "webshop"}

    monkeypatch.setattr(envs, "server_health", health)
    config = envs.run_config_of(RLAgentConfig(env_name="webshop", env_server_base="http://10.0.0.5", env_port=8123))
    assert asked == ["http://10.0.0.5:8123"]
    assert (config.benchmark, config.env_url, config.rollout) == ("remote", "http://10.0.0.5:8123", "react")
    # a registered benchmark stays in-process: no server is asked
    assert envs.run_config_of(RLAgentConfig(env_name="arithmetic")).env_url is None and len(asked) == 1


def test_importing_rl_and_its_cli_is_cheap():
    """`reinagent rl --help` must not load torch or transformers (the CLI's habit)."""
    import subprocess
    import sys

    code = ("import sys, reinagent.rl, reinagent.rl.cli; "
            "print([m for m in ('torch', 'transformers', 'trl') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr[-2000:]


def test_run_with_a_model_string_inside_a_running_event_loop(script):
    """A notebook runs cells inside an event loop; run() must not call asyncio.run there (it did)."""
    import asyncio

    model = script([{"when": "What is 2 \\+ 2", "reply": "Thought: 2 + 2 = 4.\nAction: Finish[4]"}])
    agent = RLAgent(model=model, env_name="arithmetic", max_turns=1)

    async def inside():
        return agent.run(task_description="What is 2 + 2?")

    assert asyncio.run(inside()).success


def _rewarded(monkeypatch):
    """Sample 0 of every group wins, so advantages (and the loss) are not zero."""
    from reinagent.rl import rollout as rollout_module

    real_play = rollout_module.TokenRollout._play

    def play(self, ep, ids, logps, task, envs):
        real_play(self, ep, ids, logps, task, envs)
        ep.reward = float(ep.sample == 0)
        ep.success = bool(ep.reward)

    monkeypatch.setattr(rollout_module.TokenRollout, "_play", play)
