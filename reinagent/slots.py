"""The run's episode slots: at most `--max-concurrency` episodes at once, handed out by priority.

An asyncio.Semaphore serves its waiters first come, first served. The pipeline schedule queues
every task's trial 1 at the start, so a task's retry (its reflection and trial 2) waited behind
every trial 1 not yet begun: on HumanEval with 32 slots no retry started before minute 19 of a
30-minute run, and the retries then ran at the end with few calls in flight, where the engine is
slow (programming_runs/qwen2.5-coder-1.5b-split-zen4: in-flight episodes fell from 21 to 1 over the
last nine minutes). Here a waiter carries a key and the lowest key goes first; the pipeline keys
by (-trial, task order), so a retry goes ahead of a new task's first trial, the order of the
reference programming code's loop (one task's trials, then the next task's). The order alone did
not shorten that run: re-made this way it took the same 34 min 31 s, the last first trials now
holding the end (docs/models.md, "The retry order").
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

FIRST = (0,)  # the key of a plain `async with slots:` (reflections a resume writes first)


class Slots:
    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"slots: at least 1, got {n}")
        self.free = n
        self._waiting: list[tuple[tuple, int, asyncio.Future]] = []
        self._order = itertools.count()  # equal keys: first come, first served

    async def acquire(self, key: tuple = FIRST) -> None:
        if self.free and not self._waiting:
            self.free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (key, next(self._order), waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed the slot just as it was cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, waiter = heapq.heappop(self._waiting)
            if not waiter.done():  # a cancelled waiter is done: skip it
                waiter.set_result(None)
                return
        self.free += 1

    async def __aenter__(self) -> "Slots":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()
