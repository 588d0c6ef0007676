"""A batching scheduler for a local transformers model: one worker thread owns the model and
decodes every pending request together, step by step (continuous batching).

`submit` may be called from any number of asyncio episodes (and event loops); each request is
prefilled on its own (reusing a cached prompt prefix when one matches), joins the running batch
between two decoding steps, and is answered the moment it stops, on its own stop strings, token
budget or end-of-turn token. A request that fails (a prompt longer than the context) fails alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reinagent.errors import ModelError, ReinagentError
from reinagent.llm.base import Completion, GenerationParams, strip_stop
from reinagent.records import Message


@dataclass
class LoadedModel:
    """What the engine needs from a model; `local.py` builds it from a HF directory or GGUF file."""

    model: Any  # a transformers causal LM, in eval mode
    encode: Callable[[Sequence[Message]], list[int]]  # chat messages -> prompt token ids
    decode: Callable[[list[int]], str]
    eos_ids: frozenset[int]
    max_context: int
    info: dict[str, Any] = field(default_factory=dict)  # load time and source, for reports


@dataclass(eq=False)
class _Request:
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


_CLOSE = object()


class BatchEngine:
    def __init__(self, load: Callable[[], LoadedModel], *, name: str, max_batch: int = 8, prefix_cache_mb: int = 256):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.name = name
        self.max_batch = max_batch
        self.prefix_cache_mb = prefix_cache_mb
        self._load = load
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.loaded: LoadedModel | None = None
        self.prefix: Any = None  # kv.PrefixCache once loaded
        self.stats = {"steps": 0, "max_rows": 0, "prefill_tokens": 0}

    # ----- called on event loops -------------------------------------------------------------

    def submit(self, messages: Sequence[Message], params: GenerationParams, rollout_id: str | None) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        req = _Request(messages, params, rollout_id, loop, loop.create_future(), time.perf_counter())
        # A cancelled episode (timeout, Ctrl-C) frees its batch row at the next step.
        req.future.add_done_callback(lambda f: setattr(req, "cancelled", f.cancelled()))
        with self._lock:
            if self._error is not None or self._stop.is_set():  # fail fast, like the callers before
                req.future.set_exception(self._error or ModelError(f"{self.name} was closed"))
                return req.future
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"reinagent-{self.name}", daemon=True)
                self._thread.start()
            self._queue.put(req)
        return req.future

    def close(self, timeout: float = 30.0) -> None:
        """Stop the worker (blocking); requests still waiting fail with ModelError."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._stop.set()
            self._queue.put(_CLOSE)  # wakes a worker that waits for work
        thread.join(timeout)

    # ----- the worker thread -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            import torch

            from reinagent.llm.kv import BatchKV, PrefixCache

            self.loaded = self._load()
        except BaseException as err:  # noqa: BLE001 - every waiting episode must hear why
            with self._lock:  # from now on submit fails fast; all that came before is queued
                self._error = err if isinstance(err, ReinagentError | ModelError) else ModelError(f"{self.name}: could not load the model: {err}")
            self._fail_queued(self._error)
            return
        self.prefix = PrefixCache(self.prefix_cache_mb * 2**20)
        self._batch = BatchKV()
        self._active: list[_Request] = []
        with torch.inference_mode():
            while not self._stop.is_set():
                try:
                    self._admit(block=not self._active)
                    if self._active and not self._stop.is_set():
                        self._step()
                except Exception as err:  # noqa: BLE001 - no row of a failed batch can be trusted
                    for req in self._active:
                        self._settle(req, error=ModelError(f"{self.name}: generation failed: {err}"))
                    self._active, self._batch = [], BatchKV()
        for req in self._active:
            self._settle(req, error=ModelError(f"{self.name} was closed"))
        self._fail_queued(ModelError(f"{self.name} was closed"))

    def _fail_queued(self, error: BaseException) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not _CLOSE:
                self._settle(item, error=error)

    def _admit(self, block: bool) -> None:
        """Prefill waiting requests into free batch rows."""
        rows, joined = [], []
        while len(self._active) + len(joined) < self.max_batch and not self._stop.is_set():
            try:
                item = self._queue.get(block=block and not joined)
            except queue.Empty:
                break
            if item is _CLOSE:
                break
            if item.cancelled:
                continue
            try:
                logits, kv = self._prefill(item)
            except Exception as err:  # noqa: BLE001 - this request alone is bad
                self._settle(item, error=err if isinstance(err, ModelError) else ModelError(f"{self.name}: {err}"))
                continue
            if kv is None or self._accept(item, logits):
                continue
            rows.append(kv)
            joined.append(item)
        self._active += joined  # first: should the merge fail, these fail with the batch
        self._batch.add(rows)
        self.stats["max_rows"] = max(self.stats["max_rows"], len(self._active))

    def _prefill(self, req: _Request) -> tuple[Any, Any]:
        import torch

        from reinagent.llm.kv import SlabLayer, empty_cache, kv_of, make_cache

        lm = self.loaded
        assert lm is not None
        req.prompt = lm.encode(req.messages)
        if len(req.prompt) >= lm.max_context:
            raise ModelError(f"{self.name}: the prompt has {len(req.prompt)} tokens; the model's context is {lm.max_context}")
        if req.params.max_tokens <= 0:
            self._finish(req, "length")
            return None, None
        if not req.params.greedy:
            req.generator = torch.Generator(device=lm.model.device).manual_seed(_seed(req.params.seed, req.rollout_id))
        n, past = self.prefix.lookup(req.prompt)
        total = len(req.prompt)
        cache = make_cache([SlabLayer(k, v, reserve=total) for k, v in past]) if n else empty_cache()
        device = lm.model.device
        ids = torch.tensor([req.prompt[n:]], device=device)
        positions = torch.arange(n, total, device=device).unsqueeze(0)
        out = lm.model(input_ids=ids, position_ids=positions, past_key_values=cache, use_cache=True, logits_to_keep=1)
        self.stats["prefill_tokens"] += total - n
        kv = kv_of(cache)
        self.prefix.store(req.prompt, kv)
        return out.logits[0, -1], kv

    def _step(self) -> None:
        import torch

        lm = self.loaded
        assert lm is not None
        device = lm.model.device
        ids = torch.tensor([[r.tokens[-1]] for r in self._active], device=device)
        positions = torch.tensor([[len(r.prompt) + len(r.tokens) - 1] for r in self._active], device=device)
        mask = self._batch.grow_mask()
        out = lm.model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=self._batch.cache, use_cache=True)
        logits = out.logits[:, -1, :]
        self.stats["steps"] += 1
        keep = [i for i, req in enumerate(self._active) if not self._accept(req, logits[i])]
        if len(keep) < len(self._active):
            self._active = [self._active[i] for i in keep]
            self._batch.keep(keep)

    def _accept(self, req: _Request, logits: Any) -> bool:
        """Take the next token of `req` from its logits; True when the request is done."""
        if req.cancelled:
            return True
        token = _pick(logits, req.params, req.generator)
        req.generated += 1
        lm = self.loaded
        assert lm is not None
        if token in lm.eos_ids:
            return self._finish(req, "stop")
        req.tokens.append(token)
        if req.params.stop:
            text = lm.decode(req.tokens)
            if strip_stop(text, req.params.stop) != text:
                return self._finish(req, "stop")
        if len(req.tokens) >= req.params.max_tokens or len(req.prompt) + len(req.tokens) >= lm.max_context:
            return self._finish(req, "length")
        return False

    def _finish(self, req: _Request, reason: str) -> bool:
        lm = self.loaded
        assert lm is not None
        text = strip_stop(lm.decode(req.tokens), req.params.stop)
        completion = Completion(
            text=text,
            prompt_tokens=len(req.prompt),
            completion_tokens=req.generated,
            latency_s=time.perf_counter() - req.start,
            cost_usd=0.0,
            model=self.name,
            finish_reason=reason,
        )
        self._settle(req, result=completion)
        return True

    def _settle(self, req: _Request, *, result: Completion | None = None, error: BaseException | None = None) -> None:
        def settle() -> None:
            if req.future.done():
                return
            if error is not None:
                req.future.set_exception(error)
            else:
                req.future.set_result(result)

        try:
            req.loop.call_soon_threadsafe(settle)
        except RuntimeError:  # its event loop is closed: nobody is waiting any more
            pass


def _pick(logits: Any, params: GenerationParams, generator: Any) -> int:
    import torch

    if params.greedy:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    if params.top_p is not None and params.top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        # Keep the smallest set whose mass reaches top_p (the first token always stays).
        drop = sorted_probs.cumsum(-1) - sorted_probs >= params.top_p
        probs = probs.scatter(-1, order, sorted_probs.masked_fill(drop, 0.0))
    return int(torch.multinomial(probs, 1, generator=generator))


def _seed(seed: int | None, rollout_id: str | None) -> int:
    """A stable seed per (params.seed, rollout): Python's hash() changes between processes."""
    digest = hashlib.sha256(f"{seed}\x00{rollout_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF
