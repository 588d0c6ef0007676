"""reinagent.rl's correctness checks (issue 29): the KL is anchored to the policy training started
from, one step moves log-probs the way the advantages say (both trainers), settings are honoured
or refused, a resume under other settings is refused, and training says what it is doing."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.rl import RLAgent, build_rl_config

from .test_rl import _rewarded, tiny_model  # noqa: F401  (the module-scoped tiny model fixture)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

TRAINERS = ["reinagent", pytest.param("trl", marks=pytest.mark.slow)]


def _recorded(monkeypatch) -> list:
    """Every batch of episodes the training rollouts produce, in order."""
    from reinagent.rl import rollout as rollout_module

    seen: list = []
    real_run = rollout_module.TokenRollout.run

    def run(self, *args, **kwargs):
        episodes = real_run(self, *args, **kwargs)
        seen.append(episodes)
        return episodes

    monkeypatch.setattr(rollout_module.TokenRollout, "run", run)
    return seen


def _agent(model, tokenizer, tmp_path, trainer, **extra):
    settings = dict(env_name="arithmetic", max_turns=1, max_response_length=4, num_tasks=4, batch_size=2,
                    group_size=2, max_steps=1, learning_rate=1e-3, kl_coef=0.1, threads=1, micro_batch=8,
                    trainer=trainer, output_dir=str(tmp_path / "out"))
    return RLAgent(model=model, tokenizer=tokenizer, **{**settings, **extra})


def _rows(summary) -> list[dict]:
    return [json.loads(line) for line in Path(summary.metrics).read_text().splitlines()]


@pytest.mark.parametrize("trainer", TRAINERS)
def test_kl_is_zero_at_step_one_for_a_policy_changed_in_memory(tiny_model, tmp_path, monkeypatch, trainer):  # noqa: F811
    """The reference is the policy as training starts, not the weights on disk it was loaded from
    (TRL's trainer rebuilt it from disk: KL 0.164 at step 1 in the issue)."""
    from reinagent.rl.policy import load_policy

    _rewarded(monkeypatch)
    model, tokenizer = load_policy(f"local:{tiny_model}")
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))  # the weights on disk are no longer the policy's
    summary = _agent(model, tokenizer, tmp_path, trainer).train()
    row = _rows(summary)[0]
    assert row["step"] == 1 and row["kl"] == pytest.approx(0.0, abs=1e-6), row
    assert not (tmp_path / "out" / "reference").exists()  # no copy of the weights is left behind


@pytest.mark.parametrize("trainer", TRAINERS)
def test_one_step_raises_logp_of_positive_advantages(tiny_model, tmp_path, monkeypatch, trainer):  # noqa: F811
    """sum_i A_i * (logp_after_i - logp_before_i) > 0 over the step's episodes: the update goes up
    the advantage-weighted likelihood. Flipping the loss's sign (or the reward's) makes it negative."""
    from reinagent.rl.grpo import completion_logps, group_advantages, make_batch
    from reinagent.rl.policy import load_policy

    _rewarded(monkeypatch)
    seen = _recorded(monkeypatch)
    model, tokenizer = load_policy(f"local:{tiny_model}")
    before = copy.deepcopy(model).eval()
    _agent(model, tokenizer, tmp_path, trainer, kl_coef=0.0, learning_rate=1e-4).train()
    [episodes] = seen
    advantages = group_advantages(episodes)
    assert any(a > 0 for a in advantages) and any(a < 0 for a in advantages)
    batch = make_batch(episodes, advantages, tokenizer.pad_token_id)
    rows = slice(0, len(episodes))
    model.eval()
    with torch.no_grad():
        old = (completion_logps(before, batch, rows, 1.0) * batch.loss_mask).sum(-1)
        new = (completion_logps(model, batch, rows, 1.0) * batch.loss_mask).sum(-1)
    moved = float((batch.advantages * (new - old)).sum())
    assert moved > 0, (moved, advantages, (new - old).tolist())


def test_rollout_strategies_a_policy_cannot_play_are_refused(tiny):
    model, tokenizer = tiny
    for name in ("ToT", "MCTS"):
        agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", rollout_strategy=name)
        with pytest.raises(ConfigError) as err:
            agent.train()
        assert name in str(err.value) and "StandardReAct" in str(err.value) and "\n" not in str(err.value)


@pytest.fixture(scope="module")
def tiny(tiny_model):  # noqa: F811
    from reinagent.rl.policy import load_policy

    return load_policy(f"local:{tiny_model}")


def test_token_only_limits_are_refused_with_a_model_string(script):
    model = script([{"when": "What is 3 \\+ 4", "reply": "Thought: 3 + 4 = 7.\nAction: Finish[7]"}])
    for key in ("max_obs_length", "max_prompt_length"):
        agent = RLAgent(model=model, env_name="arithmetic", max_turns=1, **{key: 64})
        with pytest.raises(ConfigError) as err:
            agent.run(task_description="What is 3 + 4?")
        assert key in str(err.value) and "\n" not in str(err.value)
    assert RLAgent(model=model, env_name="arithmetic", max_turns=1).run(task_description="What is 3 + 4?").success


def test_max_turns_gives_a_model_string_another_turn_after_feedback(script):
    """`rl run` with max_turns = 2: a wrong first answer gets the environment's feedback and a second
    turn, as in a token rollout (it was one call per episode)."""
    model = script([{"when": "try again", "reply": "Thought: 3 + 4 = 7.\nAction: Finish[7]"},
                    {"when": "What is 3 \\+ 4", "reply": "Thought: 3 + 4 = 8.\nAction: Finish[8]"}])
    result = RLAgent(model=model, env_name="arithmetic", max_turns=2).run(task_description="What is 3 + 4?")
    assert result.success and len(result.trajectory.steps) == 2, result.trajectory.steps
    once = RLAgent(model=model, env_name="arithmetic", max_turns=1).run(task_description="What is 3 + 4?")
    assert not once.success and len(once.trajectory.steps) == 1


def test_storage_backend_copies_runs_into_the_store(script, tmp_path):
    with pytest.raises(ConfigError, match="storage_backend 'mongodb' needs storage_url"):
        build_rl_config({"storage_backend": "mongodb"})
    with pytest.raises(ConfigError, match="storage_backend 'mongodb' needs storage_url"):
        build_rl_config({"storage_backend": "mongodb", "storage_url": "sqlite:///x.db"})
    with pytest.raises(ConfigError, match="valid: file, sqlite, postgresql or mongodb"):
        build_rl_config({"storage_backend": "redis"})
    model = script([{"when": "What is", "reply": "Thought: guess.\nAction: Finish[7]"}])
    url = f"sqlite:///{tmp_path}/runs.db"
    agent = RLAgent(model=model, env_name="arithmetic", max_turns=1, storage_backend="sqlite", storage_url=url)
    run_dir = agent.collect(num_tasks=2, run_dir=tmp_path / "collect")
    from reinagent.stores import open_store

    with open_store(url) as db:
        assert db.run_ids() == ["collect"] and len(db.read_records("collect")) == 2


def test_resume_under_other_settings_is_refused_and_our_trainer_says_it_cannot_resume(tiny, tmp_path):
    """A finished 1-step TRL run, continued with another group_size or learning rate: refused in one
    line (step 5 had 8 episodes while the spec said G=2); our trainer says it cannot resume."""
    pytest.importorskip("trl")
    model, tokenizer = tiny
    model = copy.deepcopy(model)
    _agent(model, tokenizer, tmp_path, "trl", kl_coef=0.0).train()
    for change, needle in (({"group_size": 3}, "group_size 2 -> 3"), ({"learning_rate": 1e-2}, "learning_rate")):
        with pytest.raises(ConfigError) as err:
            _agent(model, tokenizer, tmp_path, "trl", kl_coef=0.0, max_steps=2, **change).train()
        assert needle in str(err.value) and "overwrite" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="cannot resume.*overwrite"):
        _agent(model, tokenizer, tmp_path, "reinagent", kl_coef=0.0, max_steps=2).train()
    with pytest.raises(ConfigError, match="async mode.*cannot resume"):
        _agent(model, tokenizer, tmp_path, "reinagent", kl_coef=0.0, max_steps=2, async_mode=True).train()


def test_progress_within_a_step_and_a_warning_for_groups_without_signal(tiny, tmp_path):
    from reinagent.rl.metrics import metrics_row, signal_warning, zero_variance_groups
    from reinagent.rl.rollout import TokenEpisode

    model, tokenizer = tiny
    agent = _agent(model, tokenizer, tmp_path, "reinagent", max_workers=2)
    seen = []
    agent.on_progress = lambda done, total, tokens, seconds: seen.append((done, total, tokens))
    tasks = agent.bench.load_tasks("train")[:2]
    episodes = agent.token_rollout().run(model, tasks, samples=2, temperature=1.0)
    assert len(seen) == 2 and seen[-1][:2] == (4, 4)  # one line per generation batch of 2
    assert seen[-1][2] == sum(e.generated_tokens for e in episodes) and seen[0][2] < seen[-1][2]

    def ep(group, reward):
        return TokenEpisode(task_id=f"t{group}", group=group, sample=0, prompt_ids=[1], messages=[],
                            completion_ids=[2], env_mask=[1], logprobs=[0.0], reward=reward)

    flat = [ep(0, 1.0), ep(0, 1.0), ep(1, 0.0), ep(1, 1.0), ep(2, 0.0), ep(2, 0.0)]
    assert zero_variance_groups(flat) == (2, 3)
    row = metrics_row(4, flat, loss=0.0, kl=0.0, clip_frac=0.0, tokens=6, trained_tokens=6, rollout_s=1.0,
                      train_s=1.0, version=3)
    assert (row["zero_variance_groups"], row["groups"]) == (2, 3)
    assert signal_warning(row).startswith("warning: step 4: 2 of 3 groups had no reward variance")
    assert signal_warning(metrics_row(1, flat[2:4], loss=0.0, kl=0.0, clip_frac=0.0, tokens=2, trained_tokens=2,
                                      rollout_s=1.0, train_s=1.0, version=0)) is None


def test_eval_names_the_weights(tiny, tiny_model):  # noqa: F811
    from reinagent.rl.policy import weights_name

    model, tokenizer = tiny
    agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", max_turns=1, max_response_length=2)
    result = agent.evaluate(num_tasks=2)
    assert result.weights == "in-memory policy" and "(in-memory policy)" in result.line()
    assert str(tiny_model) in weights_name(f"local:{tiny_model}") and "embedded" in weights_name("local")


def test_torch_threads_follow_config_then_env_then_idle_cores(monkeypatch):
    from reinagent.rl.policy import available_cores, torch_threads

    monkeypatch.setenv("REINAGENT_TORCH_THREADS", "3")
    assert torch_threads(2) == 2 and torch_threads(None) == 3
    monkeypatch.setenv("REINAGENT_TORCH_THREADS", "many")
    with pytest.raises(ConfigError, match="REINAGENT_TORCH_THREADS must be a whole number"):
        torch_threads(None)
    monkeypatch.delenv("REINAGENT_TORCH_THREADS")
    monkeypatch.setattr("reinagent.rl.policy.available_cores", lambda: 4)
    for busy, threads in ((50.0, 1), (3.2, 1), (1.6, 2), (0.3, 4), (0.0, 4)):
        # a machine busy with others' work: fewer threads, no barrier stalls; idle: every core
        monkeypatch.setattr("reinagent.rl.policy.busy_cores", lambda b=busy: b)
        assert torch_threads(None) == threads, busy


def test_busy_cores_are_measured_now_not_from_the_decaying_load_average(monkeypatch):
    from reinagent.rl import policy

    ticks = iter([(100, 1000), (130, 1100)])  # 30 of 100 jiffies idle over the window
    monkeypatch.setattr(policy, "_cpu_times", lambda: next(ticks))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("os.getloadavg", lambda: (9.0, 9.0, 9.0))
    assert policy.busy_cores(0.0) == pytest.approx(1.4)
    monkeypatch.setattr(policy, "_cpu_times", lambda: None)  # no /proc/stat: the load average
    assert policy.busy_cores(0.0) == 9.0


def test_report_of_training_rollouts_counts_steps_calls_and_tokens(tiny, tmp_path):
    """`reinagent report OUTPUT_DIR/rollouts`: trial = step, the planned steps are the trials, the
    status says whether every step ran, token rollouts count as calls with their tokens, and the
    cumulative columns (which do not apply: each step samples its own tasks) show "-"."""
    from reinagent.report.markdown import run_markdown
    from reinagent.report.summary import summarize
    from reinagent.rl.loop import RolloutLog, run_settings

    model, tokenizer = tiny
    agent = _agent(model, tokenizer, tmp_path, "reinagent", max_turns=2)
    rollout = agent.token_rollout()
    tasks = agent.bench.load_tasks("train")[:2]
    settings = run_settings(agent.config, "grpo", 3, 1e-3, 2)
    log = RolloutLog(tmp_path / "rollouts", agent.plan_of(tasks), settings)
    episodes = []
    for step in (1, 2):
        batch = rollout.run(model, tasks, samples=2, temperature=1.0, seed=step)
        log.add(step, batch, started=time.time() - 5.0)
        episodes += batch
    log.close()
    s = summarize(tmp_path / "rollouts")
    assert (s["num_trials"], s["status"], s["training_steps"]) == (3, "partial", 3)
    assert [t["attempted"] for t in s["trials"]] == [4, 4, 0]
    assert s["trials"][0]["wall_s"] >= 5.0  # the rollouts' time, not 0
    assert s["usage"]["calls"] == sum(e.turns for e in episodes) > 0
    assert s["usage"]["completion_tokens"] == sum(e.generated_tokens for e in episodes)
    assert s["usage"]["prompt_tokens"] >= sum(len(e.prompt_ids) for e in episodes)
    text = run_markdown(s)
    assert "RL training rollouts over 2 tasks, 3 steps (trial = step), status **partial**" in text
    row = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert row.split("|")[4].strip() == "-" and row.split("|")[5].strip() == "-", row
    # the rollout table counts episodes (solved of attempted) under the rollout the records name;
    # no reflector ran and token rollouts time no call: "-", never 0
    solved = sum(e.success for e in episodes)
    assert (s["rollout"], s["reflector_model"], s["usage"]["latency_s"], s["episode_s"]) == ("rl-tokens", None, None, None)
    assert s["rollout_stats"]["attempted"] == len(episodes) and s["rollout_stats"]["solved_tasks"] == solved
    rollout_row = next(line for line in text.splitlines() if line.startswith("| rl-tokens |"))
    assert rollout_row.split("|")[3].strip().startswith(f"{solved}/{len(episodes)} ")
    assert "reflector `-`" in text and "latency summed -; episodes - summed" in text
    assert next(line for line in text.splitlines() if line.startswith("| total |")).rstrip("| ").endswith("-")


def test_eval_baseline_pairs_the_same_tasks(tmp_path):
    from reinagent.rl.agent import EvalResult
    from reinagent.rl.compare import compare_lines, load_eval, save_eval

    ids = tuple(f"t{i}" for i in range(10))
    base = EvalResult("test", 10, 0.3, 0.3, 0.1, 0.6, weights="base", task_ids=ids, solved=ids[:3])
    save_eval(base, tmp_path / "base.json")
    after = EvalResult("test", 10, 0.6, 0.6, 0.3, 0.8, weights="trained", task_ids=ids, solved=ids[1:7])
    lines = compare_lines(load_eval(tmp_path / "base.json"), after)
    assert lines[0] == "against base: 4 tasks gained, 1 lost, 2 solved by both"
    assert lines[1] == "held-out success: 30.0% -> 60.0% on 10 tasks, McNemar p = 0.375"  # 2 * P(X <= 1), X ~ B(5, 1/2)
    other = EvalResult("test", 2, 0.0, 0.0, 0.0, 1.0, task_ids=ids[:2])
    with pytest.raises(ConfigError, match="other tasks"):
        compare_lines(load_eval(tmp_path / "base.json"), other)
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not a file written by `rl eval --save`"):
        load_eval(tmp_path / "bad.json")


def test_dynamic_sampling_replaces_groups_without_signal(tiny, tmp_path, monkeypatch):
    """DAPO's dynamic sampling: flat groups give way to fresh tasks' groups; the batch keeps its
    shape (G episodes in each of its groups) and a group with signal is kept."""
    from reinagent.rl import rollout as rollout_module

    model, tokenizer = tiny
    agent = _agent(model, tokenizer, tmp_path, "reinagent")
    pool = agent.bench.load_tasks("train")[:8]
    lucky = {t.task_id for t in pool[2:]}  # only these tasks have reward variance
    real_play = rollout_module.TokenRollout._play

    def play(self, ep, ids, logps, task, envs):
        real_play(self, ep, ids, logps, task, envs)
        ep.reward = float(ep.sample == 0 and ep.task_id in lucky)

    monkeypatch.setattr(rollout_module.TokenRollout, "_play", play)
    rollout = agent.token_rollout()
    batch = [pool[2], pool[0], pool[1]]  # groups 1 and 2 are flat
    episodes, replaced = rollout.run_with_signal(model, batch, pool, samples=2, temperature=1.0, rounds=2)
    assert replaced == 2 and len(episodes) == 6
    assert [(e.group, e.sample) for e in episodes] == [(g, k) for g in range(3) for k in range(2)]
    assert episodes[0].task_id == episodes[1].task_id == pool[2].task_id  # group 0 had signal: kept
    assert all(e.task_id in lucky for e in episodes)
    same, none = rollout.run_with_signal(model, pool[:2], pool[:2], samples=2, temperature=1.0, rounds=2)
    assert none == 0 and [e.task_id for e in same] == [pool[0].task_id] * 2 + [pool[1].task_id] * 2  # no fresh task
