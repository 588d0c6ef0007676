"""The coder's retry is the reference's chat (noahshinn/reflexion, programming_runs/generators/
generator_utils.py:38-63): turn by turn, per strategy. No model: the messages themselves."""

from __future__ import annotations

import pytest

from reinagent.agents.coder import CoderAgent, retry_messages
from reinagent.memory import EpisodicMemory, MemoryView, trial_view
from reinagent.programming import prompts
from reinagent.records import Trajectory
from reinagent.settings import AgentSettings
from reinagent.strategy import ReflexionStrategy as S


class _Task:
    task_id = "HumanEval/2"
    entry_point = "truncate_number"
    text = '```python\ndef truncate_number(number: float) -> float:\n    """The decimal part."""\n```'


PROGRAM = "def truncate_number(number: float) -> float:\n    return float(int(number))"
FEEDBACK = "Tests failed:\nassert truncate_number(3.5) == 0.5  # output: 3.0"
REFLECTION = "I returned the integer part.\nNext time:\n```python\nreturn number % 1.0\n```"


def _previous() -> Trajectory:
    return Trajectory(answer=PROGRAM, extra={"implementation": PROGRAM, "feedback": FEEDBACK})


def _view(strategy: S, reflections=(REFLECTION,), previous: bool = True) -> MemoryView:
    memory = EpisodicMemory(window=1, reflections=list(reflections))
    last = "rendered previous attempt" if previous else None
    return trial_view(2, strategy, memory, last, None, _previous() if previous else None)


def _turns(messages):
    return [(m.role, m.content) for m in messages]


def test_last_attempt_and_reflexion_is_the_references_six_turns():
    turns = _turns(CoderAgent(AgentSettings()).prompt(_Task(), _view(S.LAST_ATTEMPT_AND_REFLEXION)))
    assert [r for r, _ in turns] == ["system", "user", "assistant", "user", "assistant", "user"]
    system, example, previous, results, reflection, improved = (c for _, c in turns)
    assert system == prompts.RETRY_SYSTEM
    # the worked example has every part, in the reference's order, and ends the examples
    labels = [prompts.PREVIOUS_LABEL, prompts.RESULTS_LABEL, prompts.REFLECTION_LABEL, prompts.IMPROVED_LABEL]
    assert [example.index(label) for label in labels] == sorted(example.index(label) for label in labels)
    assert example.rstrip().endswith(prompts.EXAMPLES_END) and PROGRAM not in example
    assert previous == f"```python\n{PROGRAM}\n```"
    assert results == f"{prompts.RESULTS_LABEL}\n{FEEDBACK}\n\n{prompts.REFLECTION_LABEL}"
    assert reflection == REFLECTION  # kept whole: its lines and its code block
    assert improved == f"{prompts.IMPROVED_LABEL}\n{_Task.text}"


def test_last_attempt_is_the_same_chat_without_the_reflection_turns():
    turns = _turns(CoderAgent(AgentSettings()).prompt(_Task(), _view(S.LAST_ATTEMPT, reflections=())))
    assert [r for r, _ in turns] == ["system", "user", "assistant", "user"]
    _, example, previous, last = (c for _, c in turns)
    assert prompts.REFLECTION_LABEL not in example + last and prompts.EXAMPLE_REFLECTION not in example
    assert previous == f"```python\n{PROGRAM}\n```"
    assert last == f"{prompts.RESULTS_LABEL}\n{FEEDBACK}\n\n{prompts.IMPROVED_LABEL}\n{_Task.text}"


def test_reflexion_alone_has_the_reflection_turns_and_no_previous_program():
    turns = _turns(CoderAgent(AgentSettings()).prompt(_Task(), _view(S.REFLEXION, previous=False)))
    assert [r for r, _ in turns] == ["system", "user", "assistant", "user"]
    _, example_and_label, reflection, improved = (c for _, c in turns)
    assert example_and_label.endswith(f"{prompts.EXAMPLES_END}\n\n{prompts.REFLECTION_LABEL}")
    assert prompts.PREVIOUS_LABEL not in example_and_label and PROGRAM not in example_and_label
    assert reflection == REFLECTION and improved == f"{prompts.IMPROVED_LABEL}\n{_Task.text}"


def test_a_strategy_that_shows_nothing_keeps_the_first_attempts_prompt():
    agent = CoderAgent(AgentSettings())
    first = agent.prompt(_Task(), MemoryView(1, S.REFLEXION))
    for view in (_view(S.NONE), _view(S.REFLEXION, reflections=(), previous=False)):
        assert retry_messages(_Task(), view) is None
        assert _turns(agent.prompt(_Task(), view)) == _turns(first)
    assert first[-1].content.endswith(prompts.IMPLEMENT_INSTRUCTION.format(entry_point="truncate_number"))


def test_the_window_of_reflections_goes_in_the_one_reflection_turn_oldest_first():
    memory = EpisodicMemory(window=2, reflections=["first lesson", "second lesson", "third lesson"])
    view = trial_view(4, S.LAST_ATTEMPT_AND_REFLEXION, memory, "x", None, _previous())
    turns = _turns(retry_messages(_Task(), view))
    assert turns[4] == ("assistant", "second lesson\n\nthird lesson")


@pytest.mark.parametrize("strategy", [S.NONE, S.REFLEXION])
def test_the_previous_program_is_shown_only_where_the_strategy_shows_the_last_attempt(strategy):
    view = _view(strategy)
    assert view.previous is None
    assert PROGRAM not in "".join(m.content for m in CoderAgent(AgentSettings()).prompt(_Task(), view))
