"""GSM8K (Cobbe et al., 2021): grade-school math word problems, judged on the final number.

The environment is single-step: the agent's reply is its answer, and the number read from it is
compared with the number after `#### ` in the dataset's solution, as numbers ("18", "18.0",
"$18", "18.00" and "1,234" vs "1234" all match). Which number a reply gives is decided by one rule,
in this order (`extract_answer`):

1. `Finish[...]`: the last number inside the brackets (`Finish[$1,234]` -> 1234);
2. otherwise the number right after the last "#### " or "answer is"/"answer:" ("The answer is 18");
3. otherwise the last number anywhere in the reply (the common "last number" rule).

A reply with no number gets an "Invalid answer" observation (the step budget then ends the
episode unanswered, which is wrong); nothing a model writes raises.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any, ClassVar

from reinagent.benchmarks import gsm8k_prompts as prompts
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.env import Env, StepResult
from reinagent.errors import ConfigError, choices
from reinagent.paths import DATA_DIR
from reinagent.records import Evaluation, Trajectory

SPLITS = {"test": "test.jsonl", "train": "train.jsonl"}
NO_NUMBER = "Invalid answer: no number found. Reply with Finish[<number>]."

# A number as people write it: an optional sign and dollar sign, thousands separators only in
# groups of three ("1,234" but not the list "3,4"), a decimal part, a fraction written tight ("3/4";
# "52 / 4 =" is a division, cut off, and holds 52 and 4). Never the middle of
# a word or a decimal ("v2", the "5" of "3.5"); after a digit or ")" a dash is subtraction
# ("16-3-4" holds 16, 3 and 4), since the match cannot start there.
_NUMBER = re.compile(
    r"(?<![\w.)])(?P<sign>[-−])?(?:\$\s?(?P<sign2>[-−])?)?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<dec>\.\d+)?(?:/(?P<den>\d+)(?!\d|\.\d))?"
)
_FINISH = re.compile(r"finish\s*\[(?P<arg>[^\]]*)\]", re.I)
_CUE = re.compile(r"(?:####|answer\s+is|answer\s*:)", re.I)
_ANNOTATION = re.compile(r"<<[^>]*>>")


class MathTask(Task):
    question: str
    answer: str  # the gold number as the dataset writes it (the text after "#### ")
    solution: str = ""  # the worked solution, calculator annotations removed

    @property
    def gold(self) -> Fraction:
        value = parse_number(self.answer)
        if value is None:  # never for the shipped data (tests/test_gsm8k.py reads every answer)
            raise ValueError(f"{self.task_id}: gold answer {self.answer!r} is not a number")
        return value


# --- reading numbers -----------------------------------------------------------------------------

def _numbers(text: str) -> list[tuple[str, Fraction]]:
    """Every number in `text`, in order, as (text as written, value)."""
    found = []
    for m in _NUMBER.finditer(text):
        negative = bool(m.group("sign") or m.group("sign2"))
        whole = m.group("int").replace(",", "") + (m.group("dec") or "")
        value = Fraction(whole)
        if m.group("den"):
            if int(m.group("den")) == 0:
                continue
            value /= int(m.group("den"))
        found.append((m.group(0).strip(), -value if negative else value))
    return found


def parse_number(text: str | None) -> Fraction | None:
    """The value of the last number in `text` ("$1,234.50" -> 2469/2), or None."""
    numbers = _numbers(text or "")
    return numbers[-1][1] if numbers else None


def extract_answer(reply: str | None) -> str | None:
    """The number a reply gives as its final answer, as written (see the module docstring)."""
    if not reply:
        return None
    finishes = list(_FINISH.finditer(reply))
    if finishes:
        numbers = _numbers(finishes[-1].group("arg"))
        return numbers[-1][0] if numbers else None
    cues = list(_CUE.finditer(reply))
    if cues:
        numbers = _numbers(reply[cues[-1].end():])
        if numbers:
            return numbers[0][0]
    numbers = _numbers(reply)
    return numbers[-1][0] if numbers else None


def answers_match(prediction: str | None, gold: str) -> bool:
    """Numeric equality of a predicted answer and the gold one; no number is never a match."""
    value, want = parse_number(prediction), parse_number(gold)
    return value is not None and want is not None and value == want


# --- the environment -----------------------------------------------------------------------------

class MathEnv(Env):
    """One answer per episode: any reply with a number ends it; one without is an observation."""

    def __init__(self, task: MathTask, max_steps: int):
        self.task, self.max_steps = task, max_steps
        self.reset()

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.steps, self.answer = 0, None
        return f"Question: {self.task.question}", {}

    def step(self, action: str) -> StepResult:
        self.steps += 1
        answer = extract_answer(action)
        if answer is None:
            return NO_NUMBER, 0.0, False, self.steps >= self.max_steps, {"answer": None}
        self.answer = answer
        reward = float(answers_match(answer, self.task.answer))
        return f"Answer submitted: {answer}", reward, True, False, {"answer": answer}


# --- the benchmark -------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _load_split(split: str) -> tuple[MathTask, ...]:
    path = DATA_DIR / "gsm8k" / SPLITS[split]
    tasks = []
    for index, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        worked, _, final = row["answer"].rpartition("#### ")
        tasks.append(MathTask(
            task_id=f"{split}/{index}", question=row["question"], answer=final.strip(),
            solution=_ANNOTATION.sub("", worked).strip(),
        ))
    return tuple(tasks)


class GSM8K(Benchmark):
    name: ClassVar[str] = "gsm8k"
    description: ClassVar[str] = "GSM8K grade-school math, final number compared numerically"
    agents: ClassVar[tuple[str, ...]] = ("cot",)
    default_agent: ClassVar[str] = "cot"
    splits: ClassVar[tuple[str, ...]] = tuple(SPLITS)
    default_split: ClassVar[str] = "test"
    reflection_examples: ClassVar[str] = prompts.REFLECTION_EXAMPLES

    def load_tasks(self, split: str) -> list[MathTask]:
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r} for gsm8k; valid: {choices(SPLITS)}")
        return list(_load_split(split))

    def make_env(self, task: MathTask, config) -> Env:
        return MathEnv(task, config.max_steps or 1)

    def make_agent(self, name: str, config):
        if name != "cot":
            raise ConfigError(f"unknown agent {name!r} for gsm8k; valid: {choices(self.agents)}")
        from reinagent.agents.math_cot import MathCotAgent

        return MathCotAgent(config)

    async def evaluate(self, task: MathTask, trajectory: Trajectory, config) -> Evaluation:
        success = answers_match(trajectory.answer, task.answer)
        predicted = parse_number(trajectory.answer)
        return Evaluation(
            success=success, reward=float(success),
            detail={"gold": task.answer, "predicted": None if predicted is None else str(predicted)},
        )

    def settings(self) -> dict[str, Any]:
        return {"answer_rule": "Finish[...] > '####'/'answer is' > last number; compared as numbers"}
