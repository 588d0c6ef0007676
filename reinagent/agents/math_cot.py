"""Chain-of-thought agent for math word problems (GSM8K): reason, then Finish[<number>].

It is the HotpotQA CoT agent with math prompts (one Thought/Action step against the single-step
math environment), and a subclass of it on purpose: everything that drives a CoT agent step by
step (the search rollouts' stepper, the multi-turn rollout's `continue_episode`) drives it too.
"""

from __future__ import annotations

from typing import ClassVar

from reinagent.agents.cot import CotAgent
from reinagent.agents.loop import STOP
from reinagent.benchmarks import gsm8k_prompts as prompts
from reinagent.llm.base import GenerationParams
from reinagent.memory import MemoryView
from reinagent.records import Message


class MathCotAgent(CotAgent):
    name: ClassVar[str] = "cot"

    def __init__(self, config):
        self.with_context = False
        self.name = "cot"
        self.params = GenerationParams(
            max_tokens=config.max_tokens, temperature=config.temperature, stop=STOP, seed=config.seed
        )

    def task_text(self, task) -> str:
        return f"Question: {task.question}"

    def prompt(self, task, memory: MemoryView, *, few_shot: bool = True) -> list[Message]:
        parts = [f"Here are some examples:\n\n{prompts.COT_EXAMPLES}\n\n(END OF EXAMPLES)"] if few_shot else []
        block = memory.block()
        if block:
            parts.append(block)
        parts.append(self.task_text(task))
        return [Message(role="system", content=prompts.COT_SYSTEM), Message(role="user", content="\n\n".join(parts))]
