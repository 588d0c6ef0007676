"""The Reflector: after a failed trial, a model writes a short self-reflection for the next one."""

from __future__ import annotations

from reinagent.llm.base import LLM, GenerationParams
from reinagent.records import Message, ModelCall

SYSTEM = (
    "You are an agent that learns from its own mistakes. You will be shown one of your earlier "
    "attempts at a task, which failed. Diagnose in a few sentences why it failed, then write a "
    "concrete plan for the next attempt. Do not repeat the whole attempt; be short and specific."
)

INSTRUCTION = (
    "Write your reflection now: one short paragraph, starting with what went wrong and ending "
    "with what you will do differently next time."
)

PREFIX = "Reflection:"


class Reflector:
    """Turns a failed attempt (rendered as text by its agent) into a reflection."""

    def __init__(self, llm: LLM, examples: str = "", *, max_tokens: int = 200, temperature: float = 0.0):
        self.llm = llm
        self.examples = examples.strip()
        self.params = GenerationParams(max_tokens=max_tokens, temperature=temperature, stop=("\n\n\n",))

    def prompt(self, attempt: str) -> list[Message]:
        parts = []
        if self.examples:
            parts.append(f"Here are examples of failed attempts and good reflections:\n\n{self.examples}\n\n(END OF EXAMPLES)")
        parts.append(f"Your failed attempt:\n{attempt.strip()}")
        parts.append(INSTRUCTION)
        return [Message(role="system", content=SYSTEM), Message(role="user", content="\n\n".join(parts))]

    async def reflect(self, attempt: str, *, rollout_id: str) -> tuple[str, ModelCall]:
        completion = await self.llm.generate(self.prompt(attempt), self.params, rollout_id=rollout_id)
        return clean_reflection(completion.text), completion.to_call("reflector", self.params, rollout_id)


def clean_reflection(text: str) -> str:
    """Strip chat habits (a 'Reflection:' label, markdown emphasis) and keep the paragraph."""
    text = text.strip().strip("*").strip()
    if text.lower().startswith(PREFIX.lower()):
        text = text[len(PREFIX) :].strip()
    return " ".join(text.split())
