"""What each strategy puts into the actor's prompt, checked on the prompts a real run recorded."""

import pytest

from reinagent import run
from reinagent.memory import EpisodicMemory, MemoryView
from reinagent.runner import load_run
from reinagent.strategy import LAST_ATTEMPT_HEADER, REFLECTIONS_HEADER, ReflexionStrategy

REFLECTION = "I trusted the first paragraph; next time I will compare both."
WRONG = "Thought: the first guess.\nAction: Finish[wrong answer]"


def _run(tmp_path, script, strategy, trials=3, memory_size=3):
    model = script([{"when": "Your failed attempt", "reply": REFLECTION}], default=WRONG)
    run_dir = run(benchmark="hotpotqa", agent="cot-context", strategy=strategy, num_trials=trials,
                  num_envs=2, model=model, run_dir=str(tmp_path / strategy), memory_size=memory_size,
                  cache=False, progress=False)
    _spec, records = load_run(run_dir)
    return {(r.task_id, r.trial): r for r in records}


def _prompt(record) -> str:
    return record.trajectory.messages[1].content


@pytest.mark.parametrize("strategy", [s.value for s in ReflexionStrategy])
def test_strategy_shapes_the_prompt(tmp_path, script, strategy):
    records = _run(tmp_path, script, strategy)
    s = ReflexionStrategy(strategy)
    for (task_id, trial), rec in records.items():
        prompt = _prompt(rec)
        if trial == 1:
            assert LAST_ATTEMPT_HEADER not in prompt and REFLECTIONS_HEADER not in prompt
            continue
        assert (LAST_ATTEMPT_HEADER in prompt) == s.uses_last_attempt
        assert ("Finish[wrong answer]" in prompt) == s.uses_last_attempt
        assert (REFLECTIONS_HEADER in prompt) == s.uses_reflections
        assert (REFLECTION in prompt) == s.uses_reflections
        assert rec.memory == ([REFLECTION] * (trial - 1) if s.uses_reflections else [])
    # reflections are written after failed trials only, and only when the strategy uses them
    for (task_id, trial), rec in records.items():
        wants = s.uses_reflections and trial < 3
        assert (rec.reflection == REFLECTION) == wants
        assert bool(rec.reflection_calls) == wants


def test_trial_one_prompts_identical_across_strategies(tmp_path, script):
    none = _run(tmp_path, script, "none", trials=1)
    both = _run(tmp_path, script, "last_attempt_and_reflexion", trials=1)
    for key in none:
        assert none[key].trajectory.messages == both[key].trajectory.messages


def test_memory_window_in_a_run(tmp_path, script):
    records = _run(tmp_path, script, "reflexion", trials=5, memory_size=2)
    for (task_id, trial), rec in records.items():
        assert len(rec.memory) == min(trial - 1, 2)
        assert _prompt(rec).count(REFLECTION) == min(trial - 1, 2)


def test_memory_window_unit():
    memory = EpisodicMemory(window=3)
    for i in range(5):
        memory.add(f"lesson {i}")
    memory.add("  ")  # blank reflections are not memories
    assert memory.recent() == ["lesson 2", "lesson 3", "lesson 4"]
    assert EpisodicMemory(window=0, reflections=["a"]).recent() == []
    view = MemoryView(trial=2, strategy=ReflexionStrategy.NONE, reflections=("a",), last_attempt="x")
    assert view.block() == "" and view.shown_reflections == []



def test_no_reflection_after_a_successful_trial(tmp_path, script):
    """Mutant: reflecting after a successful trial too. The VIVA task (hard100's first) is solved
    at trial 1: its record has no reflection and no reflector call; the other task's has both."""
    viva, right = "VIVA Media AG", "Gesellschaft mit beschränkter Haftung"
    model = script([{"when": "Your failed attempt", "reply": REFLECTION},
                    {"when": viva, "reply": f"Thought: the paragraph says so.\nAction: Finish[{right}]"}],
                   default=WRONG)
    run_dir = run(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=2, num_envs=2,
                  model=model, run_dir=str(tmp_path / "r"), cache=False, progress=False)
    records = load_run(run_dir)[1]
    (solved,) = [r for r in records if r.success]
    assert solved.trial == 1 and solved.reflection is None and solved.reflection_calls == []
    assert [r.trial for r in records if r.task_id == solved.task_id] == [1]
    (wrong,) = [r for r in records if r.task_id != solved.task_id and r.trial == 1]
    assert wrong.reflection == REFLECTION and len(wrong.reflection_calls) == 1


def test_memory_before_a_trial_holds_only_earlier_trials():
    """Mutant: a trial's memory taken from all its task's records, later trials included (what a
    resume that redid a lost trial 1 showed it: the reflection trial 2 wrote)."""
    from reinagent.memory import memory_before
    from reinagent.records import TrialRecord

    done = {("t", k): TrialRecord(task_id="t", trial=k, reflection=f"lesson {k}") for k in (1, 2, 3)}
    done[("u", 1)] = TrialRecord(task_id="u", trial=1, reflection="other task")
    done[("t", 4)] = TrialRecord(task_id="t", trial=4, reflection="errored", error="model error: 500")
    assert memory_before(done, "t", 1, 3).recent() == []
    assert memory_before(done, "t", 3, 3).recent() == ["lesson 1", "lesson 2"]
    assert memory_before(done, "t", 5, 2).recent() == ["lesson 2", "lesson 3"]  # the window; no errored trial
