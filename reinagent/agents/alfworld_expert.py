"""`--agent alfworld-expert`: play each game by the engine's own expert plan, with no model calls.

A check of the wrapper rather than a baseline: if the engine's plan, sent through our worker
process and our observation clean-up, does not win nearly every game, no other ALFWorld number
can be trusted. The plan comes from textworld's PDDL planner by default (REINAGENT_ALFWORLD_EXPERT
=handcoded selects ALFWorld's handcoded DAgger expert instead); it is recomputed after every step.
"""

from __future__ import annotations

from typing import Any, ClassVar

from reinagent.agents.alfworld_react import play_game, render_trace
from reinagent.agents.base import Actor, Agent
from reinagent.env import astep
from reinagent.memory import MemoryView
from reinagent.records import Message, Step, Trajectory


class ALFWorldExpertAgent(Agent):
    name: ClassVar[str] = "alfworld-expert"

    def __init__(self, settings: Any):
        self.settings = settings  # unused: the expert follows the game's plan

    async def run(self, task: Any, env: Any, memory: MemoryView, actor: Actor) -> Trajectory:
        return await play_game(task, env, actor, lambda observation: [Message(role="user", content=observation)],
                               lambda traj, info: self._follow(traj, env, info))

    async def _follow(self, traj: Trajectory, env: Any, info: dict[str, Any]) -> str:
        while True:
            plan = info.get("expert_plan") or []
            if not plan:
                traj.extra["note"] = "the expert had no plan from this state"
                return "no_plan"
            action = plan[0]
            step = Step(prompt_len=len(traj.messages), output=action, action=action,
                        valid_action=action in info.get("admissible_commands", []))
            step.observation, _, terminated, truncated, info = await astep(env, action)
            traj.steps.append(step)
            traj.messages += [Message(role="assistant", content=action),
                              Message(role="user", content=step.observation)]
            traj.extra["env_steps"] += 1
            traj.extra["won"] = bool(info.get("won"))
            if traj.extra["won"]:
                return "won"
            if terminated:
                return "finished"
            if truncated:
                return "step_budget"

    def render_attempt(self, task: Any, trajectory: Trajectory) -> str:
        return render_trace(trajectory)
