"""The Reflector's few-shot examples fit the loop they are shown in.

A real instruct model copies its examples almost word for word: shown the ReAct example (a search
story) after a chain-of-thought failure, Qwen2.5-Coder-1.5B wrote "I searched for the company
instead of the team..." in a loop that has no search, and its retries then failed. So each agent
gets examples of its own shape (reinagent.plan.reflection_examples).
"""

from __future__ import annotations

import json

import pytest

from reinagent import benchmarks
from reinagent.config import RunConfig
from reinagent.paths import DATA_DIR
from reinagent.plan import reflection_examples


@pytest.mark.parametrize("agent,has_search,has_context", [
    ("react", True, False), ("cot-context", False, True), ("cot-no-context", False, False)])
def test_each_hotpotqa_agent_gets_examples_of_its_own_shape(agent, has_search, has_context):
    examples = reflection_examples(benchmarks.make("hotpotqa"), agent)
    assert ("Search[" in examples) is has_search
    assert ("Context:" in examples) is has_context
    assert examples.count("Failed attempt:") == examples.count("Reflection:") == 2


def test_the_run_hands_the_agents_examples_to_its_reflector(tmp_path):
    from reinagent.plan import build
    from reinagent.plan import resolve

    plan = resolve(RunConfig(benchmark="hotpotqa", agent="cot-context", model="scripted:x"), task_ids=(), check_models=False)
    exp = build(plan, None, models=(None, None, []))
    assert "Context:" in exp.reflector.examples and "Search[" not in exp.reflector.examples


def test_no_example_question_is_an_evaluation_question():
    bench = benchmarks.make("hotpotqa")
    hard = [json.loads(line)["question"] for line in (DATA_DIR / "hotpotqa" / "hotpotqa-hard100.jsonl").open()]
    texts = [reflection_examples(bench, a) for a in bench.agents]
    for question in hard:
        assert not any(question in t for t in texts), question


def test_other_benchmarks_keep_one_set():
    bench = benchmarks.make("humaneval")
    assert reflection_examples(bench, "coder") == bench.reflection_examples != ""


# Replies of the 1.5B's Reflector in hotpot_runs/qwen2.5-coder-1.5b/react_reflexion (trial 1),
# before this rule: every HotpotQA reply opened with the examples' header, and a third restated an
# example's reflection there before its own.
COPIED = ("Failed attempt: I searched for the city instead of the team, then guessed the total capacity instead of the "
          "seated capacity. Next time I will search the team page first to find the arena's name, search the arena, "
          "and answer with the number of seats the page gives for seating. Reflection: I made a mistake by assuming "
          "the question was about the company's old name. Next time I will search VIVA Media first.")
RESTATED = ("Failed attempt:\nI searched for the Rome Protocols and did not find the signers.\n\nReflection: I never "
            "searched the signers' pages. Next time I will search each Prime Minister.")


@pytest.mark.parametrize("reply,kept", [
    (COPIED, "I made a mistake by assuming the question was about the company's old name. Next time I will search VIVA Media first."),
    (RESTATED, "I never searched the signers' pages. Next time I will search each Prime Minister."),
    ("**Your failed attempt:** I answered too early; next time I will read both pages.",
     "I answered too early; next time I will read both pages."),
    ("Reflection: I compared jobs, not nationalities.", "I compared jobs, not nationalities."),
    # the model's own text, then a continuation of the examples with a label of its own: the first
    # label's text is the model's (the last would be the invented example's)
    ("Failed attempt: I guessed.\nReflection: I never searched the film.\n\nFailed attempt:\nQuestion: Who?\n"
     "Reflection: I searched for the city instead of the team.",
     "I never searched the film."),
    # cut at the token limit right after a label: the words after the label are the model's; an
    # echo of the attempt before it is not a reflection, so nothing is kept
    ("Failed attempt: I searched for the question instead of the film. Reflection:", ""),
    ("Failed attempt: I guessed. Reflection: Next time I will search the film. Reflection: **",
     "Next time I will search the film."),
    # no echoed header: a "Reflection:" inside the text is the model's own words, kept
    ("I wrote 'Reflection: done' as my answer. Next time I will answer the question.",
     "I wrote 'Reflection: done' as my answer. Next time I will answer the question."),
])
def test_a_reply_that_echoes_the_examples_header_keeps_its_own_reflection(reply, kept):
    from reinagent.reflector import clean_reflection

    assert clean_reflection(reply) == kept


def test_the_committed_1_5b_reflections_lose_the_copied_example():
    """On the committed ReAct run's reflections (recorded before this rule): nearly all opened with
    the header; of those that restated the example's first sentence, what is now kept mostly does
    not (it stays where the model's own text after the label copies it again)."""
    from pathlib import Path

    from reinagent.reflector import clean_reflection

    path = Path(__file__).parents[1] / "hotpot_runs" / "qwen2.5-coder-1.5b" / "react_reflexion" / "records.jsonl"
    if not path.exists():
        pytest.skip("the committed 1.5B ReAct run is not in this checkout")
    replies = [json.loads(line)["reflection"] for line in path.open(encoding="utf-8")]
    replies = [r for r in replies if r]
    copied = "I searched for the city instead of the team, then guessed the total capacity"
    assert sum(r.startswith("Failed attempt:") for r in replies) >= 0.9 * len(replies)
    before = sum(copied in r for r in replies)
    after = sum(copied in clean_reflection(r) for r in replies)
    assert before >= 10 and after <= before // 3, (before, after)
    assert not any(clean_reflection(r).lower().startswith("failed attempt") for r in replies)
