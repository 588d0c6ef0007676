"""ALFWorld games behind the framework's Gym-style Env, each game in its own worker process.

The text engine (textworld + fast-downward) keeps global state and is not thread-safe, so every
episode plays in a worker process that holds exactly one game. Workers are pooled: a finished
episode hands its worker back and the next episode loads its game there, which saves the ~1 s of
imports per episode; the pool caps how many workers (~100 MB each) exist at once.

No orphans: workers ignore SIGINT (the parent decides when to stop them), are killed by the
kernel when the parent dies (PR_SET_PDEATHSIG, even by SIGKILL, even mid-step), exit on their own
when the parent's end of their socket closes, and
`WorkerPool.close()` (the benchmark's close(), which the runner calls also on Ctrl-C and crashes)
terminates them all. A worker whose step failed, timed out or was
interrupted is killed and never reused, so one broken game cannot leak into the next episode.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from reinagent.env import Env, EpisodeEnded, StepResult
from reinagent.errors import env_count

DEFAULT_MAX_STEPS = 50
LOAD_TIMEOUT_S = 300.0  # loading a game is ~1 s alone; generous for a machine under load
STEP_TIMEOUT_S = 60.0
# The PDDL planner needs minutes for a few pick-two games (2.5 min for PepperShaker-Drawer-10
# on 2 busy cores; more under heavier load): an expert's load or replanning step gets this.
PLANNER_TIMEOUT_S = 1800.0
WELCOME = "-= Welcome to TextWorld, ALFRED! =-"


class WorkerError(RuntimeError):
    """The game engine failed, hung or died; the episode is recorded as an error."""


class _Worker:
    """A `python -m reinagent.benchmarks.alfworld_worker` process and its end of a socket pair.

    A plain subprocess rather than multiprocessing's spawn: spawn re-runs the caller's main
    script in the child, which breaks any researcher's script without a `__main__` guard.
    """

    def __init__(self) -> None:
        parent, child = socket.socketpair()
        package_root = str(Path(__file__).resolve().parents[2])  # so the child imports this reinagent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reinagent.benchmarks.alfworld_worker", str(child.fileno()), str(os.getpid())],
            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
        )
        child.close()  # only the worker holds that end: its EOF tells us it died, and vice versa
        self.conn = Connection(parent.detach())
        self.episodes = 0  # served so far: the pool retires a worker after its games_per_worker

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, message: tuple, timeout: float) -> dict[str, Any]:
        try:
            self.conn.send(message)
            if not self.conn.poll(timeout):
                raise WorkerError(f"the ALFWorld engine did not answer {message[0]!r} in {timeout:.0f} s")
            status, payload = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError) as err:
            raise WorkerError(f"the ALFWorld worker process died ({type(err).__name__})") from None
        if status != "ok":
            raise WorkerError(f"the ALFWorld engine failed on {message[0]!r}:\n{payload}")
        return payload

    def ask_to_close(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # already gone or closed
            self.conn.send(("close",))

    def stop(self, grace_s: float = 1.0) -> None:
        """Ask politely, then terminate, then kill: the process is gone when this returns."""
        self.ask_to_close()
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.process.terminate()  # busy in a step: it cannot read the request
            try:
                self.process.wait(1.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.conn.close()


_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _forget_spawner_in_child() -> None:
    """A forked child (Gymnasium's async vector env, multiprocessing) inherits the executor but not
    its thread: submitting to it would wait forever. The child starts its own spawner when needed,
    and a fresh lock (the parent's may have been held by another thread at the fork)."""
    global _SPAWNER, _SPAWNER_LOCK
    _SPAWNER, _SPAWNER_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_spawner_in_child)


def _spawn() -> _Worker:
    """A new worker, started from one long-lived thread. PR_SET_PDEATHSIG fires when the *thread*
    that started the worker exits, not only its process: a worker started from a short-lived
    thread (a server's idle-timing thread pool) would be killed mid-episode."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="alfworld-spawner")
        spawner = _SPAWNER
    return spawner.submit(_Worker).result()


def default_workers() -> int:
    """REINAGENT_ALFWORLD_WORKERS, else 4 per CPU core, at most 32 (each worker ~100 MB)."""
    return env_count("REINAGENT_ALFWORLD_WORKERS", min(32, 4 * (os.cpu_count() or 1)))


def default_games_per_worker() -> int:
    """REINAGENT_ALFWORLD_GAMES_PER_WORKER, else 10: the episodes a worker serves before it is
    replaced. A worker's memory grows with every game it loads (about 95 MB with its first game,
    then some 4 MB a game), which made the workers about half of a 134-game run's RSS."""
    return env_count("REINAGENT_ALFWORLD_GAMES_PER_WORKER", 10)


class WorkerPool:
    """At most `max_workers` worker processes; an episode holds one from reset to close. A worker
    that has served `games_per_worker` episodes is stopped on release and a fresh one spawned
    when next needed (as multiprocessing's maxtasksperchild)."""

    def __init__(self, max_workers: int | None = None, games_per_worker: int | None = None):
        self.max_workers = max_workers or default_workers()
        self.games_per_worker = games_per_worker or default_games_per_worker()
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()
        self._reserved = 0  # slots being spawned outside the lock
        self._closed = False

    def try_acquire(self) -> _Worker | None:
        with self._lock:
            if self._closed:
                raise WorkerError("the ALFWorld worker pool is closed")
            while self._idle:
                worker = self._idle.pop()
                if worker.alive:
                    return worker
                self._live.discard(worker)
            if len(self._live) + self._reserved >= self.max_workers:
                return None
            self._reserved += 1
        try:
            worker = _spawn()  # spawning takes a moment: not under the lock
        finally:
            with self._lock:
                self._reserved -= 1
        with self._lock:
            self._live.add(worker)
            closed = self._closed
        if closed:  # closed while we were spawning
            self.discard(worker)
            raise WorkerError("the ALFWorld worker pool is closed")
        return worker

    def acquire(self) -> _Worker:
        while (worker := self.try_acquire()) is None:
            time.sleep(0.05)
        return worker

    async def aacquire(self) -> _Worker:
        # Polling rather than blocking a thread: waiting episodes must not occupy the
        # default executor's few threads that the running episodes need for their steps.
        while (worker := self.try_acquire()) is None:
            await asyncio.sleep(0.05)
        return worker

    def release(self, worker: _Worker) -> None:
        worker.episodes += 1
        with self._lock:
            if (not self._closed and worker in self._live and worker.alive
                    and worker.episodes < self.games_per_worker):
                self._idle.append(worker)
                return
        self.discard(worker)

    def discard(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.stop(grace_s=0.2)

    @property
    def pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._live if w.process.pid is not None]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._live, self._idle = list(self._live), set(), []
        for worker in workers:  # all at once: idle workers exit while busy ones are waited on
            worker.ask_to_close()
        deadline = time.monotonic() + 1.0
        for worker in workers:
            worker.stop(grace_s=max(0.0, deadline - time.monotonic()))


@dataclass
class _Episode:
    steps: int = 0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] | None = None


def clean_observation(feedback: str, *, first: bool = False) -> str:
    """Drop the welcome banner and the 'You arrive at loc N.' prefix (noise, as in ReAct)."""
    text = feedback.strip()
    if first:
        text = "\n".join(p.strip() for p in text.split("\n\n") if p.strip() and p.strip() != WELCOME)
    elif text.startswith("You arrive at loc "):
        text = text[text.find(". ") + 2 :]
    return text


class ALFWorldEnv(Env):
    """One ALFWorld game. Success is `info["won"]`; the step budget ends in truncation.

    info carries `admissible_commands` (for the agent), `won`, and with `expert` set the
    engine's `expert_plan` (its next commands from the current state).
    """

    blocking = True

    def __init__(self, pool: WorkerPool, game_path: Path, *, game_id: str = "", task_type: str = "",
                 max_steps: int = DEFAULT_MAX_STEPS, expert: str | None = None):
        self.pool = pool
        self.game_path = Path(game_path)
        self.game_id = game_id or self.game_path.parent.name
        self.task_type = task_type
        self.max_steps = max_steps
        self.expert = expert
        self._worker: _Worker | None = None
        self._busy = threading.Lock()  # held while a request is in flight
        self._episode = _Episode()

    def _info(self, view: dict[str, Any]) -> dict[str, Any]:
        info = {"won": view["won"], "admissible_commands": view["admissible_commands"],
                "game": self.game_id, "task_type": self.task_type, "steps": self._episode.steps}
        if self.expert:
            info["expert_plan"] = view["expert_plan"]
        return info

    def _request(self, message: tuple, timeout: float) -> dict[str, Any]:
        with self._busy:
            worker = self._worker  # read under the lock: close() may be handing it back
            if worker is None:
                raise WorkerError("the environment is closed")
            try:
                return worker.request(message, timeout)
            except WorkerError:
                self._worker = None  # a failed engine is never reused
                self.pool.discard(worker)
                raise

    def _load(self) -> tuple[str, dict[str, Any]]:
        timeout = PLANNER_TIMEOUT_S if self.expert else LOAD_TIMEOUT_S
        view = self._request(("load", str(self.game_path), self.expert), timeout)
        self._episode = _Episode()
        self._episode.info = self._info(view)
        return clean_observation(view["feedback"], first=True), self._episode.info

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        # ALFWorld games are deterministic: `seed` has nothing to choose.
        if self._worker is None:
            self._worker = self.pool.acquire()
        return self._load()

    async def areset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        if self._worker is None:
            self._worker = await self.pool.aacquire()
        return await asyncio.to_thread(self._load)

    def step(self, action: str) -> StepResult:
        ep = self._episode
        if ep.info is None:
            raise RuntimeError("step() before reset()")
        if ep.terminated or ep.truncated:
            raise EpisodeEnded("terminated" if ep.terminated else "truncated")
        view = self._request(("step", action), PLANNER_TIMEOUT_S if self.expert else STEP_TIMEOUT_S)
        ep.steps += 1
        ep.info = self._info(view)
        ep.terminated = view["won"] or view["done"]
        ep.truncated = not ep.terminated and ep.steps >= self.max_steps
        reward = 1.0 if view["won"] else 0.0
        return clean_observation(view["feedback"]), reward, ep.terminated, ep.truncated, ep.info

    async def astep(self, action: str) -> StepResult:
        return await asyncio.to_thread(self.step, action)

    @property
    def worker_pid(self) -> int | None:
        return self._worker.process.pid if self._worker else None

    def close(self) -> None:
        if self._busy.acquire(blocking=False):
            worker, self._worker = self._worker, None
            self._busy.release()
            if worker is not None:
                self.pool.release(worker)
            return
        worker, self._worker = self._worker, None
        if worker is not None:
            # A step is still running in a thread (the episode was cancelled): killing the
            # worker ends that step with an error nobody waits for, instead of hanging here.
            self.pool.discard(worker)

    async def aclose(self) -> None:
        self.close()  # never blocks long: a busy worker is killed, not awaited
