"""The prefill side of the batching engine (`batching.BatchEngine` inherits it): a thread that
takes submitted requests as rows free up, encodes and prefills them, and hands them to the
decoding thread.

Requests are prefilled in arrival order, one at a time, so that the first of several new
episodes fills the prefix cache for the others; the short tails left behind a shared cached
prefix are then prefilled together (see `prefill.py`). Each request is handed over the moment it
is ready, so the batch can start on the first while the others are still being prefilled.
"""

from __future__ import annotations

import asyncio
import hashlib
import queue
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from reinagent.errors import ModelError
from reinagent.llm.base import GenerationParams
from reinagent.records import Message

CLOSE = object()  # put on a queue to wake and stop the thread that reads it


@dataclass(eq=False)
class EngineRequest:
    """One generation request as the engine threads see it (shared by admission and decoding)."""

    messages: Sequence[Message]
    params: GenerationParams
    rollout_id: str | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    start: float
    cancelled: bool = False
    prompt: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)  # generated so far, end-of-turn token excluded
    generated: int = 0  # tokens the model produced, end-of-turn token included (the usage figure)
    generator: Any = None
    holds_row: bool = False


class PrefillSide:
    # Provided by BatchEngine, as are _settle, _accept and _finish.
    name: str
    loaded: Any
    prefix: Any
    stats: dict[str, int]
    _stop: Any
    _rows: Any
    _queue: queue.SimpleQueue
    _ready: queue.SimpleQueue

    def _prefill_loop(self) -> None:
        import torch

        lm = self.loaded
        assert lm is not None
        if lm.model.device.type == "cpu":  # OpenMP's thread count is per thread
            torch.set_num_threads(int(lm.info.get("prefill_threads", 1)))
        with torch.inference_mode():
            while not self._stop.is_set():
                self._prefill_round(block=True)

    def _prefill_round(self, block: bool) -> int:
        """Take queued requests while rows are free (waiting for the first when `block`),
        prefill them and hand them to the decoder; how many were taken."""
        waiting, handed = self._take_queued(block), set()
        try:
            for req, kv in self._prefill_all(waiting):
                handed.add(id(req))
                self._ready.put((req, kv))  # the decoder takes it at its next step
        except Exception as err:  # noqa: BLE001 - only those not handed over are lost
            for req in waiting:
                if id(req) not in handed:
                    self._settle(req, error=ModelError(f"{self.name}: prefill failed: {err}"))
        return len(waiting)

    def _take_queued(self, block: bool = True) -> list[EngineRequest]:
        """Wait for a free row and a request (unless not `block`); then take more while both last."""
        waiting: list[EngineRequest] = []
        while not self._stop.is_set():
            first = block and not waiting  # the first waits for a free row and a request
            if not self._rows.acquire(blocking=first):
                break
            try:
                item = self._queue.get(block=first)
            except queue.Empty:
                self._rows.release()
                break
            if item is CLOSE or self._stop.is_set():
                self._rows.release()
                if item is not CLOSE:
                    self._queue.put(item)  # answered by _fail_queued
                break
            item.holds_row = True
            if item.cancelled:
                self._settle(item, error=asyncio.CancelledError())
                continue
            waiting.append(item)
        return waiting

    def _prefill_all(self, waiting: list[EngineRequest]) -> Iterator[tuple[EngineRequest, Any]]:
        """Prefill each request and yield those still generating, with their caches, as soon as
        they are ready. In arrival order, one at a time (the first of several new episodes fills
        the prefix cache for the others), except the short tails behind a shared cached prefix,
        which are prefilled together at the end."""
        from reinagent.llm.prefill import GROUP_TAIL

        groups: dict[int, list[tuple[EngineRequest, int, Any]]] = {}
        for req in waiting:
            try:
                if not self._start(req):
                    continue
                n, entry, past = self.prefix.lookup(req.prompt)
                if entry is not None and len(req.prompt) - n <= GROUP_TAIL:
                    groups.setdefault(entry, []).append((req, n, past))
                else:
                    yield from self._prefill([req], n, past)
            except Exception as err:  # noqa: BLE001 - this request alone is bad
                self._fail(req, err)
        for members in groups.values():
            n = min(m[1] for m in members)  # every member starts with the entry's first n tokens
            past = [(k[:, :, :n], v[:, :, :n]) for k, v in members[0][2]]
            try:
                yield from self._prefill([m[0] for m in members], n, past)
            except Exception:  # noqa: BLE001 - find the culprit: each on its own fails alone
                for req, n, past in members:
                    try:
                        yield from self._prefill([req], n, past)
                    except Exception as err:  # noqa: BLE001
                        self._fail(req, err)

    def _fail(self, req: EngineRequest, err: Exception) -> None:
        self._settle(req, error=err if isinstance(err, ModelError) else ModelError(f"{self.name}: {err}"))

    def _start(self, req: EngineRequest) -> bool:
        """Encode and check a new request; False when it is already answered (no tokens wanted)."""
        import torch

        lm = self.loaded
        assert lm is not None
        req.prompt = lm.encode(req.messages)
        if len(req.prompt) >= lm.max_context:
            raise ModelError(f"{self.name}: the prompt has {len(req.prompt)} tokens; the model's context is {lm.max_context}")
        if req.params.max_tokens <= 0:
            self._finish(req, "length")
            return False
        if not req.params.greedy:
            req.generator = torch.Generator(device=lm.model.device).manual_seed(_seed(req.params.seed, req.rollout_id))
        return True

    def _prefill(self, reqs: list[EngineRequest], n: int, past: Any) -> list[tuple[EngineRequest, Any]]:
        from reinagent.llm.prefill import prefill

        lm = self.loaded
        assert lm is not None
        results = prefill(lm.model, [req.prompt for req in reqs], n, past)
        self.stats["prefill_tokens"] += sum(len(req.prompt) - n for req in reqs)
        self.stats["prefill_calls"] += 1
        ready = []
        for req, (logits, kv) in zip(reqs, results, strict=True):
            self.prefix.store(req.prompt, kv)
            if not self._accept(req, logits):
                ready.append((req, kv))
        return ready


def _seed(seed: int | None, rollout_id: str | None) -> int:
    """A stable seed per (params.seed, rollout): Python's hash() changes between processes."""
    digest = hashlib.sha256(f"{seed}\x00{rollout_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF
