"""ReAct agent for HotpotQA: Thought / Action / Observation with Search, Lookup and Finish."""

from __future__ import annotations

from typing import ClassVar

from reinagent.agents.base import Actor, Agent
from reinagent.agents.loop import STOP, render_steps, shorten_observations, step_loop
from reinagent.agents.prompts import hotpotqa as prompts
from reinagent.llm.base import GenerationParams
from reinagent.memory import MemoryView
from reinagent.records import Message, Trajectory

ACTIONS = ("search", "lookup", "finish")
DEFAULT_PROMPT_TOKENS = 3896  # the paper's budget for the whole ReAct prompt


class ReactAgent(Agent):
    name: ClassVar[str] = "react"

    def __init__(self, settings):
        self.max_prompt_tokens = settings.max_prompt_tokens or DEFAULT_PROMPT_TOKENS
        self.params = GenerationParams(
            max_tokens=min(settings.max_tokens, 160), temperature=settings.temperature, stop=STOP, seed=settings.seed
        )

    def prompt(self, task, memory: MemoryView, *, few_shot: bool = True) -> list[Message]:
        parts = [f"Here are some examples:\n\n{prompts.REACT_EXAMPLES}\n\n(END OF EXAMPLES)"] if few_shot else []
        block = memory.block()
        if block:
            parts.append(block)
        parts.append(f"Question: {task.question}")
        return [Message(role="system", content=prompts.REACT_SYSTEM), Message(role="user", content="\n\n".join(parts))]

    async def run(self, task, env, memory: MemoryView, actor: Actor) -> Trajectory:
        return await step_loop(
            actor, env, self.prompt(task, memory), ACTIONS, self.params,
            max_prompt_tokens=self.max_prompt_tokens,
        )

    def render_attempt(self, task, trajectory: Trajectory) -> str:
        return f"Question: {task.question}\n{render_steps(trajectory)}"

    def shorten_attempt(self, text: str, max_tokens: int, count) -> str:
        return shorten_observations(text, max_tokens, count)
