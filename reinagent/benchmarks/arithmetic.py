"""`arithmetic`: one-digit sums and differences, a synthetic benchmark where reward is learnable in
minutes on a laptop CPU (issue 18's proof that RL training works end to end).

Every problem `a + b` and `a - b` with a, b in 0..9 (200 in all) is generated here, shuffled with a
fixed seed and cut into `test` (the first 60) and `train` (the other 140): the splits are disjoint
and the same on every machine, with no data file. The environment is GSM8K's single-step math
environment (reinagent/benchmarks/gsm8k.py): the reply's number (Finish[...] first) is compared
with the answer; reward 1 or 0. It is multi-turn capable: the agent can continue the conversation
after the multi-turn rollout's "your answer is wrong" feedback (`--rollout multi-turn`), and
reinagent.rl's token rollouts give the same feedback while training.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any, ClassVar

from reinagent.agents.math_cot import MathCotAgent
from reinagent.benchmarks.base import Benchmark
from reinagent.benchmarks.gsm8k import MathEnv, MathTask, answers_match, parse_number
from reinagent.env import Env
from reinagent.errors import ConfigError, choices
from reinagent.records import Evaluation, Trajectory

SEED = 18  # fixes the shuffle, hence the splits; changing it changes the benchmark (bump version)
TEST_SIZE = 60
SPLITS = ("test", "train")

SYSTEM = (
    "You add and subtract one-digit numbers. Reply with exactly two lines:\n"
    "Thought: <the calculation>\n"
    "Action: Finish[<number>]"
)
EXAMPLES = """\
Question: What is 2 + 5?
Thought: 2 + 5 = 7.
Action: Finish[7]

Question: What is 3 - 8?
Thought: 3 - 8 = -5.
Action: Finish[-5]"""

REFLECTION_EXAMPLES = """\
Failed attempt:
Question: What is 4 - 9?
Thought: 9 - 4 = 5.
Action: Finish[5]
Observation: Answer submitted: 5
Reflection: I subtracted in the wrong order. Next time I will take the second number away from the first, so 4 - 9 = -5."""


class ArithmeticTask(MathTask):
    a: int
    op: str  # "+" or "-"
    b: int


def make_task(a: int, op: str, b: int, task_id: str | None = None) -> ArithmeticTask:
    if op not in "+-" or len(op) != 1:
        raise ConfigError(f"unknown operator {op!r}; valid: +, -")
    value = a + b if op == "+" else a - b
    return ArithmeticTask(task_id=task_id or f"{a}{op}{b}", question=f"What is {a} {op} {b}?",
                          answer=str(value), solution=f"{a} {op} {b} = {value}", a=a, op=op, b=b)


@lru_cache(maxsize=None)
def all_tasks() -> dict[str, tuple[ArithmeticTask, ...]]:
    """Both splits, generated: every (a, op, b), shuffled by SEED, the first TEST_SIZE are `test`."""
    items = [(a, op, b) for op in "+-" for a in range(10) for b in range(10)]
    random.Random(SEED).shuffle(items)
    cut = {"test": items[:TEST_SIZE], "train": items[TEST_SIZE:]}
    return {split: tuple(make_task(a, op, b, f"{split}/{a}{op}{b}") for a, op, b in rows)
            for split, rows in cut.items()}


class ArithmeticAgent(MathCotAgent):
    """The GSM8K chain-of-thought agent with arithmetic's prompt (short: small models fit it)."""

    name: ClassVar[str] = "cot"

    def examples(self) -> str:
        return EXAMPLES

    def system(self) -> str:
        return SYSTEM


class Arithmetic(Benchmark):
    name: ClassVar[str] = "arithmetic"
    description: ClassVar[str] = "one-digit sums and differences (generated), reward 1/0"
    agents: ClassVar[tuple[str, ...]] = ("cot",)
    default_agent: ClassVar[str] = "cot"
    splits: ClassVar[tuple[str, ...]] = SPLITS
    default_split: ClassVar[str] = "test"
    reflection_examples: ClassVar[str] = REFLECTION_EXAMPLES

    def load_tasks(self, split: str) -> list[ArithmeticTask]:
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r} for arithmetic; valid: {choices(SPLITS)}")
        return list(all_tasks()[split])

    def make_env(self, task: MathTask, config) -> Env:
        return MathEnv(task, getattr(config, "max_steps", None) or 1)

    def make_agent(self, name: str, config) -> ArithmeticAgent:
        if name != "cot":
            raise ConfigError(f"unknown agent {name!r} for arithmetic; valid: {choices(self.agents)}")
        return ArithmeticAgent(config)

    async def evaluate(self, task: MathTask, trajectory: Trajectory, config) -> Evaluation:
        success = answers_match(trajectory.answer, task.answer)
        predicted = parse_number(trajectory.answer)
        return Evaluation(success=success, reward=float(success),
                          detail={"gold": task.answer, "predicted": None if predicted is None else str(predicted)})

    def settings(self) -> dict[str, Any]:
        return {"seed": SEED, "test_size": TEST_SIZE, "answer_rule": "as gsm8k: Finish[...] first; compared as numbers"}
