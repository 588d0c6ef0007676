"""Chain-of-thought agent for math word problems (GSM8K): reason, then Finish[<number>].

It is the HotpotQA CoT agent with math prompts (one Thought/Action step against the single-step
math environment), and a subclass of it on purpose: everything that drives a CoT agent step by
step (the search rollouts' stepper, the multi-turn rollout's `continue_episode`) drives it too.
"""

from __future__ import annotations

from typing import ClassVar

from reinagent.agents.cot import CotAgent
from reinagent.agents.prompts import gsm8k as prompts


class MathCotAgent(CotAgent):
    name: ClassVar[str] = "cot"
    asks_for_action: ClassVar[bool] = False  # a reply's number is its answer (gsm8k.py)
    names: ClassVar[tuple[str, str]] = ("cot", "cot")  # never given a context

    def examples(self) -> str:
        return prompts.COT_EXAMPLES

    def system(self) -> str:
        return prompts.COT_SYSTEM
