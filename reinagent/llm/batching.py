"""A batching scheduler for a local transformers model: a decoding thread steps every running
request together, one token at a time (continuous batching), while a prefill thread prepares the
requests that come next.

`submit` may be called from any number of asyncio episodes (and event loops). Each request is
prefilled (reusing a cached prompt prefix when one matches, and together with the requests
waiting behind the same prefix), joins the running batch between two decoding steps, and is
answered the moment it stops, on its own stop strings, token budget or end-of-turn token. A
request that fails (a prompt longer than the context) fails alone.

Two threads, because prefilling and decoding want different things from a CPU: a prompt tail is
compute-bound and a decoding step is bound by streaming the weights, so on two cores one of each
runs side by side at nearly full speed (measured: a batch-8 step 117 -> 122 ms while a 60-token
tail prefills beside it, 196 -> 205 ms), and the batch no longer stops for every newcomer.
Rows are bounded by a semaphore: a request holds one from the moment its prefill starts until it
is answered, so prefilled requests never outnumber the free rows.

With `threads=False` no thread starts: the caller drives the engine itself, `prefill()` admitting
queued requests into free rows and `step()` decoding one token for every row. The tests use it to
make scheduling (rows joining a running batch, slot reuse, prefix hits) a fixed sequence of
events rather than a race between threads.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reinagent.errors import ModelError, ReinagentError
from reinagent.llm.admission import CLOSE, EngineRequest, PrefillSide
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


def pad_from(rows: int) -> int:
    """The smallest batch that packed CPU weights pad up to `rows` rows (see `packed.py`)."""
    return max(2, rows // 2)


class BatchEngine(PrefillSide):
    def __init__(
        self, load: Callable[[], LoadedModel], *, name: str, max_batch: int = 8, prefix_cache_mb: int = 256, compact_below: int | None = None,
        threads: bool = True,
    ):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.name = name
        self.max_batch = max_batch
        self.prefix_cache_mb = prefix_cache_mb
        # Finished rows leave the batch once fewer than this many are still generating
        # (None: decided when the model has loaded).
        self.compact_below = compact_below
        self._load = load
        self.threads = threads  # False: driven by the caller through prefill() and step()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # submitted -> prefill thread
        self._ready: queue.SimpleQueue = queue.SimpleQueue()  # prefilled (request, cache) -> decoding thread
        self._rows = threading.Semaphore(max_batch)
        self._thread: threading.Thread | None = None
        self._prefiller: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.loaded: LoadedModel | None = None
        self.prefix: Any = None  # kv.PrefixCache once loaded
        self._active: list[EngineRequest | None] = []  # one per batch row; None: finished, slot free
        self._batch: Any = None  # kv.BatchKV once loaded
        self.stats = {"steps": 0, "max_rows": 0, "prefill_tokens": 0, "prefill_calls": 0, "slot_reuses": 0}

    # ----- called on event loops -------------------------------------------------------------

    def submit(self, messages: Sequence[Message], params: GenerationParams, rollout_id: str | None) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        req = EngineRequest(messages, params, rollout_id, loop, loop.create_future(), time.perf_counter())
        # A cancelled episode (timeout, Ctrl-C) frees its batch row at the next step.
        req.future.add_done_callback(lambda f: setattr(req, "cancelled", f.cancelled()))
        with self._lock:
            if self._error is not None or self._stop.is_set():  # fail fast, like the callers before
                req.future.set_exception(self._error or ModelError(f"{self.name} was closed"))
                return req.future
            if self._thread is None and self.threads:
                self._thread = threading.Thread(target=self._run, name=f"reinagent-{self.name}", daemon=True)
                self._thread.start()
            self._queue.put(req)
        return req.future

    def close(self, timeout: float = 30.0) -> None:
        """Stop both threads (blocking); requests still waiting fail with ModelError."""
        if not self.threads:
            with self._lock:
                if self._stop.is_set():
                    return
                self._stop.set()
            self._shut_down()
            return
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._stop.set()
            # Wake whichever waits: the prefiller for a row or for work, the decoder for work.
            self._rows.release(self.max_batch)
            self._queue.put(CLOSE)
            self._ready.put(CLOSE)
        thread.join(timeout)

    # ----- driven by the caller (threads=False) ------------------------------------------------

    def prefill(self) -> int:
        """Admit queued requests into free rows and prefill them; how many were admitted."""
        if not self._driven():
            return 0
        import torch

        with torch.inference_mode():
            return self._prefill_round(block=False)

    def step(self) -> int:
        """Place the prefilled requests into the batch and decode one token for every row; how
        many rows were decoded (0: the batch is empty)."""
        if not self._driven():
            return 0
        import torch

        with torch.inference_mode():
            return self._decode_round(block=False)

    def _driven(self) -> bool:
        if self.threads:
            raise RuntimeError("prefill() and step() drive an engine made with threads=False")
        if self._stop.is_set() or self._error is not None:
            return False
        return self.loaded is not None or self._load_model()

    # ----- the decoding thread ---------------------------------------------------------------

    def _load_model(self) -> bool:
        """Load the model and make the caches; on failure fail every queued request."""
        try:
            from reinagent.llm.kv import BatchKV, PrefixCache

            loaded = self._load()
        except BaseException as err:  # noqa: BLE001 - every waiting episode must hear why
            with self._lock:  # from now on submit fails fast; all that came before is queued
                self._error = err if isinstance(err, ReinagentError | ModelError) else ModelError(f"{self.name}: could not load the model: {err}")
            self._fail_queued(self._error)
            return False
        self.prefix = PrefixCache(self.prefix_cache_mb * 2**20)
        if self.compact_below is None:
            # With packed weights a batch of at least half the rows costs the same as a full one,
            # so finished rows may wait there for a newcomer; otherwise every row costs its share.
            self.compact_below = pad_from(self.max_batch) if loaded.info.get("packed_linears") else self.max_batch + 1
        self._batch = BatchKV()
        self.loaded = loaded
        return True

    def _run(self) -> None:
        if not self._load_model():
            return
        import torch

        self._prefiller = threading.Thread(target=self._prefill_loop, name=f"reinagent-{self.name}-prefill", daemon=True)
        self._prefiller.start()
        with torch.inference_mode():
            while not self._stop.is_set():
                self._decode_round(block=True)
        self._prefiller.join()
        self._shut_down()

    def _decode_round(self, block: bool) -> int:
        """Take what is prefilled (waiting for it when `block` and the batch is empty), then
        decode one step; the number of rows decoded."""
        try:
            self._take_ready(block=block and not self._active)
            if self._active and not self._stop.is_set():
                rows = len(self._active)
                self._step()
                return rows
        except Exception as err:  # noqa: BLE001 - no row of a failed batch can be trusted
            from reinagent.llm.kv import BatchKV

            for req in filter(None, self._active):
                self._settle(req, error=ModelError(f"{self.name}: generation failed: {err}"))
            self._active, self._batch = [], BatchKV()
        return 0

    def _shut_down(self) -> None:
        for req in filter(None, self._active):
            self._settle(req, error=ModelError(f"{self.name} was closed"))
        self._active = []
        self._fail_queued(ModelError(f"{self.name} was closed"))

    def _fail_queued(self, error: BaseException) -> None:
        for waiting in (self._queue, self._ready):
            while not waiting.empty():
                item = waiting.get_nowait()
                if item is not CLOSE:
                    self._settle(item[0] if isinstance(item, tuple) else item, error=error)

    def _take_ready(self, block: bool) -> None:
        """Move prefilled requests into the batch; wait for one when the batch is empty."""
        ready = []
        while True:
            try:
                item = self._ready.get(block=block and not ready)
            except queue.Empty:
                break
            if item is CLOSE:
                break
            ready.append(item)
        if ready:
            self._place(ready)

    def _place(self, ready: list[tuple[EngineRequest, Any]]) -> None:
        """Give each prefilled request a row: a finished row's slot when it fits, else a new row."""
        fresh = []
        for req, kv in ready:
            slot = next((i for i, r in enumerate(self._active) if r is None), None)
            if slot is not None and self._batch.put(slot, kv):
                self._active[slot] = req
                self.stats["slot_reuses"] += 1
            else:
                fresh.append((req, kv))
        if fresh:
            live = [i for i, r in enumerate(self._active) if r is not None]
            # First: should the copy fail, these fail with the batch.
            self._active = [self._active[i] for i in live] + [req for req, _ in fresh]
            self._batch.rebuild(live, [kv for _, kv in fresh])
        self.stats["max_rows"] = max(self.stats["max_rows"], sum(r is not None for r in self._active))

    def _step(self) -> None:
        import torch

        lm = self.loaded
        assert lm is not None
        device = lm.model.device
        rows = self._active
        # A finished row still computes (a dummy token at position 0) until its slot is reused.
        ids = torch.tensor([[r.tokens[-1] if r else 0] for r in rows], device=device)
        positions = torch.tensor([[len(r.prompt) + len(r.tokens) - 1 if r else 0] for r in rows], device=device)
        mask = self._batch.grow_mask()
        out = lm.model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=self._batch.cache, use_cache=True)
        logits = out.logits[:, -1, :]
        self.stats["steps"] += 1
        for i, req in enumerate(rows):
            if req is not None and self._accept(req, logits[i]):
                rows[i] = None
        live = [i for i, r in enumerate(rows) if r is not None]
        if len(live) < len(rows) and len(live) < (self.compact_below or 0):
            self._active = [rows[i] for i in live]
            self._batch.rebuild(live)

    def _accept(self, req: EngineRequest, logits: Any) -> bool:
        """Take the next token of `req` from its logits; True when the request is done."""
        if req.cancelled:  # its episode timed out or was interrupted: free the row
            self._settle(req, error=asyncio.CancelledError())
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

    def _finish(self, req: EngineRequest, reason: str) -> bool:
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

    def _settle(self, req: EngineRequest, *, result: Completion | None = None, error: BaseException | None = None) -> None:
        if req.holds_row:  # whichever thread answers a request owns it: no race on the flag
            req.holds_row = False
            self._rows.release()
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
