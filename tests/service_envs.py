"""A tiny benchmark for the env-service tests, served as `--benchmark tests.service_envs:GuessBench`.

The secret of task `tN` is `wordN`. Two actions exist to test faults: `crash` raises inside the
environment (the server must answer 500 and close that session), and `wait` blocks the step until
the file named by $GUESS_GATE exists (so a test can kill the server while a step is in flight).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, ClassVar

from reinagent.benchmarks.base import Benchmark, Task
from reinagent.env import Env, StepResult
from reinagent.records import Evaluation, Trajectory

GATE_ENV = "GUESS_GATE"


class GuessEnv(Env):
    blocking = True  # `wait` blocks: the server steps it in a thread

    def __init__(self, task: Task, max_steps: int):
        self.task, self.max_steps = task, max_steps
        self.steps = 0
        # GUESS_NONBLOCKING=1: the env says it never blocks (as HotpotQA's docstore does), so a
        # server that trusted the flag would run its `wait` step on the event loop
        self.blocking = os.environ.get("GUESS_NONBLOCKING") != "1"

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.steps = 0
        return f"Guess the secret word of {self.task.task_id}.", {"seed": seed}

    def step(self, action: str) -> StepResult:
        self.steps += 1
        if action == "crash":
            raise RuntimeError("the guessing engine broke")
        if action == "wait":
            gate = Path(os.environ[GATE_ENV])
            Path(str(gate) + ".waiting").touch()  # tells the test that this step is in flight
            deadline = time.monotonic() + 300
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            return "The gate opened.", 0.0, False, self.steps >= self.max_steps, {}
        secret = "word" + self.task.task_id[1:]
        won = action.strip() == secret
        obs = "Correct!" if won else f"No, {action!r} is not the word."
        return obs, float(won), won, not won and self.steps >= self.max_steps, {"success": won}


class GuessBench(Benchmark):
    name: ClassVar[str] = "guess"
    agents: ClassVar[tuple[str, ...]] = ("react",)
    default_agent: ClassVar[str] = "react"
    splits: ClassVar[tuple[str, ...]] = ("all",)
    default_split: ClassVar[str] = "all"

    def load_tasks(self, split: str) -> list[Task]:
        return [Task(task_id=f"t{i}") for i in range(int(os.environ.get("GUESS_TASKS", "4")))]

    def make_env(self, task: Task, config) -> Env:
        return GuessEnv(task, config.max_steps or 5)

    def make_agent(self, name: str, config):
        raise NotImplementedError("served only")

    async def evaluate(self, task: Task, trajectory: Trajectory, config) -> Evaluation:
        raise NotImplementedError("served only")
