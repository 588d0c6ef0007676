"""The `arithmetic` benchmark: generated splits, the environment's verdicts, runs with scripted models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from reinagent import benchmarks, run
from reinagent.benchmarks.arithmetic import TEST_SIZE, all_tasks, make_task
from reinagent.env import check_env
from reinagent.errors import ConfigError
from reinagent.runner import load_run

from .conftest import run_cli


def test_splits_are_deterministic_disjoint_and_complete():
    bench = benchmarks.make("arithmetic")
    test, train = bench.load_tasks("test"), bench.load_tasks("train")
    assert len(test) == TEST_SIZE and len(train) == 200 - TEST_SIZE
    assert not {(t.a, t.op, t.b) for t in test} & {(t.a, t.op, t.b) for t in train}
    all_tasks.cache_clear()  # generated again from the seed: the same order
    assert [t.task_id for t in benchmarks.make("arithmetic-v1").load_tasks("test")] == [t.task_id for t in test]
    for t in test + train:
        assert 0 <= t.a <= 9 and 0 <= t.b <= 9 and t.op in "+-"
        assert int(t.answer) == (t.a + t.b if t.op == "+" else t.a - t.b)
        assert t.question == f"What is {t.a} {t.op} {t.b}?"


def test_arithmetic20_heldout_is_test_and_the_untrained_tail_of_train():
    """`heldout` (issue 37) must hold nothing a training run on train[:TRAIN_HEAD] sees, and all of
    test: a task in both would let training leak into the comparison."""
    from reinagent.benchmarks.arithmetic import TRAIN_HEAD

    bench = benchmarks.make("arithmetic20")
    test, train, heldout = (bench.load_tasks(s) for s in ("test", "train", "heldout"))
    assert bench.splits == ("test", "train", "heldout") and TRAIN_HEAD == 200
    assert [t.task_id for t in heldout] == [t.task_id for t in test + train[TRAIN_HEAD:]]
    assert len(heldout) == 600 == len({(t.a, t.op, t.b) for t in heldout})
    assert not {t.question for t in heldout} & {t.question for t in train[:TRAIN_HEAD]}
    with pytest.raises(ConfigError, match="valid: test or train$"):
        benchmarks.make("arithmetic").load_tasks("heldout")  # one-digit arithmetic has no such split
    with pytest.raises(ConfigError, match="valid: test, train or heldout"):
        bench.load_tasks("dev")


def test_unknown_split_and_agent_are_one_line_errors():
    bench = benchmarks.make("arithmetic")
    with pytest.raises(ConfigError, match="valid: test or train"):
        bench.load_tasks("dev")
    with pytest.raises(ConfigError, match="valid: cot"):
        bench.make_agent("react", None)


def test_env_rewards_and_feedback():
    bench = benchmarks.make("arithmetic")
    task = make_task(3, "-", 8)

    class Cfg:
        max_steps = 2

    check_env(bench.make_env(task, Cfg()), ["Finish[-5]"])
    env = bench.make_env(task, Cfg())
    obs, _ = env.reset(seed=0)
    assert obs == "Question: What is 3 - 8?"
    obs, reward, terminated, truncated, _ = env.step("I do not know")  # no number: an observation, not a crash
    assert (reward, terminated, truncated) == (0.0, False, False) and "Invalid answer" in obs
    obs, reward, terminated, _, info = env.step("Thought: 3 - 8 = -5.\nAction: Finish[-5]")
    assert (reward, terminated, info["answer"]) == (1.0, True, "-5")
    env = bench.make_env(task, Cfg())
    assert env.step("Finish[5]")[1] == 0.0  # the wrong sign is wrong


SCRIPT = {
    "rules": [
        {"when": "Your failed attempt", "reply": "I subtracted in the wrong order; next time a - b."},
        # the first test task is answered right; the rest wrong on the first try
    ],
    "default": "Thought: guess.\nAction: Finish[100]",
}


def _script(tmp_path: Path, first) -> Path:
    rules = [{"when": "What is " + f"{first.a} \\{first.op} {first.b}" + r"\?$", "reply": f"Thought: ok.\nAction: Finish[{first.answer}]"},
             *SCRIPT["rules"]]
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump({"rules": rules, "default": SCRIPT["default"]}))
    return path


def test_run_with_a_scripted_model(tmp_path):
    first = benchmarks.make("arithmetic").load_tasks("test")[0]
    run_dir = run(benchmark="arithmetic", num_envs=3, num_trials=2, model=f"scripted:{_script(tmp_path, first)}",
                  run_dir=str(tmp_path / "run"), cache=False, progress=False)
    records = load_run(run_dir)[1]
    solved = {r.task_id for r in records if r.success}
    assert solved == {first.task_id}
    assert all(r.reflection for r in records if r.trial == 1 and not r.success)  # Reflexion on failures


def test_multi_turn_rollout_gives_feedback_and_discounts(tmp_path):
    """A wrong answer gets the feedback and a second try in the same conversation."""
    task = benchmarks.make("arithmetic").load_tasks("test")[1]
    script = tmp_path / "mt.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"when": "Unfortunately your answer is wrong",
                                                 "reply": f"Thought: again.\nAction: Finish[{task.answer}]"}],
                                      "default": "Thought: guess.\nAction: Finish[100]"}))
    run_dir = run(benchmark="arithmetic", split="test", num_envs=2, num_trials=1, model=f"scripted:{script}",
                  rollout="multi-turn", max_turns=3, turn_discount=0.5, strategy="none",
                  run_dir=str(tmp_path / "run"), cache=False, progress=False)
    record = next(r for r in load_run(run_dir)[1] if r.task_id == task.task_id)
    assert record.success and record.reward == 0.5
    assert [t["answer"] for t in record.trajectory.extra["turns"]] == ["100", task.answer]


def test_cli_run_and_list(tmp_path):
    first = benchmarks.make("arithmetic").load_tasks("test")[0]
    done = run_cli("run", "--benchmark", "arithmetic", "--model", f"scripted:{_script(tmp_path, first)}", "--num-envs", "2",
                   "--num-trials", "1", "--run-dir", str(tmp_path / "cli"), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    # the run directory is named once (when the run starts); the end names the report files it wrote
    assert (done.stdout + done.stderr).count("run directory:") == 1, done.stdout + done.stderr
    html, md = tmp_path / "cli" / "report.html", tmp_path / "cli" / "report.md"
    assert f"report:        {html}" in done.stdout and str(md) in done.stdout
    assert html.read_text().lstrip().lower().startswith("<!doctype html") and "success rate" in md.read_text()
    spec = json.loads((tmp_path / "cli" / "spec.json").read_text())
    assert spec["config"]["benchmark"] == "arithmetic" and len(spec["task_ids"]) == 2
    listed = run_cli("list")
    assert "arithmetic" in listed.stdout and "test (default), train" in listed.stdout


@pytest.mark.slow
def test_run_with_the_embedded_model(tmp_path):
    """`reinagent run --benchmark arithmetic` with the embedded SmolLM2 (real generations, judged)."""
    run_dir = run(benchmark="arithmetic", num_envs=2, num_trials=1, model="local", max_tokens=24,
                  run_dir=str(tmp_path / "run"), cache=False, progress=False)
    records = load_run(run_dir)[1]
    assert len(records) == 2 and all(r.error is None and r.trajectory.steps for r in records)
