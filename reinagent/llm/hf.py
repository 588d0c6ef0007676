"""`hf` and `hf:PATH`: a transformers model in this process, one generate() at a time.

For what OpenVINO does not do: CUDA machines, and checking a checkpoint of training,
distillation or RL with the library that wrote it. `hf` is the embedded SmolLM2 (its GGUF file
dequantised once into the cache shared with `local`, see reinagent.llm.local.converted_dir);
`hf:PATH` is a Hugging Face model directory or a .gguf file.

Simple on purpose: one worker thread per model runs each call's `generate()` in turn (actor and
reflector share it). The CPU engine with continuous batching is `local` (reinagent.llm.openvino).
torch and transformers are imported in the worker, when the model loads.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError, ModelError
from reinagent.llm.base import LLM, Completion, GenerationParams, call_seed, strip_stop
from reinagent.records import Message

# Tokens that end an assistant turn in common chat templates, beyond the tokenizer's own EOS.
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    device: Any
    eos: list[int]
    info: dict[str, Any] = field(default_factory=dict)


class HFLLM(LLM):
    def __init__(self, path: str | None = None, *, device: str | None = None, name: str | None = None):
        from reinagent.llm.local import embedded_gguf, existing, kind_of, require_transformers

        self.name = name or ("hf" if path is None else f"hf:{path}")
        self.source = embedded_gguf() if path is None else existing(path)
        if kind_of(self.source) == "ir":
            raise ConfigError(f"{self.source} is an OpenVINO IR directory: load it with local:PATH, not hf:PATH")
        require_transformers(gguf=kind_of(self.source) == "gguf")
        self.device = device
        self.default_concurrency = 1
        self._worker = _shared_worker(self.source, device)

    async def generate(self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None) -> Completion:
        loop = asyncio.get_running_loop()
        completion = await loop.run_in_executor(self._worker.pool, self._worker.generate, list(messages), params, rollout_id)
        completion.model, completion.cost_usd = self.name, 0.0
        return completion

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        # loaded first if no call has (blocking, once): a budget must decide alike whether the
        # response cache answers the calls or the model does
        try:
            loaded = self._worker.pool.submit(self._worker._load).result()
        except ModelError:
            return None  # the call itself reports why
        with self._worker.tokenizer_lock:
            return int(_encode(loaded.tokenizer, messages).shape[1])

    async def aclose(self) -> None:
        pass  # the model stays loaded for the process (training and RL scripts reuse it)

    @property
    def load_info(self) -> dict[str, Any]:
        return dict(self._worker.loaded.info) if self._worker.loaded else {}


class _Worker:
    def __init__(self, source: Path, device: str | None, cache_root: str | None):
        self.source, self.device, self.cache_root = source, device, cache_root
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"hf-{source.name}")
        # the token budget counts prompts from the event loop's thread (HFLLM.count_prompt_tokens)
        self.tokenizer_lock = threading.Lock()
        self.loaded: _Loaded | None = None
        self._error: str | None = None

    def generate(self, messages: list[Message], params: GenerationParams, rollout_id: str | None) -> Completion:
        import torch

        lm = self._load()
        started = time.perf_counter()
        with self.tokenizer_lock:
            ids = _encode(lm.tokenizer, messages).to(lm.device)
        kwargs: dict[str, Any] = {"max_new_tokens": max(1, params.max_tokens), "eos_token_id": lm.eos, "pad_token_id": lm.eos[0]}
        if params.greedy:
            kwargs["do_sample"] = False
        else:
            kwargs.update(do_sample=True, temperature=params.temperature, top_p=params.top_p or 1.0)
            torch.manual_seed(call_seed(params.seed, rollout_id))  # replayable: the run's seed and the rollout
        if params.stop:
            kwargs.update(stop_strings=[s for s in params.stop if s], tokenizer=lm.tokenizer)
        with torch.no_grad():
            out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        new = out[0, ids.shape[1]:].tolist()
        ended = bool(new) and new[-1] in lm.eos
        with self.tokenizer_lock:
            text = lm.tokenizer.decode(new, skip_special_tokens=True)
        cut = strip_stop(text, params.stop)
        stopped = ended or cut != text or len(new) < params.max_tokens
        return Completion(text=cut, prompt_tokens=int(ids.shape[1]), completion_tokens=len(new),
                          latency_s=time.perf_counter() - started, finish_reason="stop" if stopped else "length")

    def _load(self) -> _Loaded:
        if self.loaded is not None:
            return self.loaded
        if self._error:
            raise ModelError(self._error)
        try:
            self.loaded = _load(self.source, self.device, self.cache_root)
        except ConfigError:
            raise  # a full or read-only models cache: one line naming its fix (llm/cache_files.py)
        except Exception as err:  # noqa: BLE001 - every later call gets the same reason
            self._error = f"model {self.source.name} failed to load: {type(err).__name__}: {err}"
            raise ModelError(self._error) from None
        return self.loaded


_WORKERS: dict[tuple, _Worker] = {}
_WORKERS_LOCK = threading.Lock()


def _shared_worker(source: Path, device: str | None) -> _Worker:
    root = os.environ.get("REINAGENT_CACHE_DIR")
    key = (str(source.resolve()), device, root)
    with _WORKERS_LOCK:
        if key not in _WORKERS:
            _WORKERS[key] = _Worker(source, device, root)
        return _WORKERS[key]


def _load(source: Path, device: str | None, cache_root: str | None) -> _Loaded:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reinagent.llm.local import convert_gguf, converted_dir

    start = time.perf_counter()
    target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    # f32 on CPU (bf16 is slower without AMX and changes the text); bf16/f16 on accelerators
    if target.type == "cpu":
        dtype = torch.float32
    else:
        dtype = torch.bfloat16 if target.type != "cuda" or torch.cuda.is_bf16_supported() else torch.float16
    folder, kind = source, "hf"
    if source.suffix.lower() == ".gguf":
        folder, kind = converted_dir(source, cache_root), "cache"
        if not (folder / "config.json").is_file():
            convert_gguf(source, folder)
            kind = "converted"
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(target).eval()
    eos = [tokenizer.eos_token_id, *_ids(model.config.eos_token_id), *_ids(getattr(model.generation_config, "eos_token_id", None))]
    vocab = tokenizer.get_vocab()
    eos += [vocab[t] for t in _END_OF_TURN if t in vocab and t in tokenizer.all_special_tokens]
    eos = list(dict.fromkeys(i for i in eos if i is not None))
    info = {"source": kind, "path": str(folder), "load_s": time.perf_counter() - start, "device": str(target), "dtype": str(dtype), "engine": "transformers"}
    return _Loaded(model, tokenizer, target, eos, info)


def _encode(tokenizer, messages: Sequence[Message]):
    """The conversation in the model's chat template with the generation prompt (as `local` renders it)."""
    import torch

    chat = [{"role": m.role, "content": m.content} for m in messages]
    if tokenizer.chat_template:
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    else:  # a base model: a plain transcript it can continue
        text = "".join(f"{m['role']}: {m['content']}\n" for m in chat) + "assistant:"
    return torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)
