"""The Reflector: after a failed trial, a model writes a short self-reflection for the next one."""

from __future__ import annotations

import re
from collections.abc import Sequence

from reinagent.llm.base import LLM, GenerationParams
from reinagent.records import Message, ModelCall

SYSTEM = (
    "You are an agent that learns from its own mistakes. You will be shown one of your earlier "
    "attempts at a task, which failed. Diagnose in a few sentences why it failed, then write a "
    "concrete plan for the next attempt. Do not repeat the whole attempt; be short and specific."
)

INSTRUCTION = (
    "Write your reflection now: one short paragraph, starting with what went wrong and ending "
    "with what you will do differently next time."
)

PREFIX = "Reflection:"

# --reflection-prompt plan: ALFWorld's reference (generate_reflections.py) asks for a new plan, shows
# the plans of past attempts, and ends its prompt with "New plan:". The wording is our own.
PLAN_SYSTEM = (
    "You are an agent that learns from its own mistakes. You will be shown one of your earlier "
    "attempts at a task, which failed. Do not describe the environment; think about the strategy "
    "and the path you took. Write a short new plan that accounts for your mistake and names the "
    "specific actions you should have taken. You will need it when you try the same task again."
)
PLAN_PREFIX = "New plan:"
PAST_PLANS_HEADER = "Plans from past attempts:"
PAST_REFLECTIONS_HEADER = "Reflections from past attempts:"


class Reflector:
    """Turns a failed attempt (rendered as text by its agent) into a reflection.

    style "lesson": a paragraph on what went wrong and what to do next; "plan": a new plan, the
    prompt ending with "New plan:". `past` reflections of the same task (--reflector-memory) are
    listed after the attempt, oldest first, as the reference's "Plans from past attempts"."""

    def __init__(self, llm: LLM, examples: str = "", *, max_tokens: int = 200, temperature: float = 0.0,
                 style: str = "lesson"):
        self.llm = llm
        self.examples = examples.strip()
        self.style = style
        self.params = GenerationParams(max_tokens=max_tokens, temperature=temperature, stop=("\n\n\n",))

    def prompt(self, attempt: str, past: Sequence[str] = ()) -> list[Message]:
        plan = self.style == "plan"
        parts = []
        if self.examples:
            parts.append(f"Here are examples of failed attempts and good reflections:\n\n{self.examples}\n\n(END OF EXAMPLES)")
        parts.append(f"Your failed attempt:\n{attempt.strip()}")
        if past:
            header = PAST_PLANS_HEADER if plan else PAST_REFLECTIONS_HEADER
            parts.append(header + "".join(f"\nTrial #{i}: {p.strip()}" for i, p in enumerate(past)))
        parts.append(PLAN_PREFIX if plan else INSTRUCTION)
        return [Message(role="system", content=PLAN_SYSTEM if plan else SYSTEM),
                Message(role="user", content="\n\n".join(parts))]

    async def reflect(self, attempt: str, *, rollout_id: str, past: Sequence[str] = ()) -> tuple[str, ModelCall]:
        completion = await self.llm.generate(self.prompt(attempt, past), self.params, rollout_id=rollout_id)
        return clean_reflection(completion.text), completion.to_call("reflector", self.params, rollout_id)


# The examples' header (and the prompt's "Your failed attempt:"), which a chat model may echo: the
# 1.5B opened every HotpotQA reflection with it, then restated the attempt or copied an example's
# reflection before writing its own after a "Reflection:" label.
_ECHOED_HEADER = re.compile(r"(?:your\s+)?failed\s+attempt\s*:", re.I)
_INNER_LABEL = re.compile(r"(?:reflection|new\s+plan)\s*:", re.I)


def clean_reflection(text: str) -> str:
    """Strip chat habits (a 'Reflection:' label, markdown emphasis) and keep the paragraph. A reply
    that opens with the examples' "Failed attempt:" header keeps what follows its last
    "Reflection:" (or "New plan:") label, as the reference's prompt, which ends with that label,
    keeps what the model writes after it."""
    text = _bare(text)
    header = _ECHOED_HEADER.match(text)
    if header:  # the last label with words after it (a reply cut at its token limit may end on one)
        starts = [header.end()] + [m.end() for m in _INNER_LABEL.finditer(text, header.end())]
        text = next((t for t in (_bare(text[i:]) for i in reversed(starts)) if t), "")
    for label in (PREFIX, PLAN_PREFIX, "Plan:"):
        if text.lower().startswith(label.lower()):
            text = text[len(label) :].strip()
    return " ".join(text.split())


def _bare(text: str) -> str:
    return text.strip().strip("*").strip()
