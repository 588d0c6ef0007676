"""The LLM value function of the search rollouts: a prompt, its parsing, and n samples averaged.

Two scales, as in the papers: Tree of Thoughts asks for one word (sure / likely / impossible),
LATS for a 1-10 score. Both map onto [0, 1]; the parser accepts either, whatever was asked, since
a small model does not always answer in the form it was asked for. Lessons from failed branches
(LATS's reflections) go into the prompt, so the value learns what the search has learnt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from reinagent.agents.base import Request
from reinagent.llm.base import GenerationParams
from reinagent.records import Message

Scale = Literal["words", "score"]

SYSTEM = (
    "You judge an agent's attempt at a task; the attempt may be unfinished. Decide how likely it "
    "is to end in a correct answer: check each step against the task and the observations."
)
INSTRUCTIONS = {
    "words": "Answer with a short justification, then a last line with one word: sure, likely or impossible.",
    "score": "Answer with a short justification, then a last line 'Score: N' where N is 1 (surely wrong) to 10 (surely right).",
}
WORDS = {"sure": 1.0, "likely": 0.5, "impossible": 0.0}
VALUE_MAX_TOKENS = 128
NEUTRAL = 0.5  # a value no sample could be parsed from: neither promising nor hopeless

_SCORE = re.compile(r"(?:score|rating|value|correctness)[^0-9\n]{0,30}?(\d+(?:\.\d+)?)(?:\s*/\s*10)?", re.I)
_WORD = re.compile(r"\b(sure|likely|impossible)\b", re.I)
# a line that is only a score ("7", "7/10", "7."); matched line by line, each line stripped: one
# multi-line pattern (`^\s*...\s*$`, re.M) retried every split of a long run of blank lines (issue 45)
_BARE = re.compile(r"(\d++(?:\.\d++)?+)\s*+(?:/\s*+10)?+\s*+\.?+")


def value_prompt(attempt: str, reflections: Sequence[str], scale: Scale) -> list[Message]:
    parts = []
    if reflections:
        lessons = "\n".join(f"- {r.strip()}" for r in reflections)
        parts.append(f"Lessons from earlier failed attempts at this task:\n{lessons}")
    parts.append(f"The attempt:\n{attempt.strip()}")
    parts.append(INSTRUCTIONS[scale])
    return [Message(role="system", content=SYSTEM), Message(role="user", content="\n\n".join(parts))]


def parse_value(text: str) -> float | None:
    """A judgement as a number in [0, 1]; None when the text holds none. The last one given
    counts (a justification may quote other numbers or words first)."""
    scores = _SCORE.findall(text) or [m.group(1) for line in text.splitlines() if (m := _BARE.fullmatch(line.strip()))]
    if scores:
        return min(max(float(scores[-1]), 1.0), 10.0) / 10.0
    words = _WORD.findall(text)
    if words:
        return WORDS[words[-1].lower()]
    return None


def value_params(samples: int, temperature: float, seed: int | None) -> GenerationParams:
    # n greedy samples would be n copies of one answer: sample only when there are several.
    return GenerationParams(max_tokens=VALUE_MAX_TOKENS, temperature=temperature if samples > 1 else 0.0, seed=seed)


def value_requests(attempt: str, reflections: Sequence[str], scale: Scale, samples: int,
                   params: GenerationParams, rollout_id: str) -> list[Request]:
    """The n value calls of one node; sample j is keyed `{rollout_id}/v{j}`."""
    messages = value_prompt(attempt, reflections, scale)
    return [Request(messages, replace(params), f"{rollout_id}/v{j}", role="value") for j in range(samples)]


def mean_value(texts: Sequence[str | None]) -> float | None:
    """The mean of the parseable samples; NEUTRAL when none parsed; None when no sample was made
    (the budget refused them all)."""
    made = [t for t in texts if t is not None]
    if not made:
        return None
    values = [v for v in (parse_value(t) for t in made) if v is not None]
    return sum(values) / len(values) if values else NEUTRAL
