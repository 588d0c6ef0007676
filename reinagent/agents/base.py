"""What every agent implements, and the helper through which agents call their model."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from reinagent.llm.base import LLM, Completion, GenerationParams
from reinagent.records import Message, ModelCall, Role, Trajectory

if TYPE_CHECKING:
    from reinagent.task import Task
    from reinagent.env import Env
    from reinagent.memory import MemoryView


class BudgetExhausted(Exception):
    """A call was refused because it could exceed the episode's budget; `reason` becomes the
    trajectory's end_reason ("call_budget" or "token_budget")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def estimate_prompt_tokens(messages: Sequence[Message]) -> int:
    """A prompt's tokens when no tokenizer can count them: never fewer than a byte-level BPE
    makes (at most one token per UTF-8 byte), plus a chat template's markers per message. Far
    above the usual count (English averages 4 characters a token), so a budget never passes."""
    return sum(len(m.content.encode("utf-8")) for m in messages) + TEMPLATE_TOKENS * (len(messages) + 1)


TEMPLATE_TOKENS = 8  # a chat template's tokens around one message (role markers, separators)


def text_tokens(llm: LLM | None) -> Callable[[str], int]:
    """A counter of a text's tokens: the model's own tokenizer where its backend has one (a
    one-message prompt less an empty one's template), else about 4 characters a token (an
    estimate, for cutting text to a length, not for a budget that must never pass)."""

    def count(text: str) -> int:
        counted = llm.count_prompt_tokens([Message(role="user", content=text)]) if llm is not None else None
        if counted is None:
            return (len(text) + 3) // 4
        empty = llm.count_prompt_tokens([Message(role="user", content="")]) or 0
        return max(counted - empty, 0)

    return count


def prompt_tokens(llm: LLM | None, messages: Sequence[Message]) -> int:
    """The tokens a call's prompt will cost: counted with the model's own tokenizer where its
    backend has one (local, hf, tiktoken for OpenAI models), else the conservative estimate."""
    counted = llm.count_prompt_tokens(messages) if llm is not None else None
    return counted if counted is not None else estimate_prompt_tokens(messages)


@dataclass
class Budget:
    """Model calls and tokens one episode may spend, across actor and value calls. A call is
    admitted (its tokens reserved) before it is made, synchronously, so children requested
    concurrently cannot overrun it together; its reported usage then replaces the reservation.
    Cache hits count like fresh calls: a replayed episode must make the same choices."""

    max_calls: int | None = None
    max_tokens: int | None = None
    calls: int = 0
    tokens: int = 0
    exhausted: str | None = None  # why a call was last refused

    @classmethod
    def of(cls, config) -> Budget:
        return cls(getattr(config, "max_calls_per_episode", None), getattr(config, "max_tokens_per_episode", None))

    def reserve(self, messages: Sequence[Message], params: GenerationParams,
                llm: LLM | None = None) -> tuple[GenerationParams, int]:
        """Admit one call (raises BudgetExhausted); returns its params (max_tokens cut to what is
        left) and the tokens reserved. `llm` counts the prompt (see `prompt_tokens`)."""
        if self.max_calls is not None and self.calls + 1 > self.max_calls:
            self.exhausted = "call_budget"
            raise BudgetExhausted("call_budget")
        reserved = 0
        if self.max_tokens is not None:
            prompt = prompt_tokens(llm, messages)
            left = self.max_tokens - self.tokens - prompt
            if left < 1:
                self.exhausted = "token_budget"
                raise BudgetExhausted("token_budget")
            params = replace(params, max_tokens=min(params.max_tokens, left))
            reserved = prompt + params.max_tokens
        self.calls += 1
        self.tokens += reserved
        return params, reserved

    def charge(self, reserved: int, completion: Completion | None) -> None:
        used = completion.prompt_tokens + completion.completion_tokens if completion else 0
        if completion is not None and used == 0 and self.max_tokens is not None:
            used = reserved  # a server that reports no usage: keep what was reserved
        self.tokens += used - reserved
        if completion is None:
            self.calls -= 1  # the call failed: it spent nothing


@dataclass
class Activity:
    """What the episodes in flight have done so far, for the progress bar: a search episode
    can run minutes before it finishes, and a bar that only counts finished episodes stands still."""

    calls: int = 0  # model calls of actors and searches (value, in-search reflections), finished or not
    nodes: int = 0  # search-tree nodes expanded (ToT, MCTS)

    def note(self) -> str:
        nodes = f", {self.nodes} nodes expanded" if self.nodes else ""
        return f"{self.calls} model calls{nodes}"


class Actor:
    """The actor model as one episode sees it: every call is recorded in the trajectory and
    admitted by the episode's budget. A call with an explicit `rollout_id` (a search rollout's
    tree position) is keyed by it, so a replay samples the same answers whatever the order in
    which concurrent calls were scheduled; otherwise by a per-episode counter (sequential agents)."""

    def __init__(self, llm: LLM, trajectory: Trajectory, rollout_id: str, budget: Budget | None = None,
                 activity: Activity | None = None, temperature: float | None = None):
        self.llm = llm
        self.temperature = temperature  # set: every call of this episode samples at it (a trial's own)
        self.trajectory = trajectory
        self.rollout_id = rollout_id
        self.budget = budget or Budget()
        self.activity = activity or Activity()  # the run's, shared by its episodes (else this one's)
        self._n = 0

    async def complete(
        self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None,
        calls: list[ModelCall] | None = None,
    ) -> Completion:
        """`calls`: where the call's usage is recorded (default: this actor's trajectory)."""
        params, reserved = self.budget.reserve(messages, self.own(params), self.llm)
        if rollout_id is None:
            self._n += 1
            rollout_id = str(self._n)
        completion = None
        place = f"{self.rollout_id}/{rollout_id}"
        try:
            completion = await self.llm.generate(messages, params, rollout_id=place)
        finally:
            self.budget.charge(reserved, completion)
        (self.trajectory.calls if calls is None else calls).append(completion.to_call("actor", params, place))
        self.activity.calls += 1
        return completion

    def own(self, params: GenerationParams) -> GenerationParams:
        return params if self.temperature is None else replace(params, temperature=self.temperature)

    async def complete_many(self, requests: Sequence[Request]) -> list[Completion | None]:
        """Several calls at once (a node's children, a level's value samples). Every request is
        admitted first, in order, before any is made, so the budget decides the same way whatever
        order the answers come back in; the admitted ones then run concurrently (a local engine
        batches them). None where the budget refused; `budget.exhausted` says why."""
        tickets: list[tuple[GenerationParams, int] | None] = []
        for req in requests:
            try:
                params = req.params if req.llm is not None else self.own(req.params)  # the reflector's stay
                tickets.append(self.budget.reserve(req.messages, params, req.llm or self.llm))
            except BudgetExhausted:
                tickets.append(None)

        async def one(req: Request, ticket: tuple[GenerationParams, int] | None) -> Completion | None:
            if ticket is None:
                return None
            params, reserved = ticket
            completion = None
            try:
                completion = await (req.llm or self.llm).generate(
                    req.messages, params, rollout_id=f"{self.rollout_id}/{req.rollout_id}"
                )
            finally:
                self.budget.charge(reserved, completion)
            return completion

        results = await asyncio.gather(*(one(r, t) for r, t in zip(requests, tickets)), return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                raise res
        for req, res, ticket in zip(requests, results, tickets):  # in request order, not finish order
            if res is not None:
                self.trajectory.calls.append(res.to_call(req.role, ticket[0], f"{self.rollout_id}/{req.rollout_id}"))
                self.activity.calls += 1
        return list(results)


@dataclass(frozen=True)
class Request:
    """One call of a batch: `rollout_id` is its place in the episode (e.g. "mcts/it3/n7/c2"),
    `llm` another model than the actor's (the reflector's), `role` how its usage is recorded."""

    messages: Sequence[Message]
    params: GenerationParams
    rollout_id: str
    llm: LLM | None = None
    role: Role = "actor"


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

    def render_last_attempt(self, task: Task, trajectory: Trajectory) -> str:
        """The attempt as LAST_ATTEMPT shows it to the actor, whose prompt holds the task already
        (cot-context leaves its context out here: the prompt has it once)."""
        return self.render_attempt(task, trajectory)

    def shorten_attempt(self, text: str, max_tokens: int, count: Callable[[str], int]) -> str:
        """A rendered attempt cut to `max_tokens` as `count` counts them (--truncate-attempts);
        unchanged by agents whose attempts have nothing to cut (the HotpotQA agents cut)."""
        return text

    def prompt(self, task: Task, memory: MemoryView, *, few_shot: bool = True) -> list[Message]:
        """The messages an episode starts from. Distillation re-renders it (with an empty memory
        or without the few-shot examples); an agent that cannot raises NotImplementedError."""
        raise NotImplementedError(f"agent {self.name!r} cannot re-render its prompt")
