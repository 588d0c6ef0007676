"""ReAct for ALFWorld: one command (or a `think:` line) per turn, demonstrations of the task's type.

The paper's setting: a thought is answered "OK." by the agent itself and costs a turn; any other
line goes to the game, which answers commands it cannot carry out with "Nothing happens." (also a
turn). The episode ends when the game is won, the step budget (50 turns) is spent, or the agent
repeats itself in a loop. The reference code's own rules are settings (docs/alfworld.md): two
demonstrations (--alfworld-demos 2), the end at the first repeated action (--alfworld-loop
repeat), 49 steps (--max-steps 49), short replies asked again (--short-reply-retries 5).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from reinagent.agents.base import Actor, Agent
from reinagent.agents.prompts import alfworld as prompts
from reinagent.env import areset, astep
from reinagent.llm.base import GenerationParams
from reinagent.llm.constrained import with_choices
from reinagent.memory import MemoryView
from reinagent.records import Message, Step, Trajectory

DEFAULT_MAX_STEPS = 50
MAX_TURN_TOKENS = 64
LOOP_REPEATS = 3  # a cycle of 1 or 2 moves seen this many times in a row ends the episode
SHORT_REPLY = 5  # --short-reply-retries: a reply with fewer characters is asked again (the reference's)
RETRY_WARMER = 0.2  # each retry's temperature above the one before
THINK_REPLY = "OK."
EMPTY_REPLY = "Nothing happens."

# possessive (`*+`): `\s*\d*\s*` would retry every split of a long run of spaces (issue 45)
_LABEL = re.compile(r"^(?:action|command|act|next action)\s*+\d*+\s*+[:：]\s*+", re.I)
_THINK = re.compile(r"^(?:think|thought)\s*+\d*+\s*+[:：]\s*+", re.I)
_PUT = re.compile(r"^put (.+?) (?:in/on|into|in|on|onto|inside) (.+)$")
_QUOTES = "\"'`“”‘’"


@dataclass(frozen=True)
class Move:
    kind: str  # "command", "think" or "empty"
    text: str

    def render(self) -> str:
        return f"think: {self.text}" if self.kind == "think" else self.text


def parse_move(output: str, admissible: list[str] | None = None) -> Move:
    """The first line of a model output as a move, forgiving chat decorations.

    Accepts '> go to desk 1', 'Action: go to desk 1', '**go to desk 1**', '"go to desk 1."',
    'Thought: ...' (a think), 'put mug 1 on desk 1' (the game's form is 'in/on').
    """
    lines = [ln for ln in output.splitlines() if ln.strip().strip("`*_>#-")]
    if not lines:
        return Move("empty", "")
    line = lines[0].strip()
    for _ in range(3):  # labels and decorations may nest: '> **Action:** `go to x`'
        line = line.strip().strip("*_`#").lstrip(">").strip()
        line = re.sub(r"^\d+[.)]\s+", "", line)
        line = _LABEL.sub("", line)
    if m := _THINK.match(line):
        return Move("think", line[m.end():].strip())
    command = " ".join(line.strip(_QUOTES).strip().rstrip(".!").strip(_QUOTES).lower().split())
    return Move("command", match_admissible(command, admissible or []))


def match_admissible(command: str, admissible: list[str]) -> str:
    """The admissible spelling of a command when an obvious variant was meant; else unchanged."""
    if command in admissible:
        return command
    if m := _PUT.match(command):
        command = f"put {m.group(1)} in/on {m.group(2)}"
    bare = re.sub(r"\b(?:the|a|an)\s+", "", command)
    if command not in admissible and bare in admissible:
        return bare
    return command


def is_loop(moves: list[str], repeats: int = LOOP_REPEATS) -> bool:
    """True when the last moves are one move, or a pair of moves, repeated `repeats` times."""
    for period in (1, 2):
        span = period * repeats
        if len(moves) < span:
            continue
        tail = moves[-span:]
        if period == 2 and tail[0] == tail[1]:
            continue  # that is the period-1 case
        if all(tail[i] == tail[i % period] for i in range(span)):
            return True
    return False


def repeats_last(moves: list[str]) -> bool:
    """True when the last move repeats the one before it: the reference's end of an episode
    (env_history.check_is_exhausted; a thought counts as a move)."""
    return len(moves) >= 2 and moves[-1] == moves[-2]


async def play_move(env: Any, output: str, info: dict[str, Any], prompt_len: int
                    ) -> tuple[Move, Step, bool, bool, dict[str, Any]]:
    """One model reply played in the game: its move, the Step it makes (observation filled in),
    terminated, truncated and the game's new info. A thought or an empty reply never reaches the
    game (the agent answers it itself), so only a Step with an `action` counts as an env step.
    The ReAct agent and the search rollouts (reinagent/rollouts/steps.py) both play through here."""
    move = parse_move(output, info.get("admissible_commands"))
    step = Step(prompt_len=prompt_len, output=output)
    terminated = truncated = False
    if move.kind == "think":
        step.thought, step.observation = move.text, THINK_REPLY
    elif move.kind == "empty":
        step.valid_action, step.observation = False, EMPTY_REPLY
    else:
        step.action = move.text
        step.valid_action = move.text in info.get("admissible_commands", [])
        step.observation, _, terminated, truncated, info = await astep(env, move.text)
    return move, step, terminated, truncated, info


async def play_game(task: Any, env: Any, actor: Actor, opening: Callable[[str], list[Message]],
                    play: Callable[[Trajectory, dict[str, Any]], Awaitable[str]]) -> Trajectory:
    """The start and end both ALFWorld agents share: reset the game, keep its task text, open the
    conversation with `opening(observation)`, then `play` (which returns the end reason)."""
    traj = actor.trajectory
    traj.extra.update(won=False, env_steps=0, task_type=task.task_type)
    try:
        observation, info = await areset(env)
        traj.extra["task"] = observation
        traj.messages = opening(observation)
        traj.end_reason = await play(traj, info)
    except BaseException:
        traj.end_reason = "error"  # the runner records the exception itself
        raise
    return traj


class ALFWorldReactAgent(Agent):
    name: ClassVar[str] = "react"

    def __init__(self, settings: Any):
        self.max_steps = settings.max_steps or DEFAULT_MAX_STEPS
        self.demos = settings.alfworld_demos
        self.looping = repeats_last if settings.alfworld_loop == "repeat" else is_loop
        self.retries = settings.short_reply_retries
        # One line per turn: stopping at the newline keeps a chatty model from inventing the
        # environment's answer. A command is ~10 tokens and a thought ~50; the cap stops a small
        # model that copies the room description from spending a minute on one turn.
        self.params = GenerationParams(
            max_tokens=min(settings.max_tokens, MAX_TURN_TOKENS), temperature=settings.temperature,
            stop=("\n",), seed=settings.seed,
        )

    def prompt(self, task: Any, observation: str, memory: MemoryView) -> list[Message]:
        parts = [prompts.demonstrations(task.kind, self.demos)]
        block = memory.block()
        if block:
            parts.append(block)
        parts.append(f"Here is the task:\n{observation}")
        return [Message(role="system", content=prompts.SYSTEM), Message(role="user", content="\n\n".join(parts))]

    async def run(self, task: Any, env: Any, memory: MemoryView, actor: Actor) -> Trajectory:
        return await play_game(task, env, actor, lambda observation: self.prompt(task, observation, memory),
                               lambda traj, info: self._play(traj, env, info, actor))

    async def _play(self, traj: Trajectory, env: Any, info: dict[str, Any], actor: Actor) -> str:
        moves: list[str] = []
        for _ in range(self.max_steps):
            # the admissible commands ride along: a constrained actor may only pick one of them
            params = with_choices(self.params, info.get("admissible_commands"))
            output = await self._reply(traj.messages, params, actor)
            move, step, terminated, truncated, info = await play_move(env, output, info, len(traj.messages))
            traj.steps.append(step)
            if step.action is not None:
                traj.extra["env_steps"] += 1
                traj.extra["won"] = bool(info.get("won"))
            traj.messages.append(Message(role="assistant", content=move.render()))
            traj.messages.append(Message(role="user", content=step.observation))
            moves.append(move.render())
            if traj.extra["won"]:
                return "won"
            if terminated:
                return "finished"  # the game ended without a win (ALFWorld has no such ending today)
            if truncated:
                return "step_budget"
            if self.looping(moves):
                return "loop"
        return "step_budget"

    async def _reply(self, messages: list[Message], params: GenerationParams, actor: Actor) -> str:
        """The model's reply; with --short-reply-retries N, one under 5 characters is asked again
        up to N times, each 0.2 warmer, and after the last an empty reply (the reference's llm())."""
        text = (await actor.complete(messages, params)).text
        if not self.retries or len(text.strip()) >= SHORT_REPLY:
            return text
        for n in range(1, self.retries + 1):
            warmer = replace(params, temperature=params.temperature + n * RETRY_WARMER)
            text = (await actor.complete(messages, warmer)).text
            if len(text.strip()) >= SHORT_REPLY:
                return text
        return ""

    def render_attempt(self, task: Any, trajectory: Trajectory) -> str:
        return render_trace(trajectory)


END_NOTES = {
    "won": "STATUS: SUCCESS",
    "step_budget": "STATUS: FAIL (ran out of steps)",
    "loop": "STATUS: FAIL (stopped: the same action was repeated in a loop)",
    "error": "STATUS: FAIL (the episode stopped with an error)",
}


def render_trace(trajectory: Trajectory) -> str:
    """The attempt as the game log a person would read: task, '> move' lines and answers."""
    lines = [str(trajectory.extra.get("task", "")).strip()]
    for step in trajectory.steps:
        if step.thought is not None:
            lines.append(f"> think: {step.thought}")
        elif step.action is not None:
            lines.append(f"> {step.action}")
        else:
            lines.append(f"> {step.output.strip()}")
        if step.observation is not None:
            lines.append(step.observation)
    lines.append(END_NOTES.get(trajectory.end_reason, f"STATUS: FAIL ({trajectory.end_reason})"))
    return "\n".join(ln for ln in lines if ln)
