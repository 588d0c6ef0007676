"""`--benchmark remote --env-url URL`: bring your own environment, in any language.

Tasks are the server's `/tasks`; the agent is a plain ReAct loop (Thought / Action, one action
per turn, the environment's text as the observation); success is the last step's
`info["success"]` when the server sends it, else reward >= 1.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

from reinagent.agents.base import Actor, Agent
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.env import Env, areset, astep
from reinagent.errors import ConfigError
from reinagent.llm.base import GenerationParams
from reinagent.memory import MemoryView
from reinagent.records import Evaluation, Message, Step, Trajectory
from reinagent.service.client import TOKEN_ENV, EnvClient, EnvServiceError, HttpEnv
from reinagent.service.served import server_facts

DEFAULT_MAX_STEPS = 30
SYSTEM = (
    "You act in a text environment to complete a task. Each turn, think briefly, then give exactly one "
    "action, written as the environment expects it. Reply in this form:\n"
    "Thought: <your reasoning>\nAction: <one action>"
)
REFLECTION_EXAMPLES = (
    "Task: open the locked door.\n> Action: open door\nThe door is locked.\n> Action: open door\n"
    "The door is locked.\nSTATUS: FAIL\n\nReflection: I repeated an action that had already failed. "
    "Next time I will look for a key first (search the room, take the key, unlock the door), then open it."
)
# Linear (issue 45): possessive (`*+`), since adjacent `\s*\d*\s*` would retry every split of a long
# run of spaces, and the indent before the label stays on its line: a `^\s*` at every line start
# of a long run of blank lines would rescan the rest of the run.
_ACTION = re.compile(r"^[^\S\n]*+action\s*+\d*+\s*+[:：]\s*+(.*)$", re.I | re.M)
_THOUGHT = re.compile(r"^[^\S\n]*+thought\s*+\d*+\s*+[:：]\s*+(.*)$", re.I | re.M)


def parse_reply(text: str) -> tuple[str | None, str]:
    """(thought, action): the `Action:` line if there is one, else the first non-thought line."""
    thought = m.group(1).strip() if (m := _THOUGHT.search(text)) else None
    if m := _ACTION.search(text):
        return thought, m.group(1).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not _THOUGHT.match(ln)]
    return thought, (lines[0] if lines else "")


def succeeded(reward: float, info: dict[str, Any]) -> bool:
    return bool(info["success"]) if "success" in info else reward >= 1.0


class RemoteReactAgent(Agent):
    name: ClassVar[str] = "react"

    def __init__(self, settings):
        self.max_steps = settings.max_steps or DEFAULT_MAX_STEPS
        self.params = GenerationParams(max_tokens=settings.max_tokens, temperature=settings.temperature,
                                       stop=("\nObservation",), seed=settings.seed)

    def prompt(self, task: Task, observation: str, memory: MemoryView) -> list[Message]:
        parts = [block] if (block := memory.block()) else []
        parts.append(f"Observation: {observation}")
        return [Message(role="system", content=SYSTEM), Message(role="user", content="\n\n".join(parts))]

    async def run(self, task: Task, env: Env, memory: MemoryView, actor: Actor) -> Trajectory:
        traj = actor.trajectory
        observation, _ = await areset(env)
        traj.extra.update(task=observation, success=False, reward=0.0, env_steps=0)
        traj.messages = self.prompt(task, observation, memory)
        traj.end_reason = "step_budget"
        for _ in range(self.max_steps):
            completion = await actor.complete(traj.messages, self.params)
            thought, action = parse_reply(completion.text)
            step = Step(prompt_len=len(traj.messages), output=completion.text, thought=thought,
                        action=action or None, valid_action=bool(action))
            traj.steps.append(step)
            obs, reward, terminated, truncated, info = await astep(env, action or completion.text.strip())
            step.observation = obs
            traj.extra["env_steps"] += 1
            traj.extra["reward"] = reward
            traj.extra["success"] = succeeded(reward, info)
            shown = f"Thought: {thought}\nAction: {action}" if thought else f"Action: {action}"
            traj.messages += [Message(role="assistant", content=shown),
                              Message(role="user", content=f"Observation: {obs}")]
            if terminated or truncated:
                traj.answer = action
                traj.end_reason = "finished" if terminated else "step_budget"
                break
        return traj

    def render_attempt(self, task: Task, trajectory: Trajectory) -> str:
        lines = [f"Task: {trajectory.extra.get('task', '')}"]
        for step in trajectory.steps:
            lines.append(f"> Action: {step.action or step.output.strip()}")
            if step.observation:
                lines.append(step.observation)
        lines.append("STATUS: SUCCESS" if trajectory.extra.get("success") else f"STATUS: FAIL ({trajectory.end_reason})")
        return "\n".join(lines)


class RemoteBenchmark(Benchmark):
    name: ClassVar[str] = "remote"
    description: ClassVar[str] = "any server of the env protocol (--env-url), ReAct agent"
    agents: ClassVar[tuple[str, ...]] = ("react",)
    default_agent: ClassVar[str] = "react"
    splits: ClassVar[tuple[str, ...]] = ("all",)
    default_split: ClassVar[str] = "all"
    reflection_examples: ClassVar[str] = REFLECTION_EXAMPLES

    def __init__(self) -> None:
        self.client: EnvClient | None = None
        self._served: str | None = None
        self._agentgym: str | None = None  # an AgentGym server's URL (--env-protocol agentgym)
        self._agentgym_tasks = 0

    def check_config(self, settings) -> None:
        if not settings.env_url:
            raise ConfigError("--benchmark remote needs --env-url URL (a server of docs/env-protocol.md)")
        if settings.env_protocol == "agentgym":
            # AgentGym servers list no tasks: task i is data_idx i, for the first --num-envs of them
            if not settings.num_envs:
                raise ConfigError("--env-protocol agentgym needs --num-envs N (tasks are data_idx 0 to N-1: "
                                  "AgentGym servers do not list their tasks)")
            self._agentgym, self._agentgym_tasks, self._served = settings.env_url.rstrip("/"), settings.num_envs, "agentgym"
            return
        self.client = EnvClient(settings.env_url)
        self._served = str(server_facts(self.client)["benchmark"])

    def _need_client(self) -> EnvClient:
        if self.client is None:
            raise ConfigError("--benchmark remote needs --env-url URL (a server of docs/env-protocol.md)")
        return self.client

    def load_tasks(self, split: str) -> list[Task]:
        if self._agentgym:
            return [Task(task_id=str(i)) for i in range(self._agentgym_tasks)]
        client = self._need_client()
        try:
            ids = client.request("GET", "/tasks")["tasks"]
        except (EnvServiceError, KeyError, TypeError) as err:
            raise ConfigError(f"cannot list the tasks of env server {client.url}: {err}") from None
        if not isinstance(ids, list) or not ids:
            raise ConfigError(f"env server {client.url} lists no tasks at /tasks")
        return [Task(task_id=str(t)) for t in ids]

    def make_env(self, task: Task, settings) -> Env:
        if self._agentgym:
            from reinagent.service.agentgym import AgentGymEnv

            return AgentGymEnv(self._agentgym, int(task.task_id), token=os.environ.get(TOKEN_ENV) or None)
        return HttpEnv(self._need_client(), task.task_id)

    def make_agent(self, name: str, settings) -> Agent:
        if name != "react":
            raise ConfigError(f"unknown agent {name!r} for remote; valid: react")
        return RemoteReactAgent(settings)

    async def evaluate(self, task: Task, trajectory: Trajectory, settings) -> Evaluation:
        success = bool(trajectory.extra.get("success"))
        return Evaluation(success=success, reward=float(trajectory.extra.get("reward", 0.0)),
                          detail={"end_reason": trajectory.end_reason, "env_steps": trajectory.extra.get("env_steps", 0)})

    def settings(self) -> dict[str, Any]:
        return {"env_url": self.client.url if self.client else self._agentgym, "env_benchmark": self._served,
                "env_protocol": "agentgym" if self._agentgym else "reinagent",
                "success": "info['success'] if sent, else reward >= 1"}

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
