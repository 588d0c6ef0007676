"""Branching an environment: every node of a search tree gets its own environment state.

Where an env can copy its state (`snapshot()`/`restore()`: HotpotQA's docstore, programming) a
branch is a fresh env restored from its parent's snapshot; elsewhere (ALFWorld, an env behind the
HTTP client) it is a fresh env that replays the parent's action prefix. Either way siblings share
nothing: the bug we must not repeat is branches stepping one shared environment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from reinagent.env import Env, aclose, areset, astep


@dataclass(frozen=True)
class EnvState:
    """Where a node's environment stands: the actions sent since reset (always kept: they are
    the replay fallback and the record) and the env's own snapshot where it has one."""

    actions: tuple[str, ...] = ()
    snapshot: Any = None


class Branching:
    """Opens, for a node, an env in the node's state; `make_env` gives a fresh env of the task."""

    def __init__(self, make_env: Callable[[], Env], prepare: Callable[[Env], Awaitable[None]] | None = None):
        self.make_env = make_env
        self.prepare = prepare  # run after every reset (the coder's internal tests)
        self.replays = 0  # actions replayed (the cost of envs that cannot snapshot)

    async def start(self) -> tuple[Env, str, dict[str, Any]]:
        env = self.make_env()
        obs, info = await areset(env)
        return env, obs, info

    def save(self, env: Env, actions: tuple[str, ...]) -> EnvState:
        snap = getattr(env, "snapshot", None)
        return EnvState(actions=actions, snapshot=snap() if snap is not None else None)

    async def open(self, state: EnvState) -> Env:
        """A fresh env in `state` (the caller closes it)."""
        env = self.make_env()
        try:
            if state.snapshot is not None:
                await areset(env)
                env.restore(state.snapshot)
                return env
            await areset(env)
            if self.prepare is not None:
                await self.prepare(env)
            for action in state.actions:
                self.replays += 1
                await astep(env, action)
            return env
        except BaseException:
            await aclose(env)
            raise
