"""A ReAct or CoT reply that stops after its thought is asked for its action within the same step,
as the reference asks for `Action {n}:` after every thought (issue 43's parse survey)."""

from __future__ import annotations

from reinagent import run
from reinagent.runner import load_run

GOLD = "Gesellschaft mit beschränkter Haftung"  # hotpotqa hard100, the first task


def _one(script, tmp_path, agent: str, replies: list[str]):
    model = script([{"when": "VIVA Media", "reply": replies}])
    run_dir = run(benchmark="hotpotqa", agent=agent, strategy="none", num_trials=1, num_envs=1, model=model,
                  run_dir=str(tmp_path / agent), cache=False, progress=False, constrained=False)
    return load_run(run_dir)[1][0]


def test_a_thought_without_an_action_is_asked_for_its_action(script, tmp_path):
    record = _one(script, tmp_path, "react", ["Thought: The legal form is spelled out in full.", f"Finish[{GOLD}]"])
    (step,) = record.trajectory.steps
    assert step.valid_action and step.action == f"Finish[{GOLD}]" and record.success
    assert len(record.trajectory.calls) == 2  # the reply, and the question for its action
    assert record.trajectory.messages[-1].content == f"Thought: The legal form is spelled out in full.\nAction: Finish[{GOLD}]"


def test_the_cot_agent_is_asked_too_and_a_full_reply_is_asked_nothing(script, tmp_path):
    asked = _one(script, tmp_path, "cot-context", ["Thought: It stands for the legal form.", f"Action: Finish[{GOLD}]"])
    assert asked.success and len(asked.trajectory.calls) == 2
    whole = _one(script, tmp_path / "b", "cot-context", [f"Thought: It is the legal form.\nAction: Finish[{GOLD}]"])
    assert whole.success and len(whole.trajectory.calls) == 1


def test_a_math_reply_without_an_action_is_read_for_its_number_not_asked_again(script, tmp_path):
    """GSM8K's rule: a reply with no Finish[...] is read for its number (no second call)."""
    model = script([], default="Thought: 2 and 3 make 5, so the answer is 5.")
    run_dir = run(benchmark="arithmetic", strategy="none", num_trials=1, num_envs=1, model=model,
                  run_dir=str(tmp_path / "math"), cache=False, progress=False)
    record = load_run(run_dir)[1][0]
    assert len(record.trajectory.calls) == 1
