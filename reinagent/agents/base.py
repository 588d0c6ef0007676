"""What every agent implements, and the helper through which agents call their model."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from reinagent.llm.base import LLM, Completion, GenerationParams
from reinagent.records import Message, Trajectory

if TYPE_CHECKING:
    from reinagent.benchmarks.base import Task
    from reinagent.env import Env
    from reinagent.memory import MemoryView


class Actor:
    """The actor model as one episode sees it: every call is recorded in the trajectory."""

    def __init__(self, llm: LLM, trajectory: Trajectory, rollout_id: str):
        self.llm = llm
        self.trajectory = trajectory
        self.rollout_id = rollout_id
        self._n = 0

    async def complete(self, messages: Sequence[Message], params: GenerationParams) -> Completion:
        self._n += 1
        completion = await self.llm.generate(
            messages, params, rollout_id=f"{self.rollout_id}/{self._n}"
        )
        self.trajectory.calls.append(completion.to_call("actor"))
        return completion


class Agent(abc.ABC):
    """An agent runs one episode of one task and returns its trajectory."""

    name: ClassVar[str]

    @abc.abstractmethod
    async def run(self, task: Task, env: Env, memory: MemoryView, actor: Actor) -> Trajectory:
        """Play one episode. Fills `actor.trajectory` and returns it.

        A malformed model output must become an observation, never an exception; exceptions
        are for failures of the model backend or the environment (recorded as errors).
        """

    @abc.abstractmethod
    def render_attempt(self, task: Task, trajectory: Trajectory) -> str:
        """The attempt as text: shown to the Reflector, and to the actor under LAST_ATTEMPT."""

    def prompt(self, task: Task, memory: MemoryView, *, few_shot: bool = True) -> list[Message]:
        """The messages an episode starts from. Distillation re-renders it (with an empty memory
        or without the few-shot examples); an agent that cannot raises NotImplementedError."""
        raise NotImplementedError(f"agent {self.name!r} cannot re-render its prompt")
