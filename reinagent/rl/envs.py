"""Where an RL agent's environments come from, and how a task is named.

`env_name` is a registered benchmark (in-process), or, when it is not, the benchmark served by an
env server (`reinagent serve-env`) answering at `env_server_base:env_port`; then episodes step the
server's environments over HTTP and tasks are the server's. Anything else is a one-line error
naming the registered benchmarks.
"""

from __future__ import annotations

import re

from reinagent import benchmarks
from typing import TYPE_CHECKING

from reinagent.benchmarks.base import Benchmark, Task
from reinagent.config import RunConfig
from reinagent.errors import ConfigError, choices
from reinagent.rl.config import RLAgentConfig

if TYPE_CHECKING:
    from reinagent.plan import Plan

# benchmarks whose environment takes a whole reply as the answer: token rollouts (training) need it
TRAINABLE = ("arithmetic", "arithmetic20", "gsm8k")


def server_health(url: str, timeout_s: float = 2.0) -> dict | None:
    """The env server's /health when one answers at `url` with status ok, else None."""
    import httpx

    try:
        reply = httpx.get(f"{url}/health", timeout=timeout_s)
        data = reply.json() if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("status") == "ok" else None


def run_config_of(cfg: RLAgentConfig, *, split: str | None = None, **extra) -> RunConfig:
    """The RunConfig an RL config stands for (its env, model, limits, rollout), not yet resolved."""
    if not cfg.env_name:
        raise ConfigError(f"env_name is required; valid: {choices(benchmarks.benchmark_names())}, "
                          f"or the benchmark of an env server at env_server_base:env_port")
    name = cfg.env_name
    registered = name in benchmarks.REGISTRY or name.rsplit("-v", 1)[0] in benchmarks.REGISTRY
    env_url = None
    if not registered:
        health = server_health(cfg.env_server_url)
        if health is None:
            raise ConfigError(f"unknown env_name {name!r}; valid: {choices(benchmarks.benchmark_names())}, "
                              f"or an env server at {cfg.env_server_url} (none answered there)")
        name, env_url = "remote", cfg.env_server_url
    rollout = cfg.rollout
    if rollout == "react" and name.rsplit("-v", 1)[0] in TRAINABLE and cfg.max_turns > 1:
        # a math environment takes one answer; ReAct would stop there. Token rollouts give feedback
        # and another turn, up to max_turns: the multi-turn rollout is the same episode in text
        rollout = "multi-turn"
    values = dict(
        benchmark=name, env_url=env_url, split=split if split is not None else cfg.split, model=cfg.model,
        base_url=cfg.base_url, num_trials=1, num_envs=cfg.num_tasks, strategy="none", rollout=rollout,
        max_steps=cfg.max_turns, max_turns=cfg.max_turns, turn_discount=cfg.turn_discount,
        max_tokens=cfg.max_response_length, max_prompt_tokens=cfg.max_prompt_length,
        temperature=cfg.eval_temperature, max_concurrency=cfg.max_workers, seed=cfg.seed,
    )
    values.update(extra)
    try:
        return RunConfig(**values)
    except Exception as err:  # noqa: BLE001 - pydantic's message, on one line
        raise ConfigError(f"[rl] settings are not a valid run: {str(err).splitlines()[-1].strip()}") from None


def resolve_env(cfg: RLAgentConfig, *, split: str | None = None, **extra) -> Plan:
    """The plan of the runs an RL config stands for; its model is a policy the RL side loads
    itself (a checkpoint directory too), so the run's model checks are left out."""
    from reinagent.plan import resolve

    return resolve(run_config_of(cfg, split=split, **extra), check_models=False)


def check_trainable(bench: Benchmark) -> None:
    if bench.name not in TRAINABLE:
        raise ConfigError(f"env {bench.name!r} cannot be trained with token rollouts yet; valid: {choices(TRAINABLE)}")


# starts where a number starts, possessive: not retried inside a long run of digits (issue 45)
_SUM = re.compile(r"(?<!\d)(-?\d++)\s*+([+-])\s*+(-?\d++)")


def find_task(bench: Benchmark, description: str) -> Task:
    """The task a description names: a task id or question of any split, or (arithmetic) any
    'a + b' / 'a - b' written in it."""
    text = description.strip()
    for split in bench.splits:
        try:
            tasks = bench.load_tasks(split)
        except Exception:  # noqa: BLE001 - a split needing data that is not here is simply skipped
            continue
        for task in tasks:
            question = getattr(task, "question", None)
            if text in (task.task_id, question, f"Question: {question}"):
                return task
    if bench.name.startswith("arithmetic") and (m := _SUM.search(text)):
        from reinagent.benchmarks.arithmetic import make_task

        return make_task(int(m.group(1)), m.group(2), int(m.group(3)))
    raise ConfigError(f"no {bench.name} task matches {text[:80]!r}; give a task id or a task's question"
                      + (" (or 'a + b')" if bench.name.startswith("arithmetic") else ""))
