"""GSM8K (Cobbe et al., 2021): grade-school math word problems, judged on the final answer.

The environment is single-step: the agent's reply is its answer, judged against the number after
`#### ` in the dataset's solution by HuggingFace's math-verify (reinagent/benchmarks/math_judge.py):
the text inside the last `Finish[...]` when the reply has one (ours: math-verify does not know it),
otherwise the whole reply, where math-verify picks the answer (`\\boxed{}`, "the answer is", the
last expression) and compares values ("18", "$18.00", "1,234" vs "1234", "\\frac{36}{2}"). The judge
knows the question: restating it is never an answer.

A reply with no answer gets an "Invalid answer" observation (the step budget then ends the
episode unanswered, which is wrong); nothing a model writes raises.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any, ClassVar

from reinagent.agents.prompts import gsm8k as prompts
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.benchmarks.math_judge import judge, read_answer
from reinagent.env import Env, StepResult
from reinagent.errors import ConfigError, choices
from reinagent.paths import DATA_DIR
from reinagent.records import Evaluation, Trajectory

SPLITS = {"test": "test.jsonl", "train": "train.jsonl"}
NO_NUMBER = "Invalid answer: no number found. Reply with Finish[<number>]."

# the gold answer as the dataset writes it: "18", "-5", "70,000", "$1,234.50", "3/4"
_NUMBER = re.compile(r"([-−])?\$?(\d+(?:\.\d+)?)(?:/(\d+))?")
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

def parse_number(text: str | None) -> Fraction | None:
    """The value of the last number in `text` ("$1,234.50" -> 2469/2), or None: the dataset's gold."""
    found = _NUMBER.findall((text or "").replace(",", ""))
    if not found:
        return None
    sign, whole, den = found[-1]
    value = Fraction(whole) / (int(den) if den and int(den) else 1)
    return -value if sign else value


def extract_answer(reply: str | None, question: str | None = None) -> str | None:
    """The answer a reply gives, as written (Finish's text, else math-verify's pick), or None."""
    return read_answer(reply, question)[0]


def answers_match(prediction: str | None, gold: str, question: str | None = None) -> bool:
    """Whether a reply (or a recorded answer) answers `gold`, by math-verify; no answer never does,
    nor a restatement of `question`."""
    return judge(prediction, gold, question).success


# --- the environment -----------------------------------------------------------------------------

class MathEnv(Env):
    """One answer per episode: any reply with a number ends it; one without is an observation."""

    def __init__(self, task: MathTask, max_steps: int):
        self.task, self.max_steps = task, max_steps
        self.reset()

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.steps, self.answer, self.ended = 0, None, None
        return f"Question: {self.task.question}", {}

    def step(self, action: str) -> StepResult:
        self.refuse_if_ended()  # one answer per episode, also after the budget ran out
        self.steps += 1
        verdict = judge(action, self.task.answer, self.task.question)
        if verdict.answer is None:
            return self.ending((NO_NUMBER, 0.0, False, self.steps >= self.max_steps, {"answer": None}))
        self.answer = verdict.answer
        return self.ending((f"Answer submitted: {verdict.answer}", float(verdict.success), True, False,
                            {"answer": verdict.answer}))


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
    description: ClassVar[str] = "GSM8K grade-school math, final answer judged by math-verify"
    agents: ClassVar[tuple[str, ...]] = ("cot",)
    default_agent: ClassVar[str] = "cot"
    splits: ClassVar[tuple[str, ...]] = tuple(SPLITS)
    default_split: ClassVar[str] = "test"
    reflection_examples: ClassVar[str] = prompts.REFLECTION_EXAMPLES

    def load_tasks(self, split: str) -> list[MathTask]:
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r} for gsm8k; valid: {choices(SPLITS)}")
        return list(_load_split(split))

    def make_env(self, task: MathTask, settings) -> Env:
        return MathEnv(task, settings.max_steps or 1)

    def make_agent(self, name: str, settings):
        if name != "cot":
            raise ConfigError(f"unknown agent {name!r} for gsm8k; valid: {choices(self.agents)}")
        from reinagent.agents.math_cot import MathCotAgent

        return MathCotAgent(settings)

    async def evaluate(self, task: MathTask, trajectory: Trajectory, settings) -> Evaluation:
        verdict = judge(trajectory.answer, task.answer, task.question)
        return Evaluation(success=verdict.success, reward=float(verdict.success),
                          detail={"gold": task.answer, "predicted": verdict.value})

    def settings(self) -> dict[str, Any]:
        return {"answer_rule": "Finish[...] text, else the reply; judged by math-verify"}
