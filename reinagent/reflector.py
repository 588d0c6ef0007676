"""The Reflector: after a failed trial, a model writes a short self-reflection for the next one."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import NamedTuple

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


class Reflected(NamedTuple):
    """One reflection: the text memory keeps (`clean_reflection` of the reply), the reply as the
    model wrote it (recorded beside it, so the cleaning can be audited), and the call's usage."""

    text: str
    call: ModelCall
    raw: str


class Reflector:
    """Turns a failed attempt (rendered as text by its agent) into a reflection.

    style "lesson": a paragraph on what went wrong and what to do next (its label "Reflection:");
    "plan": a new plan, the prompt ending with "New plan:". `past` reflections of
    the same task (--reflector-memory) are listed after the attempt, oldest first, as the
    reference's "Plans from past attempts"."""

    def __init__(self, llm: LLM, examples: str = "", *, max_tokens: int = 200, temperature: float = 0.0,
                 style: str = "lesson"):
        self.llm = llm
        self.examples = examples.strip()
        self.style = style
        self.params = GenerationParams(max_tokens=max_tokens, temperature=temperature, stop=("\n\n\n",))

    @property
    def label(self) -> str:
        """The prompt's closing label: the model's own text is what follows it."""
        return PLAN_PREFIX if self.style == "plan" else PREFIX

    def prompt(self, attempt: str, past: Sequence[str] = ()) -> list[Message]:
        plan = self.style == "plan"
        parts = []
        if self.examples:
            parts.append(f"Here are examples of failed attempts and good reflections:\n\n{self.examples}\n\n(END OF EXAMPLES)")
        parts.append(f"Your failed attempt:\n{attempt.strip()}")
        if past:
            header = PAST_PLANS_HEADER if plan else PAST_REFLECTIONS_HEADER
            parts.append(header + "".join(f"\nTrial #{i}: {p.strip()}" for i, p in enumerate(past)))
        # The lesson prompt ends on its instruction, not on the reference's bare "Reflection:": the
        # embedded 135M model answered a prompt ending on the label with nothing but the label,
        # repeated (5 of 5 demo reflections empty); the 1.5B HumanEval runs were made with it.
        parts.append(PLAN_PREFIX if plan else INSTRUCTION)
        return [Message(role="system", content=PLAN_SYSTEM if plan else SYSTEM),
                Message(role="user", content="\n\n".join(parts))]

    def clean(self, text: str) -> str:
        return clean_reflection(text, self.label, self.examples)

    async def reflect(self, attempt: str, *, rollout_id: str, past: Sequence[str] = ()) -> Reflected:
        completion = await self.llm.generate(self.prompt(attempt, past), self.params, rollout_id=rollout_id)
        return Reflected(self.clean(completion.text), completion.to_call("reflector", self.params, rollout_id),
                         completion.text)


# What a chat model echoes of the prompt before its own words: the examples' and the prompt's
# headers (the 1.5B opened every HotpotQA reflection with "Failed attempt:", then restated the
# attempt or copied an example's reflection before writing its own after the label).
_ECHO = r"(?:your\s+)?failed\s+attempt|task|implementation"
_DECOR = r"[ \t*_#>\[\]]*"  # markdown around a label: **Reflection:**, ### Reflection:, [Reflection]:
# Where an echoed example starts again after the model's own text: a rule, a header, the end mark.
_SEPARATOR = re.compile(rf"^{_DECOR}(?:-{{3,}}|(?:{_ECHO}){_DECOR}:|example\s*\d*\s*:|\(?end\s+of\s+examples\)?)",
                        re.I | re.M)
_COPY_WORDS = 12  # a candidate whose first words stand in the examples is a copy of one


@functools.lru_cache(maxsize=8)
def _label(label: str) -> re.Pattern[str]:
    """The label as a word of its own ("self-reflection:" is not "reflection:"), decorated or not.
    A match starts only where a run of decoration starts (the first lookbehind), so a reply of a million spaces or stars is scanned once, not once per character of the run."""
    words = r"\s+".join(re.escape(w) for w in label.rstrip(":").split())
    return re.compile(rf"(?<![*_#>\[\] \t]){_DECOR}(?<![\w-]){words}{_DECOR}:[*_]*", re.I)


def clean_reflection(text: str, label: str = PREFIX, examples: str = "") -> str:
    """The model's own reflection in a reply, lines and code blocks kept.

    A reply that opens with an echoed header ("Failed attempt:") or with the prompt's closing
    `label` holds its own text after that label, as the reference keeps what the model writes
    after its prompt's closing label: the first text after a label that is not a copy of one of
    the `examples`, up to where an echoed example starts again. Any other reply is the model's
    text from its start to such a point. '' when nothing of the model's own is left (a reply cut
    right after a label, or only copies): memory then gains nothing, as the reference's empty
    reflection adds nothing."""
    text = text.replace("\r\n", "\n").strip()
    pattern = _label(label)
    echo = re.match(rf"{_DECOR}(?:{_ECHO}){_DECOR}:[*_]*", text, re.I)
    starts = [m for m in pattern.finditer(text)]
    if echo or pattern.match(text):
        ends = [m.start() for m in starts[1:]] + [len(text)]
        candidates = [text[m.end():end] for m, end in zip(starts, ends)]
        if not starts:
            candidates = [text[echo.end():]]
    else:
        candidates = [text]
    for candidate in candidates:
        kept = _tidy(_SEPARATOR.split(candidate, maxsplit=1)[0] if _SEPARATOR.search(candidate) else candidate)
        if kept and not _copied(kept, examples):
            return kept
    return ""


def _tidy(text: str) -> str:
    """Markdown decoration around the text removed, trailing spaces and runs of blank lines
    dropped; every line and code block kept as written."""
    lines = [line.rstrip() for line in text.strip().strip("*_").strip().splitlines()]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _copied(text: str, examples: str) -> bool:
    words = re.findall(r"\w+", text.lower())
    if not examples or len(words) < 5:
        return False
    return " ".join(words[:_COPY_WORDS]) in " ".join(re.findall(r"\w+", examples.lower()))
