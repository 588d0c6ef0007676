"""The `local` engine (`ov` is an alias): a model on OpenVINO GenAI's continuous batching, run in a
child process of its own (ov_process.py: a step holds the GIL) by the `OVEngine` below.

Which file is loaded, and the f32 IR made once for precision `exact`, is `reinagent.llm.local`'s
business; the preparation runs in the worker thread on the first request, so a run that never
asks the model never pays for it.

One worker thread owns the `ContinuousBatchingPipeline`: it admits new requests between
`step()` calls, and each `step()` advances every running request by a token (prefill is split
and fused by the engine's scheduler). Each request resolves an asyncio future on the caller's
loop. Sampling, stop strings, the token budget and an optional regex constraint
(`reinagent.llm.constrained`) are per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import os
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError, ModelError, env_count
from reinagent.llm import cpu_precision
from reinagent.llm.base import LLM, Completion, GenerationParams, call_seed, strip_stop
from reinagent.llm.constrained import regex_of
from reinagent.llm.ov_process import acquire, release
from reinagent.records import Message

_CACHE_GB = 2  # KV cache: 8 ReAct prompts of ~4k tokens need ~1.5 GB at f32 for the 135M model


@dataclass
class _Request:
    messages: list[Message]
    params: GenerationParams
    rollout_id: str | None
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    started: float = field(default_factory=time.perf_counter)
    prompt_tokens: int = 0
    handle: Any = None


class OpenVINOLLM(LLM):
    supports_regex = True  # reinagent.llm.constrained.ConstrainedLLM may wrap it

    def __init__(self, path: str | None = None, *, precision: str | None = None, max_batch: int | None = None,
                 name: str | None = None, deterministic: bool = False):
        from reinagent.llm.local import check_exportable, check_precision, embedded_gguf, existing

        self.precision = check_precision(precision)
        if importlib.util.find_spec("openvino_genai") is None:
            raise ConfigError("model 'local' needs OpenVINO GenAI: pip install 'reinagent[local]'")
        self.name = name or ("local" if path is None else f"local:{path}")
        self.source = embedded_gguf() if path is None else existing(path)
        check_exportable(self.source, self.precision)  # exact from a GGUF file, or a HF dir: optimum-intel
        # deterministic: one sequence at a time and no prefix cache, so a greedy answer depends on
        # its prompt only, not on what else was in the batch (Q4 kernels are not batch-invariant)
        self.deterministic = deterministic
        self.max_batch = 1 if deterministic else max_batch or env_count("REINAGENT_LOCAL_BATCH", 8)
        self.default_concurrency = self.max_batch
        self._engine: OVEngine | None = None

    async def generate(self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None) -> Completion:
        if self._engine is None:
            self._engine = acquire(self, OVEngine, _encode)
        completion = await self._engine.submit(list(messages), params, rollout_id)
        completion.model = self.name
        return completion

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None and release(engine):
            await asyncio.to_thread(engine.close)

    @property
    def load_info(self) -> dict[str, Any]:
        return dict(self._engine.info) if self._engine else {}

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        if self._engine is None:
            self._engine = acquire(self, OVEngine, _encode)
        return self._engine.count(messages)


class OVEngine:
    """The worker thread and its pipeline; `submit` may be called from any event loop."""

    def __init__(self, source: Path, precision: str, max_batch: int, cache_root: str | None = None,
                 deterministic: bool = False):
        self.source, self.precision, self.max_batch, self.cache_root = source, precision, max_batch, cache_root
        self.deterministic = deterministic
        self.tokenizer = None  # once loaded; shared with `count` under _tokenizer_lock
        self._tokenizer_lock = threading.Lock()
        self._loaded = threading.Event()  # set when the load ended, well or not
        self.info: dict[str, Any] = {}
        self._inbox: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._cancelled = False  # worker thread: requests cancelled since its last step
        self.pipe = None  # the pipeline, once the worker thread loaded it
        self.draft_tokens = 0  # > 0: a draft model proposes this many tokens a step

    @property
    def ready(self) -> bool:
        """The worker thread has loaded the pipeline."""
        return self.pipe is not None

    def kv_cache(self) -> dict[str, float]:
        """The KV pool as the pipeline reports it: its size in bytes, and the peak share in use (percent)."""
        if self.pipe is None:
            return {}
        metrics = self.pipe.get_metrics()
        return {"kv_cache_bytes": metrics.kv_cache_size_in_bytes, "max_cache_usage": metrics.max_cache_usage}

    def count(self, messages: Sequence[Message]) -> int | None:
        """The prompt's tokens as this engine will encode it. It loads the model first if no call
        has (blocking, once): a budget must decide alike whether the response cache answers the
        calls or the model does. None when the model cannot load (the call then reports why)."""
        if self.tokenizer is None:
            with self._lock:
                if self._thread is None:
                    if self._closed:
                        return None
                    self._thread = threading.Thread(target=self._run, name=f"ov-{self.source.name}", daemon=True)
                    self._thread.start()
            self._loaded.wait()
        if self.tokenizer is None:
            return None
        with self._tokenizer_lock:
            return int(_encode(self.tokenizer, list(messages)).get_shape()[-1])

    async def submit(self, messages: list[Message], params: GenerationParams, rollout_id: str | None) -> Completion:
        loop = asyncio.get_running_loop()
        request = _Request(messages, params, rollout_id, loop.create_future(), loop)
        with self._lock:
            if self._closed:
                raise ModelError(f"model {self.source.name} was closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"ov-{self.source.name}", daemon=True)
                self._thread.start()
            self._inbox.put(request)
        return await request.future

    def close(self, timeout: float | None = None) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
        self._inbox.put(None)
        if thread is not None:
            thread.join(timeout)

    # ----- the worker thread -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            pipe, tokenizer = self._load()
        except BaseException as err:  # noqa: BLE001 - every waiting caller gets the reason
            self._loaded.set()
            # a ConfigError (a full or read-only cache, a file the engine cannot open) names its fix as it is
            self._drain_failing(err if isinstance(err, ConfigError) else
                                ModelError(f"model {self.source.name} failed to load: {type(err).__name__}: {err}"))
            return
        self._loaded.set()
        active: dict[int, _Request] = {}
        while True:
            # Block for work only when nothing runs; otherwise admit what arrived and step.
            try:
                incoming = [self._inbox.get()] if not active else []
                while True:
                    incoming.append(self._inbox.get_nowait())
            except queue.Empty:
                pass
            if None in incoming:
                for req in active.values():
                    req.handle.cancel()
                self._free_cancelled(pipe, bool(active))
                for req in [r for r in incoming if r is not None] + list(active.values()):
                    _resolve(req, exc=ModelError("model closed while the request ran"))
                return
            for req in incoming:
                self._admit(pipe, tokenizer, req, active)
            if not active:
                continue
            try:
                pipe.step()
            except Exception as err:  # noqa: BLE001 - fail what ran; later requests may still work
                for req in active.values():
                    _resolve(req, exc=ModelError(f"OpenVINO step failed: {type(err).__name__}: {err}"))
                active.clear()
                continue
            self._collect(tokenizer, active)
            if not active:
                self._free_cancelled(pipe, self._cancelled)

    def _free_cancelled(self, pipe, cancelled: bool) -> None:
        """One more step after cancelling requests: a cancelled request's KV blocks are freed only
        by the next step, and without one (the last requests were cancelled, as Ctrl-C does) the
        pipeline is destroyed holding them and prints "[ERROR] ... leaked blocks" lines."""
        self._cancelled = False
        if not cancelled:
            return
        with contextlib.suppress(Exception):  # only freeing: nothing waits on this step
            pipe.step()

    def _load(self):
        import openvino_genai as og

        from reinagent.llm.local import prepare

        started = time.perf_counter()
        prepared = prepare(self.source, self.precision, self.cache_root)
        scheduler = og.SchedulerConfig()
        # The KV pool grows on demand up to this size and is never given back: the RSS of a run
        # with longer prompts (REFLEXION's memory) climbs to it and stays (perf/kv_pool.py).
        scheduler.cache_size = env_count("REINAGENT_OV_CACHE_GB", _CACHE_GB)  # whole GB
        scheduler.max_num_seqs = self.max_batch
        scheduler.enable_prefix_caching = not self.deterministic  # actor turns share the few-shot prompt
        scheduler.dynamic_split_fuse = True
        scheduler.max_num_batched_tokens = 1024
        choice = cpu_precision.choose(self.precision)  # bf16 decodes slower on AMX CPUs: see there
        properties: dict[str, Any] = choice.properties(self.precision)
        choice.say()
        if os.environ.get("REINAGENT_OV_THREADS"):
            properties["INFERENCE_NUM_THREADS"] = env_count("REINAGENT_OV_THREADS", 1)
        if cpu_precision.dq_group() is not None:  # the plugin's 8-bit activations, per this many inputs
            properties["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = cpu_precision.dq_group()
        draft = draft_model()
        if draft is not None:  # speculative decoding: same greedy text, fewer steps of the big model
            properties["draft_model"] = og.draft_model(str(draft), "CPU")
            self.draft_tokens = env_count("REINAGENT_OV_DRAFT_TOKENS", 4)
        pipe = self.pipe = og.ContinuousBatchingPipeline(str(prepared.path), scheduler, "CPU", properties)
        tokenizer = self.tokenizer = pipe.get_tokenizer()
        self.info = {
            "source": prepared.source, "path": str(prepared.path),
            "precision": self.precision, "load_s": time.perf_counter() - started, "engine": "openvino-genai",
            "inference_precision": choice.effective,
            "dynamic_quantization_group": properties.get("DYNAMIC_QUANTIZATION_GROUP_SIZE"),  # None: the plugin's
            "q4_offsets": "file" if prepared.path.name.endswith("-ov-offsets") else None,  # llm/gguf_exact.py
        }
        return pipe, tokenizer

    def _admit(self, pipe, tokenizer, req: _Request, active: dict[int, _Request]) -> None:
        if req.future.cancelled():
            return
        try:
            with self._tokenizer_lock:
                ids = _encode(tokenizer, req.messages)
            req.prompt_tokens = int(ids.get_shape()[-1])
            request_id = next(self._ids)
            config = _generation_config(req.params, req.rollout_id)
            if self.draft_tokens:
                config.num_assistant_tokens = self.draft_tokens
            req.handle = pipe.add_request(request_id, ids, config)
        except Exception as err:  # noqa: BLE001 - a bad request (e.g. an invalid grammar) fails alone
            _resolve(req, exc=ModelError(f"OpenVINO rejected the request: {type(err).__name__}: {err}"))
            return
        active[request_id] = req

    def _collect(self, tokenizer, active: dict[int, _Request]) -> None:
        import openvino_genai as og

        for request_id, req in list(active.items()):
            if req.future.cancelled():
                req.handle.cancel()  # frees its KV blocks at the next step
                self._cancelled = True
                del active[request_id]
                continue
            status = req.handle.get_status()
            if status == og.GenerationStatus.RUNNING:
                continue
            del active[request_id]
            if status != og.GenerationStatus.FINISHED:
                _resolve(req, exc=ModelError(f"OpenVINO dropped the request ({status.name}; prompt of {req.prompt_tokens} tokens too long?)"))
                continue
            outputs = req.handle.read_all()
            ids = list(outputs[0].generated_ids) if outputs else []
            reason = outputs[0].finish_reason if outputs else None
            with self._tokenizer_lock:
                decoded = tokenizer.decode(ids, skip_special_tokens=True)
            text = strip_stop(decoded, req.params.stop)
            _resolve(req, result=Completion(
                text=text, prompt_tokens=req.prompt_tokens, completion_tokens=len(ids),
                latency_s=time.perf_counter() - req.started,
                finish_reason="length" if reason == og.GenerationFinishReason.LENGTH else "stop",
            ))

    def _drain_failing(self, err: Exception) -> None:
        while True:
            try:
                req = self._inbox.get(timeout=0.05 if self._closed else None)
            except queue.Empty:
                return
            if req is None:
                return
            _resolve(req, exc=err)


def draft_model() -> Path | None:
    """The draft model of speculative decoding, from REINAGENT_OV_DRAFT: a packaged model's name
    (its IR, made once: reinagent.llm.packaged.draft_ir) or an OpenVINO IR folder; None when unset.
    Off by default: perf/qwen_speed.py measured it (docs/models.md, "Speed")."""
    name = os.environ.get("REINAGENT_OV_DRAFT", "").strip()
    if not name:
        return None
    from reinagent.llm import packaged

    named = packaged.lookup(name)
    if named is not None:
        return packaged.draft_ir(named)
    path = Path(name).expanduser()
    if not (path / "openvino_model.xml").is_file():
        names = ", ".join(packaged.MODELS)
        raise ConfigError(f"REINAGENT_OV_DRAFT={name!r} is neither a packaged model ({names}) nor an OpenVINO IR folder")
    return path


def _encode(tokenizer, messages: Sequence[Message]):
    """Token ids of the conversation, rendered as the transformers path renders it: the model's
    chat template with the generation prompt, no extra special tokens."""
    chat = [{"role": m.role, "content": m.content} for m in messages]
    if tokenizer.chat_template:
        text = tokenizer.apply_chat_template(chat, add_generation_prompt=True)
    else:  # a base model: a plain transcript it can continue
        text = "".join(f"{m['role']}: {m['content']}\n" for m in chat) + "assistant:"
    return tokenizer.encode(text, add_special_tokens=False).input_ids


def _generation_config(params: GenerationParams, rollout_id: str | None):
    import openvino_genai as og

    config = og.GenerationConfig()
    config.max_new_tokens = max(1, params.max_tokens)
    if params.stop:
        config.stop_strings = set(s for s in params.stop if s)
    if params.greedy:
        config.do_sample = False
    else:
        config.do_sample = True
        config.temperature = params.temperature
        if params.top_p is not None:
            config.top_p = params.top_p
        config.rng_seed = call_seed(params.seed, rollout_id)
    regex = regex_of(params)
    if regex:
        config.structured_output_config = og.StructuredOutputConfig(regex=regex)
    return config


def _resolve(req: _Request, *, result: Completion | None = None, exc: BaseException | None = None) -> None:
    def settle() -> None:
        if req.future.done():
            return
        if exc is not None:
            req.future.set_exception(exc)
        else:
            req.future.set_result(result)

    with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody is waiting
        req.loop.call_soon_threadsafe(settle)
