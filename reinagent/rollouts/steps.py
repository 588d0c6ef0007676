"""One step at a time: how a search rollout drives each kind of agent.

An agent's own `run` plays a whole episode; a search needs the pieces (the prompt at a node, the
step an output makes, whether the node is terminal). A Stepper holds those pieces for one agent
kind, reusing the agent's prompts, parsers and parameters, so a searched step is the same step
the agent would take. A node's state is a PathState; its env is reopened from `env` (see
branching.py) for every step taken from it.
"""

from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from reinagent.agents.base import Agent, BudgetExhausted, Request
from reinagent.agents.loop import approx_tokens
from reinagent.env import aclose, astep
from reinagent.errors import ConfigError, choices
from reinagent.llm.base import GenerationParams
from reinagent.memory import MemoryView
from reinagent.records import Message, Step, Trajectory
from reinagent.rollouts.base import Episode
from reinagent.rollouts.branching import Branching, EnvState
from reinagent.strategy import ReflexionStrategy

if TYPE_CHECKING:
    from reinagent.benchmarks.base import Benchmark
    from reinagent.settings import AgentSettings


@dataclass
class PathState:
    """A node of the search: the path from the root, as the agent's conversation and steps."""

    base: list[Message]  # the prompt the last step was sampled from (reflections change it)
    tail: list[Message] = field(default_factory=list)  # the conversation after the prompt
    steps: list[Step] = field(default_factory=list)
    env: EnvState = field(default_factory=EnvState)
    info: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None
    end_reason: str = "unfinished"
    terminal: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    score: float | None = None  # an agent's own value of the node (the coder's internal pass rate)


def with_reflections(view: MemoryView, reflections: list[str]) -> MemoryView:
    """The trial's memory plus the search's own reflections, shown whatever the trial strategy
    (under NONE the search's lessons are still part of the search)."""
    if not reflections:
        return view
    strategy = (ReflexionStrategy.LAST_ATTEMPT_AND_REFLEXION if view.last_attempt
                else ReflexionStrategy.REFLEXION)
    return MemoryView(view.trial, strategy, (*view.shown_reflections, *reflections), view.last_attempt,
                      view.internal_tests, view.previous)


class Stepper(abc.ABC):
    """The agent-specific half of a search: start, prompt, advance, trajectory."""

    value_from_agent = False  # True: node values are the agent's own score, not the LLM value
    first_observation: str | None = None  # what the env said on reset (the root node's observation)

    def __init__(self, episode: Episode, name: str):
        self.episode, self.name = episode, name
        self.agent, self.task = episode.agent, episode.task
        self.branching = Branching(episode.make_env, self.prepare_env)
        cfg = episode.settings
        self.params: GenerationParams = replace(self.agent_params(), temperature=cfg.search_temperature)
        self.max_depth = cfg.tot_depth or self.default_depth()

    def agent_params(self) -> GenerationParams:
        return self.agent.params

    def default_depth(self) -> int:
        return self.episode.settings.max_steps or 6

    async def prepare_env(self, env) -> None:  # noqa: B027 - after a reset, before a replay
        pass

    async def start(self) -> PathState:
        env, self.first_observation, info = await self.branching.start()
        try:
            return PathState(base=self.prompt_for([]), env=self.branching.save(env, ()), info=info)
        finally:
            await aclose(env)

    def prompt_for(self, reflections: list[str], state: PathState | None = None) -> list[Message]:
        return self.agent.prompt(self.task, with_reflections(self.episode.memory, reflections))

    def messages(self, state: PathState, reflections: list[str]) -> list[Message]:
        """The conversation a child of `state` is sampled from."""
        return [*self.prompt_for(reflections, state), *state.tail]

    async def advance(self, state: PathState, messages: list[Message], output: str) -> PathState:
        """The child of `state` that `output` (sampled from `messages`) makes."""
        env = await self.branching.open(state.env)
        try:
            child = await self.act(state, env, output)
            child.env = self.branching.save(env, child.env.actions)
        finally:
            await aclose(env)
        child.base = messages[: len(messages) - len(state.tail)]
        if not child.terminal and len(child.steps) >= self.max_depth:
            child.terminal, child.end_reason = True, "depth_limit"
        return child

    def output_key(self, state: PathState, output: str) -> tuple:
        """What makes a child of `state` sampled as `output` distinct from its siblings (LATS keys
        a child by its thought and action); here: the text, spacing aside."""
        return (" ".join(output.split()),)

    @abc.abstractmethod
    async def act(self, state: PathState, env, output: str) -> PathState:
        """Parse `output`, step `env` (already in `state`), return the new state (env.actions
        extended with what was sent)."""

    def trajectory(self, state: PathState) -> Trajectory:
        return Trajectory(
            messages=[*state.base, *state.tail], steps=list(state.steps), answer=state.answer,
            end_reason=state.end_reason, extra=dict(state.extra), rollout=self.name,
        )


class ThoughtActionStepper(Stepper):
    """HotpotQA's ReAct and CoT agents (the Thought/Action/Observation loop of agents/loop.py)."""

    def __init__(self, episode: Episode, name: str, actions: tuple[str, ...]):
        self.actions = actions
        super().__init__(episode, name)

    def output_key(self, state: PathState, output: str) -> tuple:
        from reinagent.agents.parsing import parse_output

        thought, action = parse_output(output, self.actions)
        if action is None:  # no valid action: the reply itself (LATS drops these; we keep them)
            return super().output_key(state, output)
        return (thought, str(action))

    async def act(self, state: PathState, env, output: str) -> PathState:
        from reinagent.agents.parsing import clean_step_text, parse_output

        thought, action = parse_output(output, self.actions)
        step = Step(prompt_len=len(state.base) + len(state.tail), output=output, thought=thought,
                    action=str(action) if action else None, valid_action=action is not None)
        sent = str(action) if action else (output.strip() or "(empty)")
        obs, _reward, terminated, truncated, info = await astep(env, sent)
        step.observation = obs
        child = PathState(base=state.base, tail=[*state.tail, Message(role="assistant", content=clean_step_text(
            thought, action, output))], steps=[*state.steps, step], env=EnvState((*state.env.actions, sent)), info=info)
        if terminated:
            child.terminal, child.end_reason, child.answer = True, "finished", info.get("answer")
            return child
        child.tail.append(Message(role="user", content=f"Observation: {obs}"))
        limit = getattr(self.agent, "max_prompt_tokens", None)
        if truncated:
            child.terminal, child.end_reason = True, "step_budget"
        elif limit and approx_tokens([*state.base, *child.tail]) > limit:
            child.terminal, child.end_reason = True, "prompt_budget"
        return child


class ALFWorldStepper(Stepper):
    """ALFWorld's ReAct agent: one command or `think:` per turn; an env that replays to branch."""

    def default_depth(self) -> int:
        return self.agent.max_steps

    async def start(self) -> PathState:
        env, obs, info = await self.branching.start()
        self.first_observation = obs
        try:
            state = PathState(base=[], env=self.branching.save(env, ()), info=info)
        finally:
            await aclose(env)
        state.extra.update(won=False, env_steps=0, task_type=getattr(self.task, "task_type", ""), task=obs, moves=[])
        state.base = self.prompt_for([], state)
        return state

    def output_key(self, state: PathState, output: str) -> tuple:
        from reinagent.agents.alfworld_react import parse_move

        move = parse_move(output, state.info.get("admissible_commands"))
        return (move.kind, move.text)

    def prompt_for(self, reflections: list[str], state: PathState | None = None) -> list[Message]:
        observation = state.extra["task"] if state is not None else ""
        return self.agent.prompt(self.task, observation, with_reflections(self.episode.memory, reflections))

    async def act(self, state: PathState, env, output: str) -> PathState:
        from reinagent.agents.alfworld_react import play_move

        move, step, terminated, _truncated, info = await play_move(
            env, output, state.info, len(state.base) + len(state.tail))
        extra = {**state.extra, "moves": [*state.extra["moves"], move.render()]}
        actions = state.env.actions
        if step.action is not None:
            actions = (*actions, move.text)
            extra["env_steps"] += 1
            extra["won"] = bool(info.get("won"))
        tail = [*state.tail, Message(role="assistant", content=move.render()),
                Message(role="user", content=step.observation)]
        child = PathState(base=state.base, tail=tail, steps=[*state.steps, step], env=EnvState(actions),
                          info=info, extra=extra)
        ending = "won" if extra["won"] else "finished" if terminated else "loop" if self.agent.looping(extra["moves"]) else None
        if ending:
            child.terminal, child.end_reason = True, ending
        return child

    def trajectory(self, state: PathState) -> Trajectory:
        traj = super().trajectory(state)
        traj.extra.pop("moves", None)
        return traj


class CoderStepper(Stepper):
    """The programming agent: a node is one implementation, judged by the agent's own tests;
    a child rewrites its parent's implementation with that feedback in its prompt (LATS)."""

    value_from_agent = True

    def agent_params(self) -> GenerationParams:
        return self.agent.impl_params

    def default_depth(self) -> int:
        return self.episode.settings.max_steps or 4

    async def prepare_env(self, env) -> None:
        env.set_internal_tests(self._tests)

    async def start(self) -> PathState:
        task, kept = self.task, self.episode.memory.internal_tests
        if kept is not None:  # written by the task's first trial: every later search runs them again
            tests, source, messages = list(kept), "an earlier trial", []
        else:
            (completion,) = await self.episode.actor.complete_many(
                [Request(self.agent.tests_prompt(task), self.agent.test_params, "tests")])
            if completion is None:
                raise BudgetExhausted(self.episode.actor.budget.exhausted or "call_budget")
            tests, source = self.agent.tests_from(task, completion.text)
            messages = [*self.agent.tests_prompt(task), Message(role="assistant", content=completion.text)]
        self._tests = tests
        # kept at once: a search that errors after this still hands its tests to the next trial
        self.episode.actor.trajectory.extra.update(internal_tests=tests, internal_tests_source=source)
        env, self.first_observation, info = await self.branching.start()
        try:
            await self.prepare_env(env)
            state = PathState(base=self.prompt_for([]), env=self.branching.save(env, ()), info=info)
        finally:
            await aclose(env)
        state.extra.update(internal_tests=tests, internal_tests_source=source,
                           test_generation=[m.model_dump() for m in messages])
        return state

    def prompt_for(self, reflections: list[str], state: PathState | None = None) -> list[Message]:
        view = with_reflections(self.episode.memory, reflections)
        if state is not None and state.steps:  # improve the parent's implementation, as LAST_ATTEMPT does
            last = self.agent.render_attempt(self.task, self.trajectory(state))
            strategy = (ReflexionStrategy.LAST_ATTEMPT_AND_REFLEXION if view.strategy.uses_reflections
                        else ReflexionStrategy.LAST_ATTEMPT)
            view = MemoryView(view.trial, strategy, view.reflections, last)
        return self.agent.prompt(self.task, view)

    def messages(self, state: PathState, reflections: list[str]) -> list[Message]:
        return self.prompt_for(reflections, state)  # one implementation per node: no tail

    def output_key(self, state: PathState, output: str) -> tuple:
        from reinagent.programming.extract import extract_code

        return (extract_code(output, self.task.entry_point),)  # the same program twice: one node

    async def act(self, state: PathState, env, output: str) -> PathState:
        from reinagent.programming.extract import extract_code

        code = extract_code(output, self.task.entry_point)
        feedback, reward, _, _, info = await astep(env, code)
        # a judged env (`serve-env`) rewards the hidden verdict: the node's score is its own tests'
        reward = info.get("internal_reward", reward)
        ok = info["syntax_error"] is None
        step = Step(prompt_len=0, output=output, action=code, observation=feedback, valid_action=ok)
        extra = {**state.extra, "implementation": code, "feedback": feedback, "internal_pass_rate": reward,
                 "internal_result": info["result"]}
        child = PathState(base=state.base, tail=[Message(role="assistant", content=output)],
                          steps=[*state.steps, step], env=EnvState(), info=info, answer=code,
                          end_reason="finished" if ok else "syntax_error", extra=extra, score=reward)
        child.terminal = reward >= 1.0  # every internal test passes: the benchmark judges it
        return child

    async def advance(self, state: PathState, messages: list[Message], output: str) -> PathState:
        child = await super().advance(state, messages, output)
        child.base = list(messages)
        child.steps[-1].prompt_len = len(messages)
        if child.end_reason == "depth_limit":
            child.end_reason = state_end(child)
        return child


def state_end(state: PathState) -> str:
    return "finished" if state.steps and state.steps[-1].valid_action else "syntax_error"


def _stepper_for(agent: Agent, name: str):
    """A function episode -> Stepper for the agent's kind, or None for an agent no search can step
    (e.g. the ALFWorld expert, which plays a fixed plan)."""
    from reinagent.agents.alfworld_react import ALFWorldReactAgent
    from reinagent.agents.coder import CoderAgent
    from reinagent.agents.cot import CotAgent
    from reinagent.agents.react import ACTIONS, ReactAgent

    if isinstance(agent, ReactAgent):
        return lambda episode: ThoughtActionStepper(episode, name, ACTIONS)
    if isinstance(agent, CotAgent):  # GSM8K's and arithmetic's CoT agents are CotAgents too
        return lambda episode: ThoughtActionStepper(episode, name, ("finish",))
    if isinstance(agent, ALFWorldReactAgent):
        return lambda episode: ALFWorldStepper(episode, name)
    if isinstance(agent, CoderAgent):
        return lambda episode: CoderStepper(episode, name)
    return None


def make_stepper(episode: Episode, name: str) -> Stepper:
    """The stepper for the episode's agent; a TypeError (the episode's recorded error) for an
    agent no search can step. `check_searchable` refuses such runs before any work starts."""
    factory = _stepper_for(episode.agent, name)
    if factory is None:
        raise TypeError(f"the {name} rollout cannot step agent {episode.agent.name!r}")
    return factory(episode)


def check_searchable(bench: Benchmark, agent: str, settings: AgentSettings, rollout: str) -> None:
    """A one-line ConfigError, before any work, when the search rollout cannot step `agent`."""
    if _stepper_for(bench.make_agent(agent, settings), rollout) is not None:
        return
    valid = [a for a in bench.agents if _stepper_for(bench.make_agent(a, settings), rollout) is not None]
    raise ConfigError(f"rollout {rollout} cannot step agent {agent!r} of {bench.name} (it plays a fixed "
                      f"plan or has no step format); valid agents there: {choices(valid) if valid else 'none'}")


async def gather_in_order(coros) -> list:
    """asyncio.gather that lets every coroutine finish before raising the first error."""
    results = await asyncio.gather(*coros, return_exceptions=True)
    for res in results:
        if isinstance(res, BaseException):
            raise res
    return results
