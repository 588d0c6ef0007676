"""The policy being trained: a transformers causal LM and its tokenizer, loaded from a model
string, and saved as a checkpoint directory that `--model local:PATH` loads."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError

SUMMARY = "rl.json"  # written last into a checkpoint: its presence means the directory is complete


# The modules of the `rl` extra (pyproject.toml) each verb needs: training all of them; a
# held-out evaluation of a trainable policy the token-rollout part (torch, transformers, gguf).
RL_MODULES = {"train": ("torch", "transformers", "gguf", "safetensors", "trl", "datasets", "accelerate"),
              "eval": ("torch", "transformers", "gguf", "safetensors")}
RL_EXTRA_HINT = ("install it with `.venv/bin/pip install -e '.[rl]'` from the reinagent checkout "
                 "(./run_tests.sh's environment has it; ./run_reinagent.sh's does not)")


def require(*modules: str, verb: str = "RL training") -> None:
    """Fail early with the extra to install, instead of an ImportError deep inside training (a
    `rl train` without trl failed only after its first rollouts had run)."""
    from reinagent.errors import importable

    missing = [m for m in modules if not importable(m)]
    if missing:
        raise ConfigError(f"{verb} needs the rl extra (not installed: {', '.join(missing)}): {RL_EXTRA_HINT}")


def require_extra(verb: str) -> None:
    """Every module of the rl extra that `reinagent rl VERB` needs (train, eval), before any work."""
    require(*RL_MODULES[verb], verb=f"reinagent rl {verb}")


def is_local_model(name: str) -> bool:
    """Model strings whose weights this process can train (the rest run through reinagent's LLMs)."""
    return name == "local" or name.startswith("local:") or Path(name).expanduser().is_dir()


def weights_name(name: str) -> str:
    """What a model string's weights are, for a person: the embedded model or the directory."""
    if name == "local":
        return "base: the embedded model"
    path = name.removeprefix("local:")
    return f"weights: {Path(path).expanduser().resolve()}" if is_local_model(name) else f"model: {name}"


def load_policy(name: str, *, device: str | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) for `local`, `local:PATH` or a HF model directory, in fp32 (CPU training
    wants fp32; on a GPU the matmuls would run under bf16 autocast)."""
    require("torch", "transformers")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reinagent.distil.train import resolve_base_model

    if not is_local_model(name):
        raise ConfigError(f"model {name!r} cannot be trained here; valid: local, local:PATH or a HF model directory")
    try:
        path = resolve_base_model(name)
    except Exception as err:  # noqa: BLE001 - a missing file is the user's input, not a crash
        raise ConfigError(f"cannot load model {name!r}: {err}") from None
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if device:
        model.to(device)
    return model, tokenizer


def available_cores() -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup CPU quota (a container's
    `--cpus`), which os.cpu_count() ignores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    return max(1, cores)


def _cpu_times() -> tuple[int, int] | None:
    """(idle, total) jiffies of all CPUs from /proc/stat, or None where there is none."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields[:8])


def busy_cores(window_s: float = 0.3) -> float:
    """How many CPUs other work keeps busy now: measured over `window_s` from /proc/stat while this
    process sleeps, else the 1-minute load average. The load average decays over minutes, so it
    would count the evaluation a script ran just before training as load that is still there."""
    before = _cpu_times()
    if before is not None:
        time.sleep(window_s)
        after = _cpu_times()
        if after is not None and after[1] > before[1]:
            idle = (after[0] - before[0]) / (after[1] - before[1])
            return (1.0 - idle) * (os.cpu_count() or 1)
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def torch_threads(configured: int | None = None) -> int:
    """Intra-op threads for torch: `threads` from the config, else REINAGENT_TORCH_THREADS, else the
    cores not already busy (available cores minus the cores others keep busy, at least 1). torch's
    default (every core) oversubscribes a shared machine: its threads meet at a barrier after each
    matmul, so one descheduled thread stalls them all; that is where a busy machine lost 100x."""
    from reinagent.errors import env_count

    if configured:
        return configured
    if os.environ.get("REINAGENT_TORCH_THREADS"):
        return env_count("REINAGENT_TORCH_THREADS", 1)
    cores = available_cores()
    return max(1, min(cores, round(cores - busy_cores())))


def end_token_ids(tokenizer: Any) -> list[int]:
    """Token ids that end a turn (EOS and the chat template's end-of-turn markers)."""
    from reinagent.distil.masks import end_of_turn_tokens

    ids = []
    for token in end_of_turn_tokens(tokenizer):
        tid = tokenizer.convert_tokens_to_ids(token)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid not in ids:
            ids.append(tid)
    return ids


def save_checkpoint(model: Any, tokenizer: Any, out: Path, summary: dict[str, Any]) -> Path:
    """Model + tokenizer + rl.json into `out`, through a sibling renamed at the end, so a killed
    save never leaves a directory that looks complete."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    model.config.use_cache = True
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    (staging / SUMMARY).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    os.replace(staging, out)
    return out
