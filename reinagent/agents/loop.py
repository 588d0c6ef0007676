"""The Thought/Action/Observation loop shared by the HotpotQA agents (CoT is a one-step ReAct)."""

from __future__ import annotations

from collections.abc import Callable

from reinagent.agents.base import Actor
from reinagent.agents.parsing import ParsedAction, clean_step_text, parse_output
from reinagent.env import Env, astep
from reinagent.llm.base import GenerationParams
from reinagent.records import Message, Step, Trajectory

STOP = ("\nObservation", "\nQuestion:")
TRUNCATED = "[truncated wikipedia excerpt]"


def parsed_step(prompt_len: int, output: str, names: tuple[str, ...]) -> tuple[Step, ParsedAction | None]:
    """One reply as the trial loop records it (its Thought and Action, or no action when it does
    not parse: rendered `(invalid output) ...` for the Reflector and LAST_ATTEMPT), and the parsed
    action. The RL trainer's token rollouts record their replies with this too, so a reflect step
    shows the Reflector the very prompt a real run shows it."""
    thought, action = parse_output(output, names)
    return Step(prompt_len=prompt_len, output=output, thought=thought,
                action=str(action) if action else None, valid_action=action is not None), action


def approx_tokens(messages: list[Message]) -> int:
    """A backend-neutral length estimate (about 4 characters per token for English)."""
    return sum(len(m.content) for m in messages) // 4 + 4 * len(messages)


async def step_loop(
    actor: Actor,
    env: Env,
    messages: list[Message],
    names: tuple[str, ...],
    params: GenerationParams,
    *,
    max_prompt_tokens: int | None = None,
    ask_action: bool = True,
) -> Trajectory:
    """Ask for a step, act it out, show the observation; until Finish, the step budget or the
    prompt budget ends the episode. Unparseable output is sent to the environment as is, which
    answers with its 'Invalid action' observation."""
    traj = actor.trajectory
    traj.messages = list(messages)
    while True:
        if max_prompt_tokens and approx_tokens(traj.messages) > max_prompt_tokens:
            traj.end_reason = "prompt_budget"
            break
        completion = await actor.complete(traj.messages, params)
        text = await _with_action(actor, traj.messages, params, completion.text) if ask_action else completion.text
        step, action = parsed_step(len(traj.messages), text, names)
        traj.steps.append(step)
        traj.messages.append(Message(role="assistant", content=clean_step_text(step.thought, action, text)))
        sent = str(action) if action else (text.strip() or "(empty)")
        obs, _reward, terminated, truncated, info = await astep(env, sent)
        step.observation = obs
        if terminated:
            traj.answer = info.get("answer")
            traj.end_reason = "finished"
            break
        traj.messages.append(Message(role="user", content=f"Observation: {obs}"))
        if truncated:
            traj.end_reason = "step_budget"
            break
    return traj


async def _with_action(actor: Actor, messages: list[Message], params: GenerationParams, text: str) -> str:
    """A reply that stopped after its thought gets asked for its action, once, within the same
    step: the reference prompts `Action {n}:` after every thought (hotpotqa_runs/agents.py), so a
    thought alone is never an invalid action there. A real model (Qwen2.5-Coder-1.5B, issue 43)
    ends a ReAct turn after the thought in about 1 reply of 8 when its output is not held to the
    grammar, and then copies the 'Invalid action' observation as its next thought."""
    if not text.strip().startswith("Thought") or "Action" in text:
        return text
    asked = [*messages, Message(role="assistant", content=text.strip()), Message(role="user", content="Action:")]
    reply = (await actor.complete(asked, params)).text.strip()
    return f"{text.rstrip()}\nAction: {reply.removeprefix('Action:').strip()}"


def with_feedback(messages: list[Message], feedback: str) -> list[Message]:
    """The conversation plus the environment's feedback as the next observation (the multi-turn
    rollout's retry). Merged into a trailing user turn (an 'Invalid action' observation) so that
    roles keep alternating, which some chat templates require."""
    note = f"Observation: {feedback}"
    if messages and messages[-1].role == "user":
        return [*messages[:-1], Message(role="user", content=f"{messages[-1].content}\n{note}")]
    return [*messages, Message(role="user", content=note)]


def render_steps(trajectory: Trajectory) -> str:
    """Thought/Action/Observation lines of an attempt, as the Reflector and LAST_ATTEMPT see it."""
    lines = []
    for step in trajectory.steps:
        if step.thought:
            lines.append(f"Thought: {step.thought}")
        lines.append(f"Action: {step.action}" if step.action else f"(invalid output) {step.output.strip()}")
        if step.observation:
            lines.append(f"Observation: {step.observation}")
    if trajectory.end_reason in ("step_budget", "prompt_budget"):
        lines.append(f"(The attempt ran out of {trajectory.end_reason.replace('_', ' ')} without an answer.)")
    return "\n".join(lines)


def shorten_observations(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """`text` within `max_tokens`, by replacing its largest `Observation` lines, largest first, with
    'Observation: [truncated wikipedia excerpt]' (the reference's truncate_scratchpad, which
    HotpotQA applies to the last attempt and the Reflector's input). Other lines are never cut,
    so a text without observations may stay longer than `max_tokens`."""
    lines = text.split("\n")
    observations = sorted((i for i, line in enumerate(lines) if line.startswith("Observation")),
                          key=lambda i: count(lines[i]))
    while observations and count("\n".join(lines)) > max_tokens:
        i = observations.pop()
        lines[i] = f"{lines[i].split(':')[0]}: {TRUNCATED}"
    return "\n".join(lines)
