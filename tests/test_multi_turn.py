"""The multi-turn rollout: feedback on a wrong answer, another try in the same episode, a discounted
reward; its settings, which agents it supports, and its composition with the trial strategies."""

from __future__ import annotations

import pytest

from reinagent.rollouts.multi_turn import CONTINUABLE, FEEDBACK
from reinagent.runner import load_run
from tests.conftest import one_line_error, run_cli

# GSM8K test/1: "A robe takes 2 bolts of blue fiber and half that much white fiber..." (gold 3)
ROBE = "A robe takes 2 bolts"
WRONG = "Thought: 2 bolts.\nAction: Finish[2]"
RIGHT = "Thought: 2 + 1 = 3.\nAction: Finish[3]"
# Right only when the prompt holds both the feedback and the first, wrong attempt.
SECOND_TURN = {"when": r"(?s)^(?=.*Unfortunately your answer is wrong\. Let's try again\.)(?=.*Finish\[2\])",
               "reply": RIGHT}


def _config(tmp_path) -> str:
    """A YAML file choosing the rollout (a config file's keys are the flags' settings)."""
    path = tmp_path / "multi-turn.yaml"
    path.write_text("rollout: multi-turn\n")
    return str(path)


def _run(tmp_path, *flags, model, reflector=None, name="run"):
    run_dir = tmp_path / name
    args = ["run", "--benchmark", "gsm8k", "--rollout", "multi-turn", "--model", model,
            "--run-dir", str(run_dir), "--no-cache", "--quiet", *flags]
    if reflector:
        args += ["--reflector-model", reflector]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return load_run(run_dir)


def test_solves_on_turn_two_from_the_feedback_and_first_attempt(tmp_path, script):
    model = script([SECOND_TURN, {"when": ROBE, "reply": WRONG}], default="Thought: no idea.")
    spec, records = _run(tmp_path, "--num-envs", "2", "--num-trials", "1", "--split", "test", model=model)
    assert spec.config["rollout"] == "multi-turn" and spec.config["max_turns"] == 5
    rec = next(r for r in records if r.task_id == "test/1")
    assert rec.success and rec.answer == "3" and rec.error is None
    assert rec.reward == pytest.approx(0.9)  # 1.0 * 0.9 ** (2 - 1)
    assert rec.evaluation["raw_reward"] == 1.0 and rec.evaluation["discounted_reward"] == pytest.approx(0.9)
    assert rec.evaluation["turns"] == 2 and rec.evaluation["gold"] == "3"
    assert rec.evaluation["benchmark_evaluations"] == 2  # the judge ran once per turn
    traj = rec.trajectory
    assert traj.rollout == "multi-turn" and len(traj.calls) == 2
    # each turn's answer and the feedback are in the trajectory
    assert [s.action for s in traj.steps] == ["Finish[2]", "Finish[3]"]
    assert traj.steps[0].observation == f"Answer submitted: 2\n{FEEDBACK}"
    assert [(t["turn"], t["answer"], t["success"], t["feedback"]) for t in traj.extra["turns"]] == [
        (1, "2", False, FEEDBACK), (2, "3", True, None)]
    # the second call's prompt is the first conversation plus the feedback as an observation
    second_prompt = traj.prompt_of(traj.steps[1])
    assert second_prompt[:3] == traj.prompt_of(traj.steps[0]) + [traj.messages[2]]
    assert second_prompt[-1].role == "user" and second_prompt[-1].content == f"Observation: {FEEDBACK}"
    assert [m.role for m in traj.messages] == ["system", "user", "assistant", "user", "assistant"]


def test_a_model_that_ignores_feedback_uses_every_turn_and_no_more(tmp_path, script):
    model = script([{"when": ROBE, "reply": WRONG}])
    _, records = _run(tmp_path, "--num-envs", "2", "--num-trials", "1", "--max-turns", "3",
                      "--turn-discount", "0.5", model=model)
    rec = next(r for r in records if r.task_id == "test/1")
    assert not rec.success and rec.reward == 0.0 and rec.evaluation["raw_reward"] == 0.0
    assert rec.evaluation["turns"] == 3 and len(rec.trajectory.calls) == 3 and len(rec.trajectory.steps) == 3
    assert rec.trajectory.extra["turns"][-1]["feedback"] is None  # no feedback after the last turn
    # the episode ran out of turns (each turn itself finished: it gave an answer)
    assert rec.trajectory.end_reason == "turn_budget"
    assert [t["end_reason"] for t in rec.trajectory.extra["turns"]] == ["finished"] * 3
    assert rec.trajectory.messages[-1].content.count(FEEDBACK) == 0
    assert sum(m.content.count(FEEDBACK) for m in rec.trajectory.messages) == 2


def test_the_episode_budget_ends_the_retries(tmp_path, script):
    # Two calls allowed: two judged answers; the third turn is refused before any call, so it is
    # no turn at all, and the episode ends on the budget with its last answer.
    model = script([{"when": ROBE, "reply": WRONG}])
    _, records = _run(tmp_path, "--num-envs", "2", "--num-trials", "1", "--max-calls-per-episode", "2", model=model)
    rec = next(r for r in records if r.task_id == "test/1")
    assert len(rec.trajectory.calls) == 2 and rec.evaluation["turns"] == 2 and not rec.success
    assert rec.trajectory.end_reason == "call_budget" and rec.answer == "2" and rec.error is None


def test_discount_applies_per_turn_and_a_reply_without_a_number_is_a_turn(tmp_path, script):
    # turn 1 has no number (an observation, then feedback merged into that user turn), turn 2 is
    # wrong, turn 3 right: reward 0.5 ** 2.
    model = script([{"when": ROBE, "reply": ["I am thinking.", WRONG, RIGHT]}])
    _, records = _run(tmp_path, "--num-envs", "2", "--num-trials", "1", "--turn-discount", "0.5", model=model)
    rec = next(r for r in records if r.task_id == "test/1")
    assert rec.success and rec.reward == pytest.approx(0.25) and rec.evaluation["turns"] == 3
    turns = rec.trajectory.extra["turns"]
    assert [(t["answer"], t["end_reason"]) for t in turns] == [(None, "step_budget"), ("2", "finished"), ("3", "finished")]
    roles = [m.role for m in rec.trajectory.messages]
    assert all(a != b for a, b in zip(roles[1:], roles[2:]))  # user and assistant alternate
    assert rec.trajectory.messages[3].content.startswith("Observation: Invalid answer: no number found")
    assert rec.trajectory.messages[3].content.endswith(f"Observation: {FEEDBACK}")


def test_reflection_after_a_failed_multi_turn_episode(tmp_path, script):
    # Trial 1 fails all 2 turns; the Reflector sees both turns and the feedback; trial 2 solves on
    # turn 1 because the reflection reached its prompt (full reward: turn 1 is not discounted).
    model = script([{"when": "(?s)lessons you wrote down.*REMEMBER-WHITE", "reply": RIGHT},
                    {"when": ROBE, "reply": WRONG}])
    reflector = script([{"when": f"(?s)Finish\\[2\\].*{FEEDBACK}.*Finish\\[2\\].*Write your reflection",
                         "reply": "REMEMBER-WHITE: add the white fiber."}], default="no reflection")
    _, records = _run(tmp_path, "--num-envs", "2", "--num-trials", "2", "--max-turns", "2",
                      "--strategy", "reflexion", model=model, reflector=reflector)
    by = {(r.task_id, r.trial): r for r in records if r.task_id == "test/1"}
    first, second = by["test/1", 1], by["test/1", 2]
    assert not first.success and first.evaluation["turns"] == 2
    assert first.reflection == "REMEMBER-WHITE: add the white fiber."
    assert second.success and second.reward == 1.0 and second.evaluation["turns"] == 1
    assert second.memory == [first.reflection]


def test_last_attempt_strategy_shows_every_turn(tmp_path, script):
    model = script([{"when": f"(?s)previous attempt.*Finish\\[2\\].*{FEEDBACK}", "reply": RIGHT},
                    {"when": ROBE, "reply": WRONG}])
    _, records = _run(tmp_path, "--num-envs", "2", "--num-trials", "2", "--max-turns", "2",
                      "--strategy", "last_attempt", model=model)
    by = {(r.task_id, r.trial): r for r in records if r.task_id == "test/1"}
    assert not by["test/1", 1].success and by["test/1", 2].success


def test_both_memories_reach_the_next_trial(tmp_path, script):
    # last_attempt_and_reflexion: trial 2 is right only when its prompt holds the reflection and
    # the previous multi-turn attempt with its feedback.
    model = script([{"when": f"(?s)^(?=.*REMEMBER-WHITE)(?=.*previous attempt.*{FEEDBACK})", "reply": RIGHT},
                    {"when": ROBE, "reply": WRONG}])
    reflector = script([{"when": ".", "reply": "REMEMBER-WHITE: add the white fiber."}])
    _, records = _run(tmp_path, "--num-envs", "2", "--num-trials", "2", "--max-turns", "2",
                      "--strategy", "last_attempt_and_reflexion", model=model, reflector=reflector)
    by = {(r.task_id, r.trial): r for r in records if r.task_id == "test/1"}
    assert not by["test/1", 1].success and by["test/1", 2].success and by["test/1", 2].reward == 1.0


def test_hotpotqa_cot_retries_too(tmp_path, script):
    # (the rollout chosen in a YAML config file this time)
    model = script([{"when": r"(?s)^(?=.*Unfortunately your answer is wrong)(?=.*Finish\[wrong\])",
                     "reply": "Thought: read again.\nAction: Finish[Gesellschaft mit beschränkter Haftung]"}])
    run_dir = tmp_path / "hotpot"
    proc = run_cli("run", "--config", _config(tmp_path), "--benchmark", "hotpotqa", "--agent", "cot-context",
                   "--num-envs", "1", "--num-trials", "1", "--model", model, "--run-dir", str(run_dir),
                   "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    (rec,) = load_run(run_dir)[1]
    assert rec.success and rec.reward == pytest.approx(0.9) and rec.f1 == 1.0 and rec.evaluation["turns"] == 2


@pytest.mark.parametrize(("flags", "needles"), [
    (["--max-turns", "0"], ["--max-turns must be a positive whole number, got 0"]),
    (["--turn-discount", "0"], ["--turn-discount must be in (0, 1], got 0"]),
    (["--turn-discount", "1.5"], ["--turn-discount must be in (0, 1], got 1.5"]),
    (["--benchmark", "hotpotqa", "--agent", "react"],
     ["rollout multi-turn needs an agent that can continue", "hotpotqa react cannot", "gsm8k cot", "cot-context"]),
])
def test_bad_settings_are_one_line_errors(tmp_path, script, flags, needles):
    proc = run_cli("run", "--benchmark", "gsm8k", "--rollout", "multi-turn", "--model", script([]),
                   "--run-dir", str(tmp_path / "bad"), *flags)
    one_line_error(proc, *needles)
    assert not (tmp_path / "bad").exists()


def test_the_table_of_continuable_agents_matches_the_agents():
    from reinagent import make
    from reinagent.benchmarks import REGISTRY
    from reinagent.settings import AgentSettings

    for name in ("gsm8k", "hotpotqa", "humaneval", "mbpp"):
        bench = make(name)
        for agent in REGISTRY[name][2]:
            can = callable(getattr(bench.make_agent(agent, AgentSettings()), "continue_episode", None))
            assert can == (agent in CONTINUABLE.get(name, ())), (name, agent)
