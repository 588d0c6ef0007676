"""The server's side of environments: which benchmark, how an env is made, the session table.

A session is one environment for one task, from `/create` to `/close` (or the idle timeout, or
a crash of the environment). The table is bounded: a full table answers 503 rather than growing
until the machine runs out of memory, which is how servers that never close sessions die.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import json
import math
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reinagent.benchmarks.base import Benchmark, Task
from reinagent.config import MAX_COUNT, MAX_TIMEOUT_S
from reinagent.env import Env, aclose
from reinagent.errors import ConfigError, choices
from reinagent.service.guard import short
from reinagent.settings import BenchmarkSettings

SHUTDOWN_S = 2.0  # on SIGTERM: in-flight requests, then closing envs, get this long each

#: RunConfig settings a client may choose per session (they change which env `make_env` builds).
ENV_OPTIONS = ("agent", "max_steps", "timeout_s")
#: per-step settings, applied as `env.set_<name>(value)` before the step (programming envs).
STEP_OPTIONS = ("internal_tests",)
MAX_STEPS = 1000  # a session's max_steps at most (an episode is a few dozen steps)
MAX_INTERNAL_TESTS = 100  # a coder's own tests per step at most (it writes a handful)
ALFWORLD_MAX_WORKERS = 32  # one worker process (~100 MB) per live ALFWorld session, at most this many


class NotFound(Exception):
    """Unknown session id or task id: HTTP 404."""


class Invalid(Exception):
    """A well-formed request the environment cannot take (bad option): HTTP 422."""


class Full(Exception):
    """The session cap is reached: HTTP 503 with Retry-After."""


class Ended(Exception):
    """A step after the session's episode ended: HTTP 409 (reset it, or create another)."""


# The HTTP status and headers both protocols (server.py, agentgym.py) answer each session error with
HTTP_ANSWER: dict[type[Exception], tuple[int, dict[str, str]]] = {
    NotFound: (404, {}), Invalid: (422, {}), Ended: (409, {}), Full: (503, {"Retry-After": "1"})}


def http_answer(err: Exception) -> tuple[int, dict[str, str]]:
    """A session error's status and headers (a subclass's are its nearest listed base's)."""
    return next(answer for kind, answer in HTTP_ANSWER.items() if isinstance(err, kind))


def load_benchmark(name: str) -> Benchmark:
    """A registered benchmark, or `package.module:Class` for a Benchmark subclass of your own."""
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"cannot load benchmark class {name!r}: {err}") from None
        if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
            raise ConfigError(f"{name!r} is not a reinagent Benchmark subclass")
        return cls()
    from reinagent import benchmarks

    servable = [b for b in benchmarks.REGISTRY if b != "remote"]  # remote is a client, not an env
    if name.rsplit("-v", 1)[0] not in servable:
        raise ConfigError(f"unknown benchmark {name!r} to serve; valid: {', '.join(servable)}, "
                          "or package.module:Class")
    return benchmarks.make(name)


def env_agent(bench: Benchmark) -> str:
    """The agent whose environment a server builds by default: the interactive one (ReAct's
    docstore for HotpotQA) where the benchmark has it."""
    return "react" if "react" in bench.agents else bench.default_agent


def base_settings(bench: Benchmark, split: str | None, max_sessions: int) -> BenchmarkSettings:
    """The settings of the server's environments when a client sends no options."""
    split = split or bench.default_split
    if split not in bench.splits:
        raise ConfigError(f"unknown split {split!r} for {bench.name}; valid: {choices(bench.splits)}")
    settings = BenchmarkSettings(benchmark=bench.name, agent=env_agent(bench), split=split,
                                 max_concurrency=min(max_sessions, ALFWORLD_MAX_WORKERS))
    bench.check_config(settings)
    return settings


class EnvOptions(BaseModel):
    """A client's options for its session's environment (ENV_OPTIONS), with a run's bounds."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    max_steps: int | None = Field(default=None, gt=0, le=MAX_COUNT)
    timeout_s: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)


def step_option(env: Env, name: str, value: Any) -> None:
    """Apply one per-step setting, checked here: a wrong type is a 422, not a crash in the env."""
    setter = getattr(env, f"set_{name}", None) if name in STEP_OPTIONS else None
    if setter is None:
        raise Invalid(f"this environment takes no step option {short(name)}; valid: {choices(STEP_OPTIONS)}")
    if not (isinstance(value, list) and all(isinstance(t, str) for t in value)):
        raise Invalid(f"step option {name} must be a list of strings (test statements), got {short(value)}")
    if len(value) > MAX_INTERNAL_TESTS:
        raise Invalid(f"step option {name}: at most {MAX_INTERNAL_TESTS} tests, got {len(value)}")
    setter(value)


def _idx_text(idx: int) -> str:
    """An idx for an error message: as written when short, else a prefix (never 4,000 digits)."""
    return str(idx) if abs(idx) < 10**60 else short(idx)


def plain(value: Any) -> Any:
    """A JSON-safe copy of an info dict (tuples become lists, unknown objects their str)."""
    return json.loads(json.dumps(value, default=str))


@dataclass
class Session:
    id: str
    task_id: str
    env: Env
    last_used: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one request at a time per session
    was_reset: bool = False
    #: how the episode ended ("terminated" or "truncated"), None while it runs: a finished episode
    #: takes no more steps until a reset, whatever its env would do (both protocols check it)
    ended: str | None = None

    def refuse_if_ended(self, how_to_reset: str) -> None:
        if self.ended is not None:
            raise Ended(f"the episode has ended ({self.ended}): a step after the end is not played; "
                        f"{how_to_reset} to start a new episode")

    def record_end(self, terminated: bool, truncated: bool) -> None:
        self.ended = "terminated" if terminated else "truncated" if truncated else None


class SessionTable:
    def __init__(self, bench: Benchmark, config: BenchmarkSettings, max_sessions: int, idle_timeout_s: float,
                 *, max_timeout_s: float = 60.0):
        self.bench, self.config = bench, config
        self.max_timeout_s = max_timeout_s  # a session's timeout_s at most: a step holds a sandbox slot that long
        self.tasks: dict[str, Task] = {t.task_id: t for t in bench.load_tasks(config.split)}
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.sessions: dict[str, Session] = {}
        # the seed-style id-less sessions: None for the plain form, idx for the seed's WebEnvClient
        self.defaults: dict[int | None, str] = {}
        # id-less keys whose finished session was reclaimed for another (how it ended): a step
        # there is still 409, not 404; only valid idx (and None) get here, so it stays bounded
        self.reclaimed: dict[int | None, str] = {}
        self._reserved = 0  # creations in progress count against the cap
        self._used = False  # the benchmark object has made envs since it was fresh
        self._empty_since = time.monotonic()

    def __len__(self) -> int:
        return len(self.sessions)

    def _config_for(self, options: dict[str, Any]) -> BenchmarkSettings:
        unknown = sorted(set(options) - set(ENV_OPTIONS))
        if unknown:
            raise Invalid(f"unknown option {short(unknown[0])}; valid: {choices(ENV_OPTIONS)}")
        if not options:
            return self.config
        if "agent" in options and options["agent"] not in self.bench.agents:
            raise Invalid(f"unknown agent {short(options['agent'])} for {self.bench.name}; valid: {choices(self.bench.agents)}")
        raw = options.get("timeout_s")
        if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw > self.max_timeout_s:
            # before RunConfig's own bound (a day): the server's limit is the one to name
            raise Invalid(f"option timeout_s: at most {self.max_timeout_s:g} s on this server "
                          f"(serve-env --max-timeout-s), got {short(raw)}")
        try:
            asked = EnvOptions(**{"agent": self.config.agent, "max_steps": self.config.max_steps,
                                  "timeout_s": self.config.timeout_s, **options})
            config = dataclasses.replace(self.config, **asked.model_dump())
        except ValidationError as err:
            first = err.errors()[0]
            raise Invalid(f"option {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        # the server's own limits: a client must not hold a sandbox slot for 1e9 s
        if not (math.isfinite(config.timeout_s) and config.timeout_s <= self.max_timeout_s):
            raise Invalid(f"option timeout_s: at most {self.max_timeout_s:g} s on this server "
                          f"(serve-env --max-timeout-s), got {short(options.get('timeout_s'))}")
        if config.max_steps is not None and config.max_steps > MAX_STEPS:
            raise Invalid(f"option max_steps: at most {MAX_STEPS} on this server, got {config.max_steps}")
        return config

    async def create(self, task_id: str, options: dict[str, Any] | None = None) -> Session:
        task = self.tasks.get(task_id)
        if task is None:
            raise NotFound(f"unknown task {short(task_id)}; GET /tasks lists the {len(self.tasks)} valid ids")
        config = self._config_for(options or {})
        reclaimed = None
        if len(self.sessions) + self._reserved >= self.max_sessions:
            reclaimed = self._reclaim_finished_default()
            if reclaimed is None:
                raise Full(f"session cap reached ({self.max_sessions} open); close a session or retry later")
        self._reserved += 1
        try:
            if reclaimed is not None:
                with contextlib.suppress(Exception):  # it is gone from the table whatever its env does
                    await aclose(reclaimed.env)
            env = self.bench.make_judged_env(task, config)
        finally:
            self._reserved -= 1
        session = Session(id=str(uuid.uuid4()), task_id=task_id, env=env)
        self.sessions[session.id] = session
        self._used = True
        return session

    def _reclaim_finished_default(self) -> Session | None:
        """At the cap: take out the id-less (seed-style) session whose episode ended longest ago, so
        a seed client that never closes can walk a split of any size. Never a session with an id a
        client holds, one mid-episode, or one mid-request. Synchronous: nothing can take the slot
        before the caller reserves it."""
        finished = [s for sid in self.defaults.values() if (s := self.sessions.get(sid)) is not None
                    and s.ended is not None and not s.lock.locked()]
        if not finished:
            return None
        victim = min(finished, key=lambda s: s.last_used)
        keys = [k for k, sid in self.defaults.items() if sid == victim.id]
        self._forget(victim.id)
        for key in keys:
            self.reclaimed[key] = victim.ended or "ended"
        return victim

    def get(self, session_id: str | None, idx: int | None = None) -> Session:
        if session_id is None:
            session_id = self.defaults.get(idx)
            if session_id is None or session_id not in self.sessions:
                which = "" if idx is None else f" for idx {_idx_text(idx)}"
                if idx in self.reclaimed:
                    again = "" if idx is None else f' {{"idx": {idx}}}'
                    raise Ended(f"the episode{which} has ended ({self.reclaimed[idx]}; its session was reclaimed "
                                f"for another at the session cap): POST /reset{again} to start a new episode")
                raise NotFound(f"no default session{which}: POST /reset without an id first")
        session = self.sessions.get(session_id)
        if session is None:
            raise NotFound(f"unknown session id {short(session_id)} (closed, timed out, or never created)")
        session.last_used = time.monotonic()
        return session

    def task_at(self, idx: int) -> str:
        """The idx-th task id of /tasks (the seed's WebEnvClient names tasks by position)."""
        ids = list(self.tasks)
        if not 0 <= idx < len(ids):
            raise NotFound(f"idx {_idx_text(idx)} is out of range: GET /tasks lists {len(ids)} tasks "
                           f"(idx 0 to {len(ids) - 1})")
        return ids[idx]

    async def default_for_reset(self, task_id: str | None, idx: int | None = None) -> Session:
        """The id-less reset: the default session of `idx` (None: the plain form), (re)made when a
        task is named or none exists. The idx-th task is that session's task."""
        if idx is not None:
            if task_id is not None:
                raise Invalid("give 'task_id' or 'idx', not both")
            task_id = self.task_at(idx)
        sid = self.defaults.get(idx)
        current = self.sessions.get(sid) if sid else None
        if current is not None and (task_id is None or task_id == current.task_id):
            return current
        if current is not None:
            await self.close(current.id)
        session = await self.create(task_id or next(iter(self.tasks)))
        self.defaults[idx] = session.id
        self.reclaimed.pop(idx, None)
        return session

    def _forget(self, session_id: str) -> Session:
        """Take a session out of the table (its env is still to be closed)."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            raise NotFound(f"unknown session id {short(session_id)} (closed, timed out, or never created)")
        for key in [k for k, sid in self.defaults.items() if sid == session_id]:
            del self.defaults[key]
        if not self.sessions:
            self._empty_since = time.monotonic()
        return session

    async def close(self, session_id: str) -> None:
        await aclose(self._forget(session_id).env)

    async def close_idle(self) -> int:
        """Close sessions unused for longer than the idle timeout (never one mid-request)."""
        now = time.monotonic()
        stale = [s.id for s in self.sessions.values()
                 if now - s.last_used > self.idle_timeout_s and not s.lock.locked()]
        for sid in stale:
            if sid in self.sessions:
                await self.close(sid)
        await self._release_if_idle(now)
        return len(stale)

    async def _release_if_idle(self, now: float) -> None:
        """With no session for the idle timeout, swap in a fresh benchmark object and close the old
        one: its pooled resources (ALFWorld's worker processes, ~100 MB each; sandbox workers) go,
        and the server returns to its resting memory. The next session starts a new pool."""
        if self.sessions or self._reserved or not self._used or now - self._empty_since <= self.idle_timeout_s:
            return
        old = self.bench
        fresh = type(old)()
        fresh.check_config(self.config)
        self.bench, self._used = fresh, False  # no await before this: no session can start in between
        await asyncio.to_thread(old.close)

    async def close_all(self) -> None:
        for sid in list(self.sessions):
            with contextlib.suppress(Exception):  # shutting down: close the others all the same
                await self.close(sid)


def session_lifespan(table: SessionTable, executor_threads: int = 16):
    """The app's lifespan, for both protocols (server.py's and agentgym.py's): idle sessions are reaped,
    and at shutdown the sessions and the benchmark are closed, each within SHUTDOWN_S."""

    async def reap_idle() -> None:
        period = min(max(table.idle_timeout_s / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(period)
            await table.close_idle()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        # Blocking envs step in threads: enough of them that every session can be mid-step.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(executor_threads))
        reaper = asyncio.create_task(reap_idle())
        try:
            yield
        finally:
            reaper.cancel()
            # bounded: an env stuck in a step (a program looping until its timeout) must not hold
            # up the exit; serve() ends the process whatever threads are left
            for closing in (table.close_all(), asyncio.to_thread(table.bench.close)):
                with contextlib.suppress(Exception, asyncio.TimeoutError):
                    await asyncio.wait_for(closing, SHUTDOWN_S)

    return lifespan
