"""Multi-turn retry with feedback (the AReaL agent's loop): one episode, several answers.

The agent answers; the benchmark judges the answer; when it is wrong and turns are left, the
environment answers "Unfortunately your answer is wrong. Let's try again." and the agent tries
again *in the same conversation*, so its earlier attempts and the feedback are in its prompt. A
right answer on turn t earns `reward * turn_discount ** (t - 1)`: the Evaluation's `reward` is that
discounted value, `success` and `detail["raw_reward"]` are the benchmark's own verdict.

It needs an agent that can continue an episode (`continue_episode`): the chain-of-thought agents
(gsm8k `cot`, hotpotqa `cot-context` / `cot-no-context`), whose episode is one answer to a
question. Others cannot: a ReAct or ALFWorld episode ends in an environment state (a lost game
cannot be replayed from the message history), and the coder agent already iterates on its own
internal tests within the episode, where judging each try on the hidden tests would leak them.

Each turn runs against a fresh environment of the task (the previous one ended when it took the
answer). A turn that ends for a budget (calls, tokens, prompt length) ends the episode: only a
judged answer, or a reply the environment could not read, earns another try.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from reinagent.agents.base import BudgetExhausted
from reinagent.env import aclose
from reinagent.errors import ConfigError
from reinagent.records import Evaluation, Trajectory
from reinagent.rollouts.base import Episode, Rollout

if TYPE_CHECKING:
    from reinagent.rollouts.base import RolloutSettings

FEEDBACK = "Unfortunately your answer is wrong. Let's try again."
RETRY_AFTER = ("finished", "step_budget")  # how a turn may end and still be followed by another

# benchmark -> agents that can continue an episode; checked before a run starts
CONTINUABLE = {"gsm8k": ("cot",), "arithmetic": ("cot",), "arithmetic20": ("cot",), "hotpotqa": ("cot-context", "cot-no-context")}


class Turn(BaseModel):
    """One answer of a multi-turn episode, kept in `Trajectory.extra["turns"]`."""

    turn: int
    answer: str | None
    success: bool
    reward: float
    steps: int  # steps of the trajectory up to the end of this turn
    end_reason: str
    feedback: str | None = None  # what the environment said after it (None: the episode ended)


def check_settings(max_turns: int, turn_discount: float) -> None:
    """Bad settings are one-line errors (RunConfig validates them too; this guards direct use)."""
    if not isinstance(max_turns, int) or max_turns <= 0:
        raise ConfigError(f"--max-turns must be a positive whole number, got {max_turns}")
    if not 0 < turn_discount <= 1:
        raise ConfigError(f"--turn-discount must be in (0, 1], got {turn_discount}")


def check_agent(benchmark: str, agent: str | None) -> None:
    """A ConfigError naming the agents that can retry, when `agent` cannot."""
    allowed = CONTINUABLE.get(benchmark, ())
    if agent not in allowed:
        valid = "; ".join(f"{b} {', '.join(a)}" for b, a in CONTINUABLE.items())
        raise ConfigError(
            f"rollout multi-turn needs an agent that can continue an episode after feedback; "
            f"{benchmark} {agent} cannot (valid: {valid})"
        )


class MultiTurnRollout(Rollout):
    name: ClassVar[str] = "multi-turn"

    def __init__(self, settings: RolloutSettings):
        super().__init__(settings)
        self.max_turns, self.discount = settings.max_turns, settings.turn_discount
        check_settings(self.max_turns, self.discount)

    async def run(self, episode: Episode) -> tuple[Trajectory, Evaluation]:
        if not callable(getattr(episode.agent, "continue_episode", None)):
            check_agent(episode.task_settings.benchmark, episode.task_settings.agent)
            raise ConfigError(f"agent {episode.agent.name!r} cannot continue an episode (rollout multi-turn)")
        turns: list[Turn] = []
        trajectory = await self._turn(episode, None)
        while True:
            evaluation = await episode.evaluate(trajectory)
            turns.append(Turn(turn=len(turns) + 1, answer=trajectory.answer, success=evaluation.success,
                              reward=evaluation.reward, steps=len(trajectory.steps),
                              end_reason=trajectory.end_reason))
            if evaluation.success or len(turns) >= self.max_turns or trajectory.end_reason not in RETRY_AFTER:
                break
            # The feedback is the last step's next observation: the Reflector and LAST_ATTEMPT,
            # which read the steps, see every turn's answer and what the environment said to it.
            last = trajectory.steps[-1]
            last.observation = f"{last.observation}\n{FEEDBACK}" if last.observation else FEEDBACK
            turns[-1].feedback = FEEDBACK
            answered = trajectory.answer
            trajectory = await self._turn(episode, FEEDBACK)
            if len(trajectory.steps) == turns[-1].steps:  # a budget ended it before another answer
                trajectory.answer = answered  # the episode stands on its last (judged) answer
                break
        if not evaluation.success and len(turns) >= self.max_turns and trajectory.end_reason in RETRY_AFTER:
            # every turn answered (or tried to) and none was right: the episode ran out of turns;
            # each turn's own end (finished, step_budget) stays in extra["turns"]
            trajectory.end_reason = "turn_budget"
        return trajectory, self._scored(trajectory, evaluation, turns)

    async def _turn(self, episode: Episode, feedback: str | None) -> Trajectory:
        """One answer: the agent's first pass, or its continuation after `feedback`, each in a
        fresh environment (the last one ended when it took the answer)."""
        env = episode.make_env()
        try:
            if feedback is None:
                return await episode.agent.run(episode.task, env, episode.memory, episode.actor)
            episode.actor.trajectory.answer = None  # this turn's answer is judged, not the last one's
            return await episode.agent.continue_episode(episode.task, env, episode.actor, feedback)
        except BudgetExhausted as stop:  # judged on what the episode did so far; no further turn
            trajectory = episode.actor.trajectory
            trajectory.end_reason = stop.reason
            return trajectory
        finally:
            await aclose(env)

    def _scored(self, trajectory: Trajectory, evaluation: Evaluation, turns: list[Turn]) -> Evaluation:
        raw = evaluation.reward
        discounted = raw * self.discount ** (len(turns) - 1)
        trajectory.rollout = self.name
        trajectory.extra["turns"] = [t.model_dump() for t in turns]
        detail = {**evaluation.detail, "raw_reward": raw, "discounted_reward": discounted, "turns": len(turns)}
        return evaluation.model_copy(update={"reward": discounted, "detail": detail})
