"""Model backends behind one async interface, chosen by a model string.

    local               the embedded SmolLM2-135M-Instruct on OpenVINO GenAI (CPU, continuous batching),
                        precision `fast` (the GGUF's own blocks) or `exact` (an f32 IR: transformers' text)
    local:qwen2.5-coder-1.5b, local:qwen2.5-coder-0.5b   real instruct models installed by the
                        `qwen` extra as GGUF files split across packages (packaged.py)
    local:PATH          a GGUF file or OpenVINO IR directory the same way; a Hugging Face directory (an
                        RL or distillation checkpoint) of the embedded model's family and tokenizer too,
                        written once as GGUF (gguf_export.py); any other goes to transformers, as hf:PATH
    ov, ov:PATH         aliases of local, local:PATH
    hf, hf:PATH         transformers (CPU or CUDA), one call at a time: the embedded model, a HF dir or GGUF
    scripted:FILE       replies from a file (tests, demos)
    PROVIDER/NAME       any litellm model string (openai/gpt-4o-mini, anthropic/..., ollama/...)
    openai/NAME + --base-url URL   any OpenAI-compatible server (vLLM, llama.cpp, a proxy)

Heavy libraries (torch, transformers, litellm) are imported only when a backend is made.
`check_models` (here) says what is wrong with a run's models before anything runs: unknown
backends, missing keys, a scripted model's file, the extras their engines need, unused flags.

    base.py stack.py    the LLM interface (Layer: what the stack's layers share); the run's stack:
                        cache -> per-model limit -> grammar -> backend
    cache.py limit.py retry.py   response cache; in-flight cap; retries with backoff
    scripted.py openvino.py hf.py openai_compat.py litellm_backend.py   the backends
    ov_process.py       the OpenVINO engine in a child process of its own (a step holds the GIL)
    local.py            the local model's files: the embedded GGUF, its cached f32 copies
    gguf_exact.py       a Q4_K/Q4_1 GGUF as the engine loads it: the reader's IR with the file's own
                        offsets (the reader rounds them to 4-bit integers)
    cpu_precision.py    the local engine's inference precision for this CPU (measured: f32 with AMX, bf16 on a Zen 4)
    packaged.py         named models from the package registry (local:qwen2.5-coder-1.5b, -0.5b)
    cache_files.py      the models cache's own files: pinned checks, bounded stamps, disk errors in one line
    gguf_export.py      a HF checkpoint of the embedded model written as a GGUF file for OpenVINO
    checkpoint_key.py   what a checkpoint holds (sha256 of its files) as the key of its cached copies
    wire.py constrained.py   checks on what a server sends; action grammars for constrained decoding
    tokens.py           a prompt's tokens as an OpenAI model counts them (tiktoken), for the token budget
    fake_server.py      a loopback OpenAI-compatible server: a public testing utility (and, with
                        `upstream`, a fault-injecting proxy in front of a real one)
    llamacpp.py serve.py   llama.cpp's server for a local model (the `llamacpp` extra);
                        `reinagent serve-model`
    llamacpp_engine.py  `--local-engine llamacpp`: a local model decoded by that server, a child of the run
    engine_choice.py    `--local-engine auto`: the engine measured faster on this CPU for this model, cached
    offline.py          what keeps the libraries we load from the network (TRL's telemetry)
"""

from __future__ import annotations

import importlib.util
import os
import sys

from reinagent.errors import ConfigError, PreflightError, collect, env_count, raise_all, require_extra
from reinagent.llm.base import LLM, Completion, GenerationParams

BACKENDS: dict[str, str] = {
    "local": "embedded SmolLM2-135M-Instruct on OpenVINO GenAI (local:PATH: a GGUF file, OpenVINO IR or HF dir; "
             "local:qwen2.5-coder-1.5b and local:qwen2.5-coder-0.5b with the qwen extra; alias ov)",
    "hf": "embedded SmolLM2-135M-Instruct on transformers (hf:PATH: a HF dir or GGUF file; CUDA machines)",
    "scripted": "scripted:FILE, replies from a YAML/JSON/text file (no model)",
    "openai-compatible": "openai/NAME with --base-url URL (vLLM, llama.cpp server, proxies)",
    "litellm": "PROVIDER/NAME, any litellm model (openai/, anthropic/, gemini/, ollama/, ...)",
}


def backend_of(model: str, base_url: str | None = None) -> str:
    """Which backend serves a model string; ConfigError naming the choices when none does."""
    model = model.strip()
    if model == "local" or model.startswith("local:"):
        return "local"
    if model == "ov" or model.startswith("ov:"):
        return "local"  # the old name of the OpenVINO engine
    if model == "hf" or model.startswith("hf:"):
        return "hf"
    if model.startswith("scripted:"):
        return "scripted"
    if base_url and (model.startswith("openai/") or "/" not in model):
        return "openai-compatible"
    if "/" in model and not model.startswith("/"):
        return "litellm"
    raise ConfigError(
        f"unknown model backend for {model!r}; valid: local, local:PATH, ov, ov:PATH, hf, hf:PATH, scripted:FILE, "
        "PROVIDER/NAME (litellm, e.g. openai/gpt-4o-mini), or openai/NAME with --base-url URL"
    )


LOCAL_BATCH, LOCAL_BATCH_MOST = 8, 64


def local_batch(max_concurrency: int | None = None) -> int:
    """How many requests a local engine (OpenVINO's sequences, llama.cpp's slots) runs at once:
    REINAGENT_LOCAL_BATCH when set; else the run's episodes in flight (`--max-concurrency`), at
    least 8 and at most 64. On a CPU that multiplies in f32 after decompressing each weight (AVX2:
    perf/fc_kernels.py) a step of more rows costs little more than one of 8, so a run that puts 32
    episodes in flight decodes about twice as many tokens a second (perf/in_flight.py); without
    this the engine would run 8 and queue the rest."""
    if os.environ.get("REINAGENT_LOCAL_BATCH"):
        return env_count("REINAGENT_LOCAL_BATCH", LOCAL_BATCH)
    return min(max(LOCAL_BATCH, max_concurrency or 0), LOCAL_BATCH_MOST)


def make_llm(model: str, *, base_url: str | None = None, role: str = "actor", api_key_env: str | None = None,
             precision: str | None = None, deterministic: bool = False, local_engine: str = "openvino",
             max_concurrency: int | None = None) -> LLM:
    """The raw backend for `model` (no cache, no per-model limit: see `reinagent.llm.stack`).
    `precision` (fast or exact, see reinagent.llm.local) applies to the OpenVINO engine only;
    `deterministic` makes it decode one sequence at a time (greedy text independent of batching);
    `max_concurrency` (the run's episodes in flight) sizes a local engine's batch (`local_batch`).

    A `base_url` server gets REINAGENT_SERVER_API_KEY or the variable `api_key_env` names, never
    a hosted provider's key (see `reinagent.llm.wire.endpoint_key`)."""
    kind = backend_of(model, base_url)
    if kind == "scripted":
        from reinagent.llm.scripted import ScriptedLLM

        return ScriptedLLM(model.split(":", 1)[1])
    if kind == "local" and local_engine == "llamacpp":
        from reinagent.llm.llamacpp_engine import LlamaCppLLM

        return LlamaCppLLM(model, parallel=local_batch(max_concurrency))
    if kind == "local":
        path = model.split(":", 1)[1] if ":" in model else None
        if not on_openvino(model, precision):
            from reinagent.llm.hf import HFLLM

            _say_once(model, precision)
            return HFLLM(path, name=model)
        from reinagent.llm.openvino import OpenVINOLLM

        return OpenVINOLLM(path, precision=precision, name=model, deterministic=deterministic,
                           max_batch=local_batch(max_concurrency))
    if kind == "hf":
        from reinagent.llm.hf import HFLLM

        llm = HFLLM(model.split(":", 1)[1] if ":" in model else None, name=model)
        _say_local_is_faster(model, precision)
        return llm
    if kind == "openai-compatible":
        from reinagent.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM(model, base_url=base_url, api_key_env=api_key_env)
    from reinagent.llm.litellm_backend import LiteLLM

    return LiteLLM(model, api_base=base_url, api_key_env=api_key_env)


def on_openvino(model: str, precision: str | None = None) -> bool:
    """Whether a `local` / `local:PATH` model runs on the OpenVINO engine: a GGUF file or an IR
    directory does; so does a HF directory (a checkpoint of training) of the embedded model's
    family and tokenizer, written once as GGUF (at `exact`: where optimum-intel makes its f32 IR).
    Any other HF directory runs on transformers (`reinagent.llm.local.transformers_reason`).
    ConfigError for a path that does not exist."""
    from reinagent.llm.local import existing, transformers_reason

    path = model.split(":", 1)[1] if ":" in model else None
    return path is None or transformers_reason(existing(path), precision) is None


_SAID: set[tuple[str, str]] = set()


def _say_local_is_faster(model: str, precision: str | None) -> None:
    """One stderr line when `hf:` runs on the CPU a model `local:` would run on OpenVINO: there
    transformers generates one call at a time (16 tok/s on the embedded model) where OpenVINO
    batches (232 tok/s; reinagent/llm/gguf_export.py), and a newcomer waited 16 min for 3
    episodes with no word of it (issue 45)."""
    import torch

    if torch.cuda.is_available():
        return  # on a GPU transformers is the engine to use
    path = model.split(":", 1)[1] if ":" in model else None
    other = "local" if path is None else f"local:{path}"
    try:
        faster = on_openvino(other, precision) and importlib.util.find_spec("openvino_genai") is not None
    except Exception:  # noqa: BLE001 - a hint only: never stop a run over it
        faster = False
    if faster and (model, "cpu") not in _SAID:
        _SAID.add((model, "cpu"))
        print(f"{model}: transformers on the CPU generates one call at a time; --model {other} runs the same "
              "weights on OpenVINO, batched, about 14x the tokens per second here (docs/cli.md, Models)",
              file=sys.stderr, flush=True)


def _say_once(model: str, precision: str | None) -> None:
    """The one stderr line saying why `local:HF_DIR` runs on transformers (once per process:
    actor and reflector make the same model)."""
    from reinagent.llm.local import existing, transformers_reason

    reason = transformers_reason(existing(model.split(":", 1)[1]), precision)
    if reason and (model, reason) not in _SAID:
        _SAID.add((model, reason))
        print(f"{model}: {reason}", file=sys.stderr, flush=True)


def model_files(models: tuple[str, ...]) -> dict[str, dict]:
    """spec.json's record of each local model's file (`reinagent.llm.local.file_record`): which
    file ran and its sha256, so a run says what it ran whichever way the name was written."""
    records = {}
    for model in dict.fromkeys(m.strip() for m in models):
        if model in ("local", "ov", "hf") or model.startswith(("local:", "ov:", "hf:")):
            from reinagent.llm.local import file_record

            records[model] = file_record(model.split(":", 1)[1] if ":" in model else None)
    return records


def import_litellm():
    """litellm, imported offline-safe: its price list comes from the installed package, not
    from a download at import time (which would stall for seconds on a machine without network)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


# The key variables of common providers, as litellm.validate_environment names them (litellm
# 1.83; tests/test_newcomer_stumbles.py compares): checked without importing litellm. Any one set
# is enough (gemini takes either); other providers are asked of litellm itself.
KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",), "anthropic": ("ANTHROPIC_API_KEY",), "gemini": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",), "groq": ("GROQ_API_KEY",), "deepseek": ("DEEPSEEK_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY",), "cohere": ("COHERE_API_KEY",), "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",), "fireworks_ai": ("FIREWORKS_AI_API_KEY",),
}


def check_models(models: tuple[str, ...], base_url: str | None = None, api_key_env: str | None = None, *,
                 new_run: bool = True) -> tuple[str, ...]:
    """Each model's backend (a ConfigError naming the choices for an unknown one): everything about
    the models that can be known without asking a server, every problem at once (one line each):
    the keys the hosted ones need, a scripted model's file, the extras their engines need, and
    (`new_run`: a resumed run keeps what its spec recorded) a model flag no model uses."""
    kinds = tuple(backend_of(model, base_url) for model in models)
    problems: list[ConfigError] = []
    if new_run:
        collect(problems, _check_model_flags, models, kinds, base_url, api_key_env)
    for model, kind in dict(zip(models, kinds)).items():
        collect(problems, check_credentials, model, base_url, api_key_env, kind)
        if model.startswith("scripted:"):  # its file is read when the model is built: say so now
            from pathlib import Path

            from reinagent.llm.scripted import check_script

            collect(problems, check_script, Path(model.removeprefix("scripted:")))
        if kind in ("local", "hf") and ":" in model:
            collect(problems, check_local_path, model.split(":", 1)[1])
    for extra in needed_extras(models, base_url, kinds):
        collect(problems, require_extra, extra, f"model {models[0]!r}")
    raise_all(problems)
    return kinds


def check_local_path(path: str) -> None:
    """local:PATH / hf:PATH naming no model file or folder is refused while resolving: it once
    failed when the model was built, after the run directory was made (and then removed). A
    packaged model's name is checked where its parts are assembled (packaged.py), not here."""
    from reinagent.llm import packaged
    from reinagent.llm.local import existing

    if packaged.lookup(path) is None:
        existing(path)  # a stat or two: the ConfigError names what a model path may be


def _check_model_flags(models: tuple[str, ...], kinds: tuple[str, ...], base_url: str | None,
                       api_key_env: str | None) -> None:
    """A model flag that neither model uses is refused: `--model local --base-url URL` once ran
    the embedded model for minutes and recorded a server it never asked."""
    served = {"openai-compatible", "litellm"}  # the backends that send requests to a URL
    names = " and ".join(dict.fromkeys(models))
    for flag, value in (("--base-url", base_url), ("--api-key-env", api_key_env)):
        if value is not None and not set(kinds) & served:
            raise PreflightError(f"{flag} is not used by model {names}: only openai/NAME (an OpenAI-compatible "
                                 f"server) and PROVIDER/NAME models send requests to a URL; drop {flag}, or pass "
                                 "--model openai/NAME to use the server")


def needed_extras(models: tuple[str, ...], base_url: str | None = None, kinds: tuple[str, ...] = ()) -> list[str]:
    """The extras the models' engines need: `local` for OpenVINO, `hf` for transformers (a HF
    directory needs its stack either way: to run on it, or to be written as GGUF for OpenVINO).
    `kinds`: the models' backends, when already known."""
    pairs = list(zip(models, kinds or [backend_of(model, base_url) for model in models]))
    extras = ["local"] if any(kind == "local" and _on_openvino(m) for m, kind in pairs) else []
    if any(kind == "hf" or _hf_dir(m) for m, kind in pairs):
        extras.append("hf")
    return extras


def _hf_dir(model: str) -> bool:
    """local:PATH naming a Hugging Face directory (reinagent.llm.local.kind_of)."""
    from pathlib import Path

    if not model.startswith(("local:", "ov:")):
        return False
    path = Path(model.split(":", 1)[1]).expanduser()
    return path.is_dir() and (path / "config.json").is_file() and not (path / "openvino_model.xml").is_file()


def _on_openvino(model: str) -> bool:
    """A local model the OpenVINO engine serves; a path that does not exist is reported by the
    model's own check, not here."""
    try:
        return on_openvino(model)
    except ConfigError:
        return not _hf_dir(model)


def check_credentials(model: str, base_url: str | None = None, api_key_env: str | None = None,
                      kind: str | None = None) -> None:
    """Fail before any work starts when a hosted model's API key is missing (`kind`: the model's
    backend, when already known)."""
    from unittest import mock

    from reinagent.llm.wire import endpoint_key, is_provider_endpoint

    kind = kind or backend_of(model, base_url)
    if api_key_env:  # (a model that asks no server does not use it: _check_model_flags says so)
        if kind in ("openai-compatible", "litellm"):
            endpoint_key(base_url, api_key_env)  # ConfigError when the named variable is not set
        return
    if kind != "litellm" or (base_url and not is_provider_endpoint(base_url)):
        return  # a --base-url server is not sent the provider's key, so it need not be set
    names = KEY_VARIABLES.get(model.split("/", 1)[0]) if "/" in model else None
    if names is not None:  # no litellm import (6-20 s) to say a well-known variable is unset
        if not any(os.environ.get(name) for name in names):
            raise _unset(model, names)
        return
    litellm = import_litellm()
    # An empty variable is as good as a missing one, but litellm only asks whether it is set: hide
    # the empty ones from it for this one check, and leave the user's environment as it was.
    empty = {k: v for k, v in os.environ.items() if v == "" and k.endswith(("_KEY", "_TOKEN"))}
    try:
        with mock.patch.dict(os.environ):
            for name in empty:
                del os.environ[name]
            env = litellm.validate_environment(model=model)
    except Exception:  # noqa: BLE001 - unknown providers: let the first call tell
        return
    if env.get("missing_keys"):
        raise _unset(model, env["missing_keys"])


def _unset(model: str, names) -> ConfigError:
    return ConfigError(f"model {model!r} needs the environment variable(s) {', '.join(names)}; "
                       "set them (the value is never written to logs or run directories)")


__all__ = ["BACKENDS", "LLM", "Completion", "GenerationParams", "backend_of", "check_credentials", "make_llm"]
