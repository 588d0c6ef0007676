"""A Gymnasium-style environment API, small enough to implement for any benchmark.

`reset(seed=...) -> (observation, info)` and
`step(action) -> (observation, reward, terminated, truncated, info)`; `truncated` is the step
budget. A finished episode stays finished: a step after `terminated` or `truncated` raises
EpisodeEnded until `reset` (a client that ignored `done` would otherwise be scored again, pass@k
posing as pass@1). Engines that block (a text game in a worker process, a sandboxed test run) set
`blocking = True` and agents step them off the event loop with `astep`.
"""

from __future__ import annotations

import abc
import asyncio
from typing import Any

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


class EpisodeEnded(RuntimeError):
    """A step sent after the episode ended (terminated or truncated): reset first."""

    def __init__(self, how: str = "ended"):
        super().__init__(f"the episode has {how}; call reset() to start a new one")
        self.how = how


class Env(abc.ABC):
    blocking: bool = False
    #: how the current episode ended ("terminated" or "truncated"), None while it runs; the envs
    #: here set it with `ending` and check it with `refuse_if_ended` (reset sets it back to None)
    ended: str | None = None

    @abc.abstractmethod
    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]: ...

    @abc.abstractmethod
    def step(self, action: str) -> StepResult: ...

    def close(self) -> None:  # noqa: B027 - most environments hold nothing
        pass

    def refuse_if_ended(self) -> None:
        """Call first in `step`: a finished episode takes no more actions (and earns no more reward)."""
        if self.ended is not None:
            raise EpisodeEnded(self.ended)

    def ending(self, result: StepResult) -> StepResult:
        """Return `step`'s result through this: it remembers whether the episode has ended."""
        _, _, terminated, truncated, _ = result
        self.ended = "terminated" if terminated else "truncated" if truncated else None
        return result

    # Branching (tree-search rollouts): an env that can copy its state returns it from
    # snapshot() and takes it back in restore(), on a fresh env of the same task; the copy must
    # share nothing mutable with the env. None means "cannot": the search then replays the
    # action prefix in a fresh env (reinagent/rollouts/branching.py).
    def snapshot(self) -> Any:
        return None

    def restore(self, state: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot restore a snapshot")


async def areset(env: Env, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
    # An env may bring its own async path (e.g. waiting for a pooled worker without a thread).
    if hasattr(env, "areset"):
        return await env.areset(seed=seed)
    if env.blocking:
        return await asyncio.to_thread(env.reset, seed=seed)
    return env.reset(seed=seed)


async def astep(env: Env, action: str) -> StepResult:
    if hasattr(env, "astep"):
        return await env.astep(action)
    if env.blocking:
        return await asyncio.to_thread(env.step, action)
    return env.step(action)


async def aclose(env: Env) -> None:
    if hasattr(env, "aclose"):
        return await env.aclose()
    if env.blocking:
        await asyncio.to_thread(env.close)
    else:
        env.close()


def check_env(env: Env, actions: list[str]) -> None:
    """Gymnasium's env checker in miniature: the types every registered environment must return."""
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and isinstance(info, dict), "reset must return (str, dict)"
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str), "observation must be text"
        assert isinstance(reward, (int, float)), "reward must be a number"
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert isinstance(info, dict)
        if terminated or truncated:
            try:
                env.step(action)
            except EpisodeEnded:
                pass
            else:
                raise AssertionError("a step after the episode ended must raise EpisodeEnded")
            break
    env.close()
