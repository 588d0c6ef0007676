"""A cap on the requests one model has in flight, whichever episodes and roles send them.

`--max-concurrency` bounds episodes; this bounds calls to one model. They differ when a rate-limited
provider or a small server should see fewer requests than there are episodes, and when actor and
reflector share a model: both roles hold the one instance `build_models` makes, so one limit.
Waiting callers are served first come, first served (asyncio.Semaphore is FIFO), so no episode
starves, and a slow request holds only its own slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from reinagent.llm.base import LLM, Completion, GenerationParams, Layer
from reinagent.records import Message


class LimitedLLM(Layer):
    def __init__(self, inner: LLM, limit: int):
        if limit <= 0:
            raise ValueError(f"a model's concurrency limit must be positive, got {limit}")
        super().__init__(inner)
        self.limit = limit
        # Without --max-concurrency the runner keeps as many episodes going as the model takes.
        self.default_concurrency = limit
        self.in_flight = 0
        self.peak_in_flight = 0
        # A semaphore belongs to one event loop; a model reused under a new loop gets a new one.
        self._semaphores: dict[int, asyncio.Semaphore] = {}

    def _semaphore(self) -> asyncio.Semaphore:
        loop = id(asyncio.get_running_loop())
        sem = self._semaphores.get(loop)
        if sem is None:
            self._semaphores = {loop: (sem := asyncio.Semaphore(self.limit))}
        return sem

    async def generate(
        self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None
    ) -> Completion:
        async with self._semaphore():
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                return await self.inner.generate(messages, params, rollout_id=rollout_id)
            finally:
                self.in_flight -= 1

