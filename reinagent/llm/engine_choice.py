"""`--local-engine auto`: the faster of the two local engines for this CPU and this model, measured.

Which engine decodes a `local` model faster depends on the CPU and on the engines' versions
(docs/models.md, the engines' tables): on an Intel CPU with AMX and on an AMD Zen 3 the OpenVINO
engine is ahead at 8 requests in flight and llama.cpp one stream at a time; on an AMD Zen 4
llama.cpp was ahead at every load until the engine's Q4 matrices were split, and is behind at 8 in
flight since. No rule over CPU flags predicted that, so `auto` measures: both engines load
the run's model and decode the same prompts, the run's requests in flight at once (at most 8, the
measurement must stay short), in alternating rounds (a round's prompts are new to both engines, so
neither replays the other's prefix cache); the engine with the higher median tokens/s is chosen.
The result is cached per CPU model, model file, in-flight count and the engines' versions (the
packages and reinagent.llm.gguf_exact's rule: `engine_choice.json` in the cache root;
REINAGENT_ENGINE_REMEASURE=1 measures again), and spec.json records it
(`settings.local_engine_choice`: the engine, why, the figures), while the run's config records the
engine it ran on, so a resume runs on that engine again without measuring.

No measurement where only one engine can do what the run asks: --constrained, --deterministic,
--precision exact, --executor ray and a missing llama.cpp server keep OpenVINO, and say so.
REINAGENT_ENGINE_CHOICE_TOKENS sets the tokens each request decodes (default 48).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ENGINES = ("openvino", "llamacpp")
MOST_IN_FLIGHT = 8  # a measurement at more would take minutes on 2 cores
ROUNDS = 2  # per engine, alternating

# Two sentences per request, each round its own topics: the prompts are about 120 tokens, and
# a coding model writes at length in answer (the measured decode is not cut short by an early stop).
TOPICS = ("a ring buffer", "an LRU cache", "a trie", "a min-heap", "a union-find", "an interval tree",
          "a bloom filter", "a skip list", "a rope for text", "a sparse matrix", "a priority queue",
          "a token bucket", "a circular deque", "a radix sort", "a suffix array", "a segment tree")


@dataclass(frozen=True)
class EngineChoice:
    """What `auto` came to, as spec.json records it."""

    engine: str  # openvino or llamacpp
    reason: str  # one line: why
    tok_s: dict[str, float] = field(default_factory=dict)  # median decode tokens/s per engine (measured)
    in_flight: int = 0  # requests in flight while measuring
    cpu: str = ""
    cached: bool = False  # read from the cache, not measured by this run

    def record(self) -> dict:
        return {"asked": "auto", **asdict(self)}


def pick(tok_s: dict[str, float]) -> str:
    """The faster engine; a tie keeps OpenVINO (the default engine)."""
    return max(ENGINES, key=lambda engine: (tok_s.get(engine, 0.0), engine == "openvino"))


def without_measuring(*, constrained: bool | None, deterministic: bool, precision: str | None, executor: str,
                      llamacpp_missing: str | None) -> EngineChoice | None:
    """OpenVINO where the run asks for what only it does (no measurement); None: measure."""
    why = ("--constrained (only the OpenVINO engine constrains actions)" if constrained
           else "--deterministic (the OpenVINO engine's one sequence at a time)" if deterministic
           else f"--precision {precision} (the OpenVINO engine's)" if precision not in (None, "fast")
           else f"--executor {executor} (llama.cpp runs with the local executor only)" if executor != "local"
           else f"llama.cpp's server is not installed ({llamacpp_missing})" if llamacpp_missing
           else None)
    return None if why is None else EngineChoice("openvino", f"openvino without measuring: {why}")


def choose(model: str, in_flight: int) -> EngineChoice:
    """The measured choice for `model` at `in_flight` requests, from the cache or measured now."""
    in_flight = measured_in_flight(in_flight)
    cpu, key = cpu_name(), cache_key(model, in_flight)
    cache = cache_file()
    known = _read(cache)
    if key in known and os.environ.get("REINAGENT_ENGINE_REMEASURE") != "1":
        try:
            choice = EngineChoice(**{**known[key], "cached": True})
        except TypeError:  # an entry not written by this version, or edited: measure again
            choice = None
        if choice is not None and choice.engine in ENGINES:
            _say(f"{choice.reason} (measured before on this CPU: {cache})")
            return choice
    tokens = int(os.environ.get("REINAGENT_ENGINE_CHOICE_TOKENS", "48") or 48)
    _say(f"measuring which engine decodes {model} faster here: both, {in_flight} in flight, {tokens} tokens "
         f"each, {ROUNDS} rounds each (once per CPU and model; cached in {cache})")
    tok_s = asyncio.run(_measure(model, in_flight, tokens))
    engine = pick(tok_s)
    other = next(e for e in ENGINES if e != engine)
    reason = (f"{engine} measured faster at {in_flight} in flight: {tok_s[engine]:.1f} vs {tok_s[other]:.1f} "
              f"tok/s ({other})")
    choice = EngineChoice(engine, reason, tok_s, in_flight, cpu)
    _write(cache, {**known, key: {k: v for k, v in asdict(choice).items() if k != "cached"}})
    _say(reason)
    return choice


def measured_in_flight(in_flight: int) -> int:
    return max(1, min(in_flight, MOST_IN_FLIGHT))


def cache_key(model: str, in_flight: int) -> str:
    """The CPU (name, family, model, vector flags), the model's file, the requests in flight, and
    the engines' versions (a new engine, a new way of reading the file, or OpenVINO computing in
    other than f32, is measured again)."""
    from reinagent.llm.cpu_precision import cpu_flags

    flags = ",".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx"))))
    return "|".join((cpu_name(), flags, _file_key(model), str(measured_in_flight(in_flight)), engines_version()))


def engines_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from reinagent.llm.gguf_exact import RULE
    from reinagent.llm.llamacpp import DISTRIBUTION

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "-"

    from reinagent.llm.cpu_precision import plugin_identity

    computes = "".join(f" {k}={v}" for k, v in plugin_identity("fast").items())  # bf16 moves other rates
    return f"openvino-genai {of('openvino-genai')} {RULE}{computes}, {DISTRIBUTION} {of(DISTRIBUTION)}"


async def _measure(model: str, in_flight: int, tokens: int) -> dict[str, float]:
    from reinagent.llm import make_llm

    llms = {engine: make_llm(model, local_engine=engine, max_concurrency=in_flight) for engine in ENGINES}
    rates: dict[str, list[float]] = {engine: [] for engine in ENGINES}
    try:
        for llm in llms.values():  # loading is not decoding: load both first
            await _round(llm, ["Say hi."], 1)
        for r in range(ROUNDS):
            prompts = [_prompt(TOPICS[(r * in_flight + i) % len(TOPICS)], r) for i in range(in_flight)]
            order = ENGINES if r % 2 == 0 else ENGINES[::-1]  # alternate who goes first
            for engine in order:
                rates[engine].append(await _round(llms[engine], prompts, tokens))
    finally:
        for llm in llms.values():
            await llm.aclose()
    return {engine: round(statistics.median(values), 2) for engine, values in rates.items()}


async def _round(llm, prompts: list[str], tokens: int) -> float:
    """Decoded tokens per second over the round's span, every prompt in flight at once."""
    from reinagent.llm.base import GenerationParams
    from reinagent.records import Message

    params = GenerationParams(max_tokens=tokens, temperature=0.0)
    started = time.perf_counter()
    done = await asyncio.gather(*(llm.generate([Message(role="user", content=p)], params) for p in prompts))
    span = time.perf_counter() - started
    return sum(c.completion_tokens for c in done) / span if span > 0 else 0.0


def _prompt(topic: str, round_: int) -> str:
    return (f"(Round {round_ + 1}.) Write a Python class implementing {topic}, with type hints and a docstring "
            f"for every method. Then explain, step by step, how each method works and what it costs in time "
            f"and memory, and give three examples of using {topic} in a real program.")


def cpu_name() -> str:
    """The CPU's model name with its family and model numbers ("AMD EPYC" alone names several)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "model name" not in fields:
        import platform

        return platform.processor() or platform.machine()
    return f"{fields['model name']} (family {fields.get('cpu family', '?')} model {fields.get('model', '?')})"


def _file_key(model: str) -> str:
    from reinagent.llm.llamacpp import resolve

    path = resolve(model).path.resolve()
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def cache_file() -> Path:
    from reinagent.paths import cache_root

    return cache_root() / "engine_choice.json"


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: measure again


def _write(path: Path, data: dict) -> None:
    from reinagent.runfiles import replace_file  # a fresh temp file renamed over: old or new, never half

    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _say(line: str) -> None:
    print(f"local engine: {line}", file=sys.stderr, flush=True)
