"""method = "reflect" (reinagent/rl/reflect.py): Reflect, Retry, Reward over token rollouts.

The prompts are the trial loop's own (a real REFLEXION run with a scripted model gives the same
retry and reflector prompts), the masks train exactly the span `reflect_loss` names (never the
first attempt, never an environment token), the reward is the retry's success by the
benchmark's judge, and a real training step on a tiny model writes a checkpoint that
`reinagent run --model/--reflector-model local:PATH` loads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from reinagent.errors import ConfigError
from reinagent.rl import RLAgent, build_rl_config

from .conftest import one_line_error, run_cli
from .test_rl import ScriptedPolicy, _toml, tiny, tiny_model  # noqa: F401  (module-scoped fixtures)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

WRONG_1 = "Thought: I guess.\nAction: Finish[100]"
WRONG_2 = "Thought: again.\nAction: Finish[101]"
LESSON = "I guessed instead of computing. Next time I will compute the sum digit by digit."
RETRY_WRONG = "Thought: hmm.\nAction: Finish[102]"


def _reflect(tokenizer, **settings):
    from reinagent.rl.reflect import ReflectRollout

    agent = RLAgent(model=ScriptedPolicy(tokenizer, []), tokenizer=tokenizer, env_name="arithmetic",
                    method="reflect", max_workers=16, **settings)
    return agent, ReflectRollout(agent.token_rollout())


def _trained_text(tokenizer, ep) -> str:
    return tokenizer.decode([t for t, m in zip(ep.completion_ids, ep.env_mask) if m], skip_special_tokens=True)


def test_config_names_the_loss_settings():
    assert build_rl_config({"method": "reflect"}).reflect_loss == "both"
    with pytest.raises(ConfigError) as err:
        build_rl_config({"method": "reflect", "reflect_loss": "first"})
    assert all(w in str(err.value) for w in ("reflection", "retry", "both")) and "\n" not in str(err.value)


INVALID = "I think the answer is 100 but I am not sure"  # no Action: the trial loop's "(invalid output)"


@pytest.mark.parametrize("first_reply", [WRONG_1, INVALID], ids=["wrong", "unparseable"])
def test_retry_and_reflector_prompts_are_the_trial_loops(tiny, tmp_path, first_reply):
    """A REFLEXION run (2 trials, a scripted model) and the reflect method build the same prompts,
    byte for byte, also for a first attempt that does not parse (issue 44 §7)."""
    import reinagent
    from reinagent.reflector import Reflector
    from reinagent.store import read_records

    _, tokenizer = tiny
    agent, reflect = _reflect(tokenizer, max_turns=1)
    task = agent.bench.load_tasks("test")[0]
    script = tmp_path / "model.yaml"
    script.write_text(json.dumps({"rules": [{"when": "Your failed attempt", "reply": LESSON},
                                            {"when": "lessons you wrote down", "reply": RETRY_WRONG}],
                                  "default": first_reply}))
    run_dir = reinagent.run(benchmark="arithmetic", model=f"scripted:{script}", strategy="reflexion", num_trials=2,
                            num_envs=1, run_dir=str(tmp_path / "run"), progress=False)
    first, second = sorted(read_records(run_dir), key=lambda r: r.trial)
    assert first.reflection == LESSON and not second.success
    # the retry's prompt: what trial 2 was asked, up to its reply
    wanted = [m.model_dump() for m in second.trajectory.messages[:2]]
    assert reflect.retry_messages(task, LESSON) == wanted
    assert LESSON in wanted[1]["content"]
    # the reflector's prompt on the same failed attempt, played as a token episode
    [ep] = reflect.rollout.run(ScriptedPolicy(tokenizer, [first_reply]), [task])
    runner_prompt = Reflector(None, agent.bench.reflection_examples).prompt(
        agent.agent.render_attempt(task, first.trajectory))
    assert json.dumps(reflect.reflection_messages(task, ep)) == json.dumps([m.model_dump() for m in runner_prompt])
    if first_reply == INVALID:
        assert f"(invalid output) {INVALID}" in runner_prompt[-1].content


def _played(tokenizer, retry_answer: str | None = None, **settings):
    """Retry turn 2 answers `retry_answer` (None: the right answer)."""
    agent, reflect = _reflect(tokenizer, max_turns=2, **settings)
    task = agent.bench.load_tasks("test")[0]
    retry_last = f"Thought: sure.\nAction: Finish[{task.answer if retry_answer is None else retry_answer}]"
    # calls in order: first attempt (2 turns), the reflections, the retries (2 turns)
    policy = ScriptedPolicy(tokenizer, [WRONG_1, WRONG_2, LESSON, RETRY_WRONG, retry_last])
    played = reflect.play(policy, [task], [task], samples=2, temperature=1.0)
    return task, played


def test_each_loss_setting_trains_its_span_and_nothing_else(tiny):
    from reinagent.rl.reflect import training_rows

    _, tokenizer = tiny
    task, played = _played(tokenizer)
    [group] = played.groups
    assert len(group.pairs) == 2 and played.first_failures == played.first_attempts == 1
    first_tokens = group.first.completion_ids
    for loss, wanted in (("reflection", [LESSON] * 2), ("retry", [f"{RETRY_WRONG}{'Thought: sure.'}"] * 2),
                         ("both", [LESSON, "retry"] * 2)):
        rows = training_rows(played.groups, loss, 2)
        texts = [_trained_text(tokenizer, r) for r in rows]
        assert len(rows) == len(wanted)
        for text, want in zip(texts, wanted):
            if want == LESSON:
                assert text == LESSON
            else:  # the retry's two replies, and not the feedback between them
                assert text.startswith(RETRY_WRONG) and f"Action: Finish[{task.answer}]" in text
                assert "Answer submitted" not in text and "wrong" not in text.lower().replace(RETRY_WRONG.lower(), "")
        for row in rows:
            assert row.prompt_ids != group.first.prompt_ids or row.completion_ids != first_tokens
            assert WRONG_1 not in _trained_text(tokenizer, row)  # the first attempt is never trained
            env = tokenizer.decode([t for t, m in zip(row.completion_ids, row.env_mask) if not m])
            if row is group.pairs[0].retry:
                assert "Answer submitted: 102" in env  # the environment's feedback: masked
    # a group's rows are consecutive, one reward per pair (1.0: the retry's success, turn discount aside)
    rows = training_rows(played.groups, "both", 2)
    assert [r.group for r in rows] == [0, 0, 0, 0] and [r.reward for r in rows] == [1.0, 1.0, 1.0, 1.0]


def test_reward_is_the_retry_success_by_the_benchmarks_judge(tiny, monkeypatch):
    from reinagent.benchmarks.arithmetic import Arithmetic
    from reinagent.records import Evaluation

    _, tokenizer = tiny
    _, played = _played(tokenizer)
    assert [p.success for p in played.groups[0].pairs] == [True, True]
    assert [p.retry.reward for p in played.groups[0].pairs] == [1.0, 1.0]  # not the environment's 0.9 (turn 2)
    _, played = _played(tokenizer, "555")
    assert [p.retry.reward for p in played.groups[0].pairs] == [0.0, 0.0]

    # the verdict is the benchmark's evaluate(): a judge that accepts 555 pays the retry that says
    # it; one that accepts 101 (the first attempt's last answer) leaves nothing to reflect on
    accepted = {"555"}

    async def judge(self, task, trajectory, config):
        ok = trajectory.answer in accepted
        return Evaluation(success=ok, reward=float(ok))

    monkeypatch.setattr(Arithmetic, "evaluate", judge)
    _, played = _played(tokenizer, "555")
    assert [p.retry.reward for p in played.groups[0].pairs] == [1.0, 1.0]
    accepted.add("101")
    _, played = _played(tokenizer, "555")
    assert played.first_failures == 0 and not played.groups[0].pairs


class RecordingPolicy(ScriptedPolicy):
    """A ScriptedPolicy that keeps each generate call's token limit and sampling temperature."""

    def __init__(self, tokenizer, replies):
        super().__init__(tokenizer, replies)
        self.asked: list[tuple[int, float]] = []

    def generate(self, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **options):
        self.asked.append((max_new_tokens, options.get("temperature", 0.0) if options.get("do_sample") else 0.0))
        return super().generate(input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **options)


def test_a_reflection_is_cut_at_the_stop_string_cleaned_and_limited_as_the_trial_loop_does(tiny):
    """What the Reflector would have written in a run: its own token limit (not the answer's), the
    tokens after the stop string neither kept nor trained, the label stripped before the retry
    reads it; and the first attempt at the first-trial temperature, the rest at the step's."""
    from reinagent.rl.reflect import STOP

    _, tokenizer = tiny
    agent, reflect = _reflect(tokenizer, max_turns=1, reflection_max_tokens=90, max_response_length=40,
                              first_trial_temperature=0.0)
    task = agent.bench.load_tasks("test")[0]
    raw = f"Reflection: {LESSON}{STOP}Question: an invented next task, never read"
    policy = RecordingPolicy(tokenizer, [WRONG_1, raw, RETRY_WRONG])
    played = reflect.play(policy, [task], [task], samples=1, temperature=0.7)
    [pair] = played.groups[0].pairs
    assert pair.text == LESSON  # cut at the stop string and cleaned, as Reflector.reflect returns it
    retry_prompt = pair.retry.messages[1]["content"]
    assert LESSON in retry_prompt and "Reflection: I" not in retry_prompt and "invented" not in retry_prompt
    trained = _trained_text(tokenizer, pair.reflection)
    assert "invented" not in trained and LESSON in trained  # the tokens after the stop string are not trained
    (first_limit, first_t), (reflection_limit, reflection_t), (_, retry_t) = policy.asked
    assert reflection_limit == 90 and first_limit == 40  # the reflection's own limit, the answer's for answers
    assert first_t == 0.0 and reflection_t == retry_t == 0.7


def test_a_first_attempt_that_succeeds_is_replaced_or_stands_in_untrained(tiny):
    from reinagent.rl.reflect import step_columns, training_rows

    _, tokenizer = tiny
    agent, reflect = _reflect(tokenizer, max_turns=1)
    task = agent.bench.load_tasks("test")[0]
    right = f"Thought: {task.solution}.\nAction: Finish[{task.answer}]"
    played = reflect.play(ScriptedPolicy(tokenizer, [right]), [task], [task], samples=2, temperature=1.0, rounds=2)
    assert played.first_failures == 0 and played.groups[0].pairs == []
    rows = training_rows(played.groups, "both", 2)
    assert len(rows) == 4 and all(not any(r.env_mask) for r in rows) and len({r.reward for r in rows}) == 1
    columns = step_columns(played, "both")
    assert columns["pairs"] == 0 and columns["first_attempts"] == 1 and columns["failure_groups"] == 0


def _rewarded_reflect(monkeypatch):
    """Every first attempt fails; within each group the retry of sample 0 wins (so advantages,
    and the loss, are not zero whatever a random model writes)."""
    from reinagent.rl import reflect as reflect_module

    def judge(self, items):
        return [e.messages[:2] != self.rollout.prompt_messages(t) and e.sample == 0 for t, e in items]

    monkeypatch.setattr(reflect_module.ReflectRollout, "judge", judge)


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["trl", "reinagent"])
def test_a_reflect_step_trains_the_policy_and_writes_a_checkpoint(tiny_model, tmp_path, monkeypatch, trainer):
    from reinagent.rl.policy import load_policy

    if trainer == "trl":
        pytest.importorskip("trl")
    _rewarded_reflect(monkeypatch)
    model, tokenizer = load_policy(f"local:{tiny_model}")
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", method="reflect", max_turns=1,
                    max_response_length=6, reflection_max_tokens=8, num_tasks=4, batch_size=2, group_size=2,
                    max_steps=1, learning_rate=1e-2, kl_coef=0.05, threads=1, trainer=trainer,
                    output_dir=str(tmp_path / "out"))
    summary = agent.train()
    [row] = [json.loads(line) for line in Path(summary.metrics).read_text().splitlines()]
    assert row["method"] == "reflect" and row["first_attempts"] == 2 and row["first_failures"] == 2
    assert row["pairs"] == 4 and row["retry_successes"] == 2 and row["retry_success"] == 0.5
    assert 0 < row["reflection_tokens_mean"] <= 8 and row["zero_variance_groups"] == 0
    # the loss value may be 0 (ratio 1, advantages cancelling over equal lengths); its gradient is not
    assert math.isfinite(row["loss"]) and math.isfinite(row["kl"])
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert (Path(summary.checkpoint) / "rl.json").is_file()
    from reinagent.store import read_records

    records = read_records(summary.rollouts)
    assert sorted(r.task_id.split("@")[1] for r in records) == ["0", "0", "1", "1", "first", "first"]
    retry = next(r for r in records if r.task_id.endswith("@0"))
    text = retry.trajectory.extra["reflection"]
    assert retry.success and retry.memory == ([text] if text else [])
    assert [c.role for c in retry.trajectory.calls][:2] == ["reflector", "actor"]


@pytest.mark.slow
def test_cli_reflect_trains_resumes_and_its_checkpoint_runs_reflexion(tiny_model, tmp_path):
    pytest.importorskip("trl")
    config = _toml(tmp_path, f"local:{tiny_model}", method="reflect", max_turns=1, reflection_max_tokens=6,
                   batch_size=1, max_steps=1, save_steps=1)
    done = run_cli("rl", "train", "--config", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 1/1: first attempts " in done.stdout and "retry success " in done.stdout, done.stdout
    metrics = tmp_path / "out" / "train_metrics.jsonl"
    [step_1] = [json.loads(line) for line in metrics.read_text().splitlines()]
    again = run_cli("rl", "train", "--config", str(config), "--max-steps", "2")  # resumes from checkpoint-1
    assert again.returncode == 0, again.stderr[-3000:]
    assert "step 2/2: first attempts" in again.stdout, again.stdout
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert rows[0] == step_1 and [r["step"] for r in rows] == [1, 2]  # step 1 kept, not redone
    from reinagent.store import read_records

    assert sorted((r.trial, r.task_id.split("@")[1]) for r in read_records(tmp_path / "out" / "rollouts")) == [
        (1, "0"), (1, "1"), (1, "first"), (2, "0"), (2, "1"), (2, "first")]
    checkpoint = Path(again.stdout.split("checkpoint: ")[1].split()[0])
    # the trained weights are an ordinary model: actor and reflector of a REFLEXION run
    run = run_cli("run", "--benchmark", "arithmetic", "--strategy", "reflexion", "--model", f"local:{checkpoint}",
                  "--reflector-model", f"local:{checkpoint}", "--num-envs", "1", "--num-trials", "2",
                  "--max-tokens", "4", "--run-dir", str(tmp_path / "eval"), "--quiet")
    assert run.returncode == 0, run.stderr[-2000:]
    from reinagent.store import read_spec

    spec = read_spec(tmp_path / "eval")
    assert spec.config["model"] == spec.config["reflector_model"] == f"local:{checkpoint}"
    assert read_records(tmp_path / "eval")


def test_reflect_refuses_settings_it_cannot_honour(tmp_path):
    config = _toml(tmp_path, "local", method="reflect", async_mode=True)
    one_line_error(run_cli("rl", "train", "--config", str(config)), "reflect", "async_mode")


def test_first_trial_temperature_makes_trial_1_greedy_and_keeps_retries_sampled(tmp_path):
    """The paired design: `--first-trial-temperature 0 --temperature 0.7`: every actor call of
    trial 1 is greedy (no sampling seed), trial 2's are sampled."""
    script = tmp_path / "model.yaml"
    script.write_text(json.dumps({"rules": [{"when": "Your failed attempt", "reply": LESSON}], "default": WRONG_1}))
    done = run_cli("run", "--benchmark", "arithmetic", "--strategy", "reflexion", "--model", f"scripted:{script}",
                   "--num-envs", "2", "--num-trials", "2", "--temperature", "0.7", "--first-trial-temperature", "0",
                   "--run-dir", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    from reinagent.store import read_records

    records = read_records(tmp_path / "run")
    actor = {t: [c.seed for r in records if r.trial == t for c in r.trajectory.calls if c.role == "actor"] for t in (1, 2)}
    assert actor[1] and all(seed is None for seed in actor[1])
    assert actor[2] and all(seed is not None for seed in actor[2])
    bad = run_cli("run", "--benchmark", "arithmetic", "--model", f"scripted:{script}", "--first-trial-temperature", "-1")
    one_line_error(bad, "--first-trial-temperature")


def test_reflect_demo_closing_lines(tmp_path):
    """scripts/reflect_demo.sh's last two lines, from six 2-trial runs over the same 10 tasks."""
    from reinagent.rl.compare import reflect_demo_lines
    from reinagent.report.significance import mcnemar_exact

    from .test_report import make_run

    tasks = [f"t{i}" for i in range(10)]

    def runs(name, reflexion_solves, none_solves, first_solved=()):
        for strategy, solves in (("reflexion", reflexion_solves), ("none", none_solves)):
            make_run(tmp_path / f"{name}-{strategy}", {t: [True] if t in first_solved else [False, t in solves]
                                                        for t in tasks}, strategy=strategy, num_trials=2)

    runs("base", {"t0"}, {"t1"}, first_solved={"t9"})  # B: 1 of its 9 failures
    runs("grpo", {"t0", "t1"}, {"t0"}, first_solved={"t8", "t9"})
    # the trained model fails 8 tasks at trial 1, the base model 9: two sets (issue 44 §4)
    runs("reflect", {"t0", "t1", "t2", "t3", "t4", "t5"}, {"t0", "t1"}, first_solved={"t8", "t9"})
    lines = reflect_demo_lines(tmp_path)
    assert lines[-2:] == [
        "retry success after reflection, base -> trained: 11.1% of the base model's 9 failures -> 75.0% of the "
        f"trained model's 8; on the 8 failures both made 12.5% -> 75.0%, McNemar p = {mcnemar_exact(5, 0):.3g} "
        "(trained REFLEXION vs base REFLEXION)",
        "retry success on the trained model's 8 failures: 75.0% after reflection vs 25.0% without (NONE), "
        f"McNemar p = {mcnemar_exact(4, 0):.3g} (trained REFLEXION vs trained NONE)"]
    assert lines[1].startswith("control, plain GRPO for the same steps: retry success after reflection 25.0% vs "
                               "without (NONE) 12.5% on 8 failures")
    assert lines[-3] == "gap REFLEXION - NONE: base +0.0 points, GRPO control +12.5, reflect +50.0"


def test_a_flat_group_gives_way_to_a_fresh_failure(tiny, monkeypatch):
    """dynamic_sampling for reflect: a failure whose G retries all failed (no signal) is replaced
    by a fresh training task's failure; the kept group's rows carry its index."""
    from reinagent.rl import reflect as reflect_module
    from reinagent.rl.reflect import training_rows

    _, tokenizer = tiny
    agent, reflect = _reflect(tokenizer, max_turns=1)
    a, b = agent.bench.load_tasks("test")[:2]

    def judge(self, items):  # first attempts fail; only task b's retry of sample 0 succeeds
        return [e.messages[:2] != self.rollout.prompt_messages(t) and t.task_id == b.task_id and e.sample == 0
                for t, e in items]

    monkeypatch.setattr(reflect_module.ReflectRollout, "judge", judge)
    policy = ScriptedPolicy(tokenizer, [WRONG_1, LESSON, RETRY_WRONG, WRONG_1, LESSON, RETRY_WRONG])
    played = reflect.play(policy, [a], [a, b], samples=2, temperature=1.0, rounds=1)
    [group] = played.groups
    assert group.task.task_id == b.task_id and [p.success for p in group.pairs] == [True, False]
    assert played.resampled == 1 and played.first_attempts == 2 and played.first_failures == 2
    assert all(r.group == 0 for r in training_rows(played.groups, "both", 2))
    flat = reflect.play(ScriptedPolicy(tokenizer, [WRONG_1, LESSON, RETRY_WRONG]), [a], [a, b], samples=2,
                        temperature=1.0, rounds=0)
    assert flat.groups[0].task.task_id == a.task_id and flat.resampled == 0
