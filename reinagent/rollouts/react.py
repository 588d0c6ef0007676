"""`react`: one pass of the agent in one environment, then the benchmark's verdict. This is the
Reflexion paper's episode (the agent decides how it acts: ReAct, CoT or the coder)."""

from __future__ import annotations

from typing import ClassVar

from reinagent.agents.base import BudgetExhausted
from reinagent.env import aclose
from reinagent.records import Evaluation, Trajectory
from reinagent.rollouts.base import Episode, Rollout


class ReactRollout(Rollout):
    name: ClassVar[str] = "react"

    async def run(self, episode: Episode) -> tuple[Trajectory, Evaluation]:
        env = episode.make_env()
        try:
            trajectory = await episode.agent.run(episode.task, env, episode.memory, episode.actor)
        except BudgetExhausted as stop:  # the episode ends cleanly, judged on what it did so far
            trajectory = episode.actor.trajectory
            trajectory.end_reason = stop.reason
        finally:
            await aclose(env)
        trajectory.rollout = self.name
        return trajectory, await episode.evaluate(trajectory)
