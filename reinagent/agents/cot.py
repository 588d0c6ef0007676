"""Chain-of-thought agent for HotpotQA, with the gold paragraphs (cot-context) or without."""

from __future__ import annotations

from typing import ClassVar

from reinagent.agents.base import Actor, Agent
from reinagent.agents.loop import STOP, render_steps, shorten_observations, step_loop, with_feedback
from reinagent.agents.prompts import hotpotqa as prompts
from reinagent.llm.base import GenerationParams
from reinagent.memory import MemoryView
from reinagent.records import Message, Trajectory


class CotAgent(Agent):
    name: ClassVar[str] = "cot"
    # HotpotQA's reference asks for `Action {n}:` after a thought; a math reply without an action
    # is read for its number instead (gsm8k.py), so the math agents do not ask again
    asks_for_action: ClassVar[bool] = True
    #: the agent's name without and with the context (the math agents are "cot" either way)
    names: ClassVar[tuple[str, str]] = ("cot-no-context", "cot-context")

    def __init__(self, settings, *, with_context: bool = False):
        self.with_context = with_context
        self.name = self.names[with_context]
        self.params = GenerationParams(
            max_tokens=settings.max_tokens, temperature=settings.temperature, stop=STOP, seed=settings.seed
        )

    def task_text(self, task) -> str:
        if self.with_context:
            return f"Context:\n{task.gold_context()}\n{self.question_text(task)}"
        return self.question_text(task)

    def question_text(self, task) -> str:
        """The task without its context (what the last attempt repeats of it)."""
        return f"Question: {task.question}"

    def examples(self) -> str:
        """The few-shot examples (the math agents' subclasses give their own, and `system`)."""
        return prompts.COT_CONTEXT_EXAMPLES if self.with_context else prompts.COT_NO_CONTEXT_EXAMPLES

    def system(self) -> str:
        return prompts.COT_SYSTEM

    def prompt(self, task, memory: MemoryView, *, few_shot: bool = True) -> list[Message]:
        parts = [f"Here are some examples:\n\n{self.examples()}\n\n(END OF EXAMPLES)"] if few_shot else []
        block = memory.block()
        if block:
            parts.append(block)
        parts.append(self.task_text(task))
        return [Message(role="system", content=self.system()), Message(role="user", content="\n\n".join(parts))]

    async def run(self, task, env, memory: MemoryView, actor: Actor) -> Trajectory:
        return await step_loop(actor, env, self.prompt(task, memory), ("finish",), self.params,
                               ask_action=self.asks_for_action)

    async def continue_episode(self, task, env, actor: Actor, feedback: str) -> Trajectory:
        """Another turn after feedback (the multi-turn rollout): the earlier attempt stays in the prompt."""
        return await step_loop(actor, env, with_feedback(actor.trajectory.messages, feedback), ("finish",), self.params,
                               ask_action=self.asks_for_action)

    def render_attempt(self, task, trajectory: Trajectory) -> str:
        """With the context (the Reflector's input: its only copy of it)."""
        return f"{self.task_text(task)}\n{render_steps(trajectory)}"

    def render_last_attempt(self, task, trajectory: Trajectory) -> str:
        """Without the context: the actor's prompt shows it once, above (as the reference does)."""
        return f"{self.question_text(task)}\n{render_steps(trajectory)}"

    def shorten_attempt(self, text: str, max_tokens: int, count) -> str:
        return shorten_observations(text, max_tokens, count)
