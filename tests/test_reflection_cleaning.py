"""What the Reflector keeps of a reply (reflector.clean_reflection): the model's own reflection,
whole. One test per rule, each failing on the mutant named in its docstring; replies taken from
the committed 1.5B records where the rule came from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reinagent.programming.prompts import REFLECTION_EXAMPLES
from reinagent.reflector import PLAN_PREFIX, Reflector, clean_reflection

ROOT = Path(__file__).parents[1]

# Mbpp/57's trial-1 reflection in programming_runs/qwen2.5-coder-1.5b/mbpp_reflexion (recorded
# joined into one line, before this rule); here with the line breaks of the code block it held.
MBPP_57 = """The implementation of the `find_Max_Num` function failed because it did not correctly convert the sorted list of digits back into a single integer. To fix this, we need to convert each string in the list to an integer before joining them. Here's the corrected implementation:
```python
def find_Max_Num(arr):
    # Sort the array in descending order
    arr.sort(reverse=True)
    # Convert each string in the list to an integer and join them to form the largest number
    max_num = ''.join(map(str, arr))
    return int(max_num)
```
This implementation will correctly find the largest number that can be formed with the given list of digits."""


def test_lines_and_code_blocks_are_kept():
    """Mutant: the lines joined into one (the old rule) -- a '#' comment then swallows the code after it."""
    kept = clean_reflection(MBPP_57)
    assert kept == MBPP_57
    assert "    return int(max_num)\n```" in kept


def test_the_model_s_own_reflection_is_kept_over_a_copied_example():
    """Mutant: copies not recognised -- the example's reflection, the first after a label, is kept."""
    example = "I assumed the values were distinct, so a repeated maximum came back as the second largest"
    reply = (f"Failed attempt:\nImplementation: ...\n\nReflection: {example}; I also sorted the list in place.\n\n"
             "Reflection: My loop stopped one element early, so the last group was never counted.")
    assert example in REFLECTION_EXAMPLES
    assert clean_reflection(reply, examples=REFLECTION_EXAMPLES) == (
        "My loop stopped one element early, so the last group was never counted.")
    # without the examples to compare with, the first labelled text is the model's
    assert clean_reflection(reply).startswith(example)


def test_a_reply_that_is_only_a_copied_example_keeps_nothing():
    """Bad input: no reflection of the model's own -- recorded as empty, never the copied example."""
    reply = "Reflection: My code never ran because the for statement on line 4 lacks its colon. The logic itself was fine."
    assert clean_reflection(reply, examples=REFLECTION_EXAMPLES) == ""
    assert clean_reflection("", examples=REFLECTION_EXAMPLES) == ""
    assert clean_reflection("   \n  ") == ""


def test_labels_are_matched_as_words():
    """Mutant: no word boundary before the label -- 'self-reflection:' cuts the text."""
    reply = "Reflection: My self-reflection: the loop bound was off by one. Next time I will use range(n + 1)."
    assert clean_reflection(reply) == "My self-reflection: the loop bound was off by one. Next time I will use range(n + 1)."


@pytest.mark.parametrize("reply", ["**Reflection:** I answered early.", "**Reflection**: I answered early.",
                                   "### Reflection:\nI answered early.", "[Reflection]: I answered early.",
                                   "Reflection: **I answered early.**"])
def test_markdown_around_a_label_is_removed(reply):
    """Mutant: decoration kept -- '**' stays in front of the text."""
    assert clean_reflection(reply) == "I answered early."


def test_an_echoed_example_after_the_model_s_text_is_cut():
    """Mutant: no cut at the examples' separator -- the invented next example stays in memory."""
    reply = ("I returned the integer part instead of the decimal part.\n\n---\n\nTask:\nWrite a function "
             "`is_palindrome(text)` ...\n\nReflection: I compared the raw string.")
    assert clean_reflection(reply) == "I returned the integer part instead of the decimal part."


def test_the_plan_style_keeps_what_follows_its_own_label():
    reply = "Failed attempt: I went to the wrong shelf.\nNew plan: go to shelf 2, take the mug, put it in the sink."
    assert clean_reflection(reply, PLAN_PREFIX) == "go to shelf 2, take the mug, put it in the sink."
    # a lesson's label is not the plan's: the echo is all there is before it
    assert clean_reflection("Failed attempt: wrong shelf. Reflection: a lesson", PLAN_PREFIX) == "wrong shelf. Reflection: a lesson"


class _Model:
    name = "scripted"

    def __init__(self, text: str):
        self.text = text

    async def generate(self, messages, params, *, rollout_id=None):
        from reinagent.llm.base import Completion

        self.prompt = messages
        return Completion(text=self.text, prompt_tokens=1, completion_tokens=1, latency_s=0.0, model="scripted")


def test_the_raw_reply_is_returned_beside_the_cleaned_one_and_the_prompt_ends_on_its_instruction():
    import asyncio

    raw = "Failed attempt: x\n\n**Reflection:** I forgot the empty list.\nNext time I will check it first."
    model = _Model(raw)
    reflector = Reflector(model, REFLECTION_EXAMPLES)
    reflected = asyncio.run(reflector.reflect("the attempt", rollout_id="t/trial1/reflect"))
    assert reflected.raw == raw
    assert reflected.text == "I forgot the empty list.\nNext time I will check it first."
    assert model.prompt[-1].content.endswith("with what you will do differently next time.")


def test_the_committed_mbpp_reflections_lose_no_line_now():
    """Over the committed run's reflections (joined before this rule), cleaning changes no text
    that has no label or header: the rule only removes, never re-joins."""
    path = ROOT / "programming_runs" / "qwen2.5-coder-1.5b" / "mbpp_reflexion" / "records.jsonl"
    if not path.exists():
        pytest.skip("the committed MBPP run is not in this checkout")
    replies = [r for r in (json.loads(line).get("reflection") for line in path.open(encoding="utf-8")) if r]
    plain = [r for r in replies if "reflection:" not in r.lower() and not r.lower().startswith(("failed attempt", "task:"))]
    assert len(plain) >= 50
    assert all(clean_reflection(r) == r.strip() for r in plain)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pad", [" ", "*", "* "])
def test_a_huge_reply_is_cleaned_in_one_pass(pad):
    """Mutant: a label that may start anywhere inside a run of decoration -- a million-character run
    is then scanned once per character (hours), and this test's timeout ends it."""
    reply = "Failed attempt: x " + pad * 1_000_000 + "y\nReflection: my own words"  # the run ends on no label
    assert clean_reflection(reply) == "my own words"
