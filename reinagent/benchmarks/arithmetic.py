"""`arithmetic`: one-digit sums and differences, a synthetic benchmark where reward is learnable in
minutes on a laptop CPU (issue 18's proof that RL training works end to end).

Every problem `a + b` and `a - b` with a, b in 0..9 (200 in all) is generated here, shuffled with a
fixed seed and cut into `test` (the first 60) and `train` (the other 140): the splits are disjoint
and the same on every machine, with no data file. The environment is GSM8K's single-step math
environment (reinagent/benchmarks/gsm8k.py): the reply (Finish[...] first) is judged by math-verify
against the answer; reward 1 or 0. It is multi-turn capable: the agent can continue the conversation
after the multi-turn rollout's "your answer is wrong" feedback (`--rollout multi-turn`), and
reinagent.rl's token rollouts give the same feedback while training.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any, ClassVar

from reinagent.agents.math_cot import MathCotAgent
from reinagent.benchmarks.base import Benchmark
from reinagent.benchmarks.gsm8k import GSM8K, MathEnv, MathTask
from reinagent.env import Env
from reinagent.errors import ConfigError, choices

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
def all_tasks(top: int = 9, test_size: int = TEST_SIZE) -> dict[str, tuple[ArithmeticTask, ...]]:
    """Both splits, generated: every (a, op, b) with a, b in 0..top, shuffled by SEED, the first
    `test_size` are `test` (so no problem is in both)."""
    items = [(a, op, b) for op in "+-" for a in range(top + 1) for b in range(top + 1)]
    random.Random(SEED).shuffle(items)
    cut = {"test": items[:test_size], "train": items[test_size:]}
    return {split: tuple(make_task(a, op, b, f"{split}/{a}{op}{b}") for a, op, b in rows)
            for split, rows in cut.items()}


class ArithmeticAgent(MathCotAgent):
    """The GSM8K chain-of-thought agent with arithmetic's prompt (short: small models fit it)."""

    name: ClassVar[str] = "cot"
    system_text: str = SYSTEM  # arithmetic20 says 0..19

    def examples(self) -> str:
        return EXAMPLES

    def system(self) -> str:
        return self.system_text


class Arithmetic(Benchmark):
    name: ClassVar[str] = "arithmetic"
    description: ClassVar[str] = "one-digit sums and differences (generated), reward 1/0"
    agents: ClassVar[tuple[str, ...]] = ("cot",)
    default_agent: ClassVar[str] = "cot"
    splits: ClassVar[tuple[str, ...]] = SPLITS
    default_split: ClassVar[str] = "test"
    reflection_examples: ClassVar[str] = REFLECTION_EXAMPLES

    top: ClassVar[int] = 9  # operands 0..top
    test_size: ClassVar[int] = TEST_SIZE

    def load_tasks(self, split: str) -> list[ArithmeticTask]:
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r} for {self.name}; valid: {choices(SPLITS)}")
        return list(all_tasks(self.top, self.test_size)[split])

    def make_env(self, task: MathTask, settings) -> Env:
        return MathEnv(task, getattr(settings, "max_steps", None) or 1)

    def make_agent(self, name: str, settings) -> ArithmeticAgent:
        if name != "cot":
            raise ConfigError(f"unknown agent {name!r} for arithmetic; valid: {choices(self.agents)}")
        return ArithmeticAgent(settings)

    evaluate = GSM8K.evaluate  # the same judge (math-verify), the same detail

    def settings(self) -> dict[str, Any]:
        return {"seed": SEED, "test_size": self.test_size, "max_operand": self.top,
                "answer_rule": "as gsm8k: Finish[...] text, else the reply; judged by math-verify"}


# `heldout` of arithmetic20: the test split and the train split past its first TRAIN_HEAD tasks, for
# a comparison that needs more held-out failures than `test` gives (issue 37). It holds out only what
# a training run did not see: train with num_tasks <= TRAIN_HEAD (scripts/reflect_demo.sh does).
TRAIN_HEAD = 200


class Arithmetic20(Arithmetic):
    """`arithmetic20`: the same problems with operands 0..19 (800 in all): 300 held out for `test`,
    500 to train on, so a before/after comparison has the tasks a paired test needs (issue 29).
    `heldout` (600): `test` then `train` past its first 200 tasks, with their own task ids."""

    name: ClassVar[str] = "arithmetic20"
    description: ClassVar[str] = ("sums and differences of 0..19 (generated, 300 test / 500 train; heldout: "
                                  "test + train[200:], 600), reward 1/0")
    splits: ClassVar[tuple[str, ...]] = (*SPLITS, "heldout")
    top: ClassVar[int] = 19
    test_size: ClassVar[int] = 300

    def load_tasks(self, split: str) -> list[ArithmeticTask]:
        if split == "heldout":
            tasks = all_tasks(self.top, self.test_size)
            return [*tasks["test"], *tasks["train"][TRAIN_HEAD:]]
        if split not in self.splits:
            raise ConfigError(f"unknown split {split!r} for {self.name}; valid: {choices(self.splits)}")
        return super().load_tasks(split)

    def make_agent(self, name: str, settings) -> ArithmeticAgent:
        agent = super().make_agent(name, settings)
        agent.system_text = SYSTEM.replace("one-digit numbers", "numbers from 0 to 19")
        return agent
