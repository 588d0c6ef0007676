"""The Reflector's few-shot examples fit the loop they are shown in.

A real instruct model copies its examples almost word for word: shown the ReAct example (a search
story) after a chain-of-thought failure, Qwen2.5-Coder-1.5B wrote "I searched for the company
instead of the team..." in a loop that has no search, and its retries then failed. So each agent
gets examples of its own shape (reinagent.benchmarks.base.Benchmark.reflection_examples_for).
"""

from __future__ import annotations

import json

import pytest

from reinagent import benchmarks
from reinagent.config import RunConfig
from reinagent.paths import DATA_DIR


@pytest.mark.parametrize("agent,has_search,has_context", [
    ("react", True, False), ("cot-context", False, True), ("cot-no-context", False, False)])
def test_each_hotpotqa_agent_gets_examples_of_its_own_shape(agent, has_search, has_context):
    examples = benchmarks.make("hotpotqa").reflection_examples_for(agent)
    assert ("Search[" in examples) is has_search
    assert ("Context:" in examples) is has_context
    assert examples.count("Failed attempt:") == examples.count("Reflection:") == 2


def test_the_run_hands_the_agents_examples_to_its_reflector(tmp_path):
    from reinagent.experiment import build
    from reinagent.plan import resolve

    plan = resolve(RunConfig(benchmark="hotpotqa", agent="cot-context", model="scripted:x"), task_ids=(), check_models=False)
    exp = build(plan, None, models=(None, None, []))
    assert "Context:" in exp.reflector.examples and "Search[" not in exp.reflector.examples


def test_no_example_question_is_an_evaluation_question():
    bench = benchmarks.make("hotpotqa")
    hard = [json.loads(line)["question"] for line in (DATA_DIR / "hotpotqa" / "hotpotqa-hard100.jsonl").open()]
    texts = [bench.reflection_examples_for(a) for a in bench.agents]
    for question in hard:
        assert not any(question in t for t in texts), question


def test_other_benchmarks_keep_one_set():
    bench = benchmarks.make("humaneval")
    assert bench.reflection_examples_for("coder") == bench.reflection_examples != ""
