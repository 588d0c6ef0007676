"""ALFWorld: household tasks as text games (Shridhar et al., 2021); success is `info["won"]`.

The paper's decision-making benchmark is the 134 games of valid_unseen. Each episode plays one
game in a worker process (see alfworld_env); the game files ship with the package and are
unpacked on first use (see alfworld_data).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from reinagent.agents.prompts.alfworld import PLAN_EXAMPLES, REFLECTION_EXAMPLES
from reinagent.benchmarks import alfworld_data as data
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.env import Env
from reinagent.errors import ConfigError, choices
from reinagent.records import Evaluation, Trajectory

DEFAULT_MAX_STEPS = 50  # the Reflexion paper's budget per trial
EXPERT_MAX_STEPS = 200  # the handcoded expert searches receptacles one by one: give it room
EXPERTS = ("planner", "handcoded")


def expert_kind() -> str:
    """Which engine expert `--agent alfworld-expert` follows: REINAGENT_ALFWORLD_EXPERT, default
    the PDDL planner (optimal plans; ALFWorld's handcoded expert is slower and wanders)."""
    kind = os.environ.get("REINAGENT_ALFWORLD_EXPERT", "planner").strip().lower()
    if kind not in EXPERTS:
        raise ConfigError(f"unknown REINAGENT_ALFWORLD_EXPERT {kind!r}; valid: {choices(EXPERTS)}")
    return kind


class ALFWorldTask(Task):
    """One game. `task_id` is `<task folder>/<trial folder>`, stable across machines."""

    split: str
    game: str  # path of game.tw-pddl relative to the data folder
    task_type: str  # one of alfworld_data.TASK_TYPES, e.g. pick_clean_then_place_in_recep

    @property
    def kind(self) -> str:
        """The short task-type name the demonstrations use: put, clean, heat, cool, examine, puttwo."""
        return data.TASK_TYPES[self.task_type]


class ALFWorld(Benchmark):
    name: ClassVar[str] = "alfworld"
    description: ClassVar[str] = "134 unseen household text games, success = info['won']"
    agents: ClassVar[tuple[str, ...]] = ("react", "alfworld-expert")
    default_agent: ClassVar[str] = "react"
    splits: ClassVar[tuple[str, ...]] = tuple(data.SPLITS)
    default_split: ClassVar[str] = "valid_unseen"
    reflection_examples: ClassVar[str] = REFLECTION_EXAMPLES
    plan_examples: ClassVar[str] = PLAN_EXAMPLES

    def __init__(self) -> None:
        self._data_override: str | None = None
        self._root: Path | None = None
        self._pool = None  # WorkerPool, made by the first episode

    # --- data --------------------------------------------------------------------------------

    def check_config(self, settings) -> None:
        # load_tasks() gets no settings, so the data folder the run chose is kept here.
        self._data_override = settings.alfworld_data
        self._root = None
        self.root  # fail now (bad folder, missing archive), before a run directory exists
        if settings.agent == "alfworld-expert":
            expert_kind()

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = data.data_dir(self._data_override)
        return self._root

    def load_tasks(self, split: str) -> list[Task]:
        return [ALFWorldTask(task_id=game.game_id, split=split, game=str(game.path.relative_to(self.root)),
                             task_type=game.task_type) for game in data.list_games(self.root, split)]

    # --- episodes ----------------------------------------------------------------------------

    def make_env(self, task: Task, settings) -> Env:
        from reinagent.benchmarks.alfworld_env import ALFWorldEnv, WorkerPool, default_workers

        assert isinstance(task, ALFWorldTask)
        if self._pool is None:
            # One worker per concurrent episode, as many as the runner lets run at once.
            self._pool = WorkerPool(settings.max_concurrency or default_workers())
        expert = expert_kind() if settings.agent == "alfworld-expert" else None
        default = EXPERT_MAX_STEPS if expert else DEFAULT_MAX_STEPS
        return ALFWorldEnv(self._pool, self.root / task.game, game_id=task.task_id, task_type=task.task_type,
                           max_steps=settings.max_steps or default, expert=expert)

    def make_agent(self, name: str, settings) -> Any:
        if name == "react":
            from reinagent.agents.alfworld_react import ALFWorldReactAgent

            return ALFWorldReactAgent(settings)
        if name == "alfworld-expert":
            from reinagent.agents.alfworld_expert import ALFWorldExpertAgent

            return ALFWorldExpertAgent(settings)
        raise ConfigError(f"unknown agent {name!r} for alfworld; valid: react or alfworld-expert")

    async def evaluate(self, task: Task, trajectory: Trajectory, settings) -> Evaluation:
        # The agent copies the engine's info["won"] into the trajectory; `done` alone is not success.
        won = bool(trajectory.extra.get("won", False))
        return Evaluation(success=won, reward=1.0 if won else 0.0, detail={
            "won": won, "env_steps": trajectory.extra.get("env_steps", 0), "end_reason": trajectory.end_reason,
            "task_type": getattr(task, "task_type", "")})

    def settings(self) -> dict[str, Any]:
        from reinagent.benchmarks.alfworld_env import default_games_per_worker

        return {
            "data": "ALFWorld json_2.1.1 (valid_unseen 134, valid_seen 140, valid_train 200)",
            "data_dir": str(self.root),
            "engine": "textworld PDDL via alfworld 0.4.2, one game per worker process",
            "observation": "welcome banner and 'You arrive at loc N.' prefix removed (as in ReAct)",
            "success": "info['won']",
            "default_max_steps": DEFAULT_MAX_STEPS,
            # read here, before any episode, so that a bad REINAGENT_ALFWORLD_GAMES_PER_WORKER is one line
            "games_per_worker": default_games_per_worker(),
        }

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
