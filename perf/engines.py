"""The embedded engine against llama.cpp's server, in one run on this machine (issue 53).

    .venv/bin/python perf/engines.py [--rounds 3] [--tokens 128] [--threads 2] [--json]

One GGUF file, local:qwen2.5-coder-1.5b's published Q4_K_M (reinagent's engine, OpenVINO GenAI,
reads it directly; llama.cpp's server, the `llamacpp` extra, serves it), the same chat prompts,
greedy. Rounds are interleaved: each round measures both engines, the order alternating, so the
load of other work on a shared machine falls on both alike; each figure is the median of the
rounds, and every ratio is of two figures of this run:
  - bound: a 1 GiB numpy copy's GB/s (bytes read + written; at the start and the end of the run)
    divided by the bytes one token reads (the file's weights: perf/qwen_speed.py's weight_bytes);
  - prefill tok/s: a 1-token request's prompt tokens / its wall time;
  - decode tok/s, one stream: (n - 1) / (wall of an n-token request - wall of the 1-token one);
  - 4 and 8 in flight: completion tokens / wall of 4 or 8 requests sent at once (the same prompt, each tagged),
    their prefill included;
  - decode at 8 in flight: 8 (n - 1) / (wall of 8 n-token requests - wall of 8 1-token ones), prefill
    taken out as for one stream (what perf/pair_budget.py's floor divides by);
  - greedy agreement: the first 64 tokens of 10 HumanEval prompts, same text or where it parts.
Every timed prompt starts with its own tag, so neither engine's prefix cache serves a prompt it
saw before (and llama.cpp is asked not to cache prompts). Both engines are loaded for the whole
run; the one not measured is idle. --json: one line on stdout, progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "perf"))

NAME = "qwen2.5-coder-1.5b"
SYSTEM = ("You are an expert Python programmer. Write the complete function, then explain how it works step "
          "by step, then give five test cases with their expected results.")
AGREEMENT_PROMPTS, AGREEMENT_TOKENS = 10, 64  # the defaults of --prompts, and tokens compared


@dataclass
class Reply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    wall_s: float


def messages(task: int, tag: str = "") -> list[dict]:
    from reinagent.benchmarks.humaneval import load_humaneval

    head = f"[{tag}] " if tag else ""
    return [{"role": "system", "content": head + SYSTEM},
            {"role": "user", "content": load_humaneval()[task].text}]


class Embedded:
    """reinagent's engine for local:qwen2.5-coder-1.5b, in this process, `max_batch` in flight at most."""

    name = "embedded"

    def __init__(self, max_batch: int = 8):
        from reinagent.llm.openvino import OpenVINOLLM

        self.llm = OpenVINOLLM(NAME, max_batch=max_batch, name=f"local:{NAME}")

    async def complete(self, chat: list[dict], tokens: int) -> Reply:
        from reinagent.llm.base import GenerationParams
        from reinagent.records import Message

        t = time.perf_counter()
        c = await self.llm.generate([Message(**m) for m in chat], GenerationParams(max_tokens=tokens))
        return Reply(c.text, c.prompt_tokens, c.completion_tokens, time.perf_counter() - t)

    async def close(self):
        await self.llm.aclose()


class LlamaCpp:
    """llama.cpp's server on loopback, `parallel` slots of 1024 tokens, `threads` threads, the same file."""

    name = "llama.cpp"

    def __init__(self, threads: int, parallel: int = 8):
        from reinagent.llm import packaged
        from reinagent.llm.llamacpp import LlamaServer, ServedModel

        path = packaged.published_file(packaged.MODELS[NAME])
        self.server = LlamaServer(ServedModel(NAME, path, "sha256 verified"), parallel=parallel, threads=threads,
                                  ctx_size=parallel * 1024).start()
        self.client = None

    async def complete(self, chat: list[dict], tokens: int) -> Reply:
        import httpx

        if self.client is None:
            self.client = httpx.AsyncClient(timeout=900)
        body = {"model": NAME, "messages": chat, "max_tokens": tokens, "temperature": 0, "cache_prompt": False}
        t = time.perf_counter()
        answer = await self.client.post(f"{self.server.base_url}/chat/completions", json=body)
        wall = time.perf_counter() - t
        answer.raise_for_status()
        data = answer.json()
        usage = data["usage"]
        return Reply(data["choices"][0]["message"]["content"] or "", usage["prompt_tokens"],
                     usage["completion_tokens"], wall)

    async def close(self):
        if self.client is not None:
            await self.client.aclose()
        self.server.stop()


async def measure(engine, tag: str, tokens: int) -> dict[str, float]:
    """One round of one engine: prefill, one-stream decode, 4 and 8 in flight."""
    first = await engine.complete(messages(0, f"{tag}a"), 1)
    whole = await engine.complete(messages(0, f"{tag}b"), tokens)
    out = {"prefill": first.prompt_tokens / first.wall_s,
           "decode": (whole.completion_tokens - 1) / max(whole.wall_s - first.wall_s, 1e-9),
           "prompt_tokens": first.prompt_tokens}
    for n in (4, 8):
        t = time.perf_counter()
        replies = await asyncio.gather(*(engine.complete(messages(0, f"{tag}c{n}-{i}"), tokens) for i in range(n)))
        wall = time.perf_counter() - t
        out[f"in_flight_{n}"] = sum(r.completion_tokens for r in replies) / wall
    # decode alone at 8 in flight: the same 8 prefills (their first tokens included), timed on their own, taken out
    t = time.perf_counter()
    await asyncio.gather(*(engine.complete(messages(0, f"{tag}d8-{i}"), 1) for i in range(8)))
    prefill_8 = time.perf_counter() - t
    out["decode_8_in_flight"] = (sum(r.completion_tokens for r in replies) - len(replies)) / max(wall - prefill_8, 1e-9)
    return out


async def interleaved(engines, rounds: int, tokens: int, say) -> dict[str, list[dict[str, float]]]:
    """Load and warm up each engine (untimed), then `rounds` rounds of `measure`, the order reversed
    every other round; each engine's measures by name."""
    for e in engines:
        await e.complete(messages(0, f"warm-{e.name}"), 4)
    measured = {e.name: [] for e in engines}
    for r in range(rounds):
        for e in (engines if r % 2 == 0 else engines[::-1]):
            measured[e.name].append(await measure(e, f"r{r}-{e.name}", tokens))
            say(f"  round {r + 1} {e.name}: " + ", ".join(f"{k} {v:.1f}" for k, v in measured[e.name][-1].items()))
    return measured


def compare(make_engines, rounds: int, tokens: int, prompts: int, say):
    """`interleaved` rounds, then `agreement` of the first two, on the engines `make_engines()`
    builds (in the event loop), every one closed at the end: (rounds, agreement rows)."""
    async def go():
        engines = make_engines()
        try:
            measured = await interleaved(engines, rounds, tokens, say)
            return measured, await agreement(engines, prompts)
        finally:
            for e in engines:
                await e.close()

    return asyncio.run(go())


async def agreement(engines, prompts: int) -> list[tuple[bool, int, str, str]]:
    """(same text, characters in common, each engine's text) for each of the first HumanEval prompts."""
    rows = []
    for task in range(prompts):
        a, b = [(await e.complete(messages(task), AGREEMENT_TOKENS)).text for e in engines]
        common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        rows.append((a == b, common, a, b))
    return rows


def cpu_model() -> str:
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    marks = [f for f in ("avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8") if f in flags]
    return f"{name}, {os.cpu_count()} cores ({' '.join(marks) or 'no AVX-512/AMX'})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="llama.cpp's threads")
    ap.add_argument("--prompts", type=int, default=AGREEMENT_PROMPTS, help="HumanEval prompts of the agreement check")
    ap.add_argument("--json", action="store_true", help="one JSON line on stdout (progress on stderr)")
    args = ap.parse_args()
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))

    from qwen_speed import bandwidth_gbs, weight_bytes

    from reinagent.llm import packaged

    path = packaged.published_file(packaged.MODELS[NAME])
    say(f"CPU: {cpu_model()}; load average at start {os.getloadavg()[0]:.2f}")
    bandwidth = [bandwidth_gbs()]
    weights = weight_bytes(path)

    rounds, agree = compare(lambda: [Embedded(), LlamaCpp(args.threads)], args.rounds, args.tokens, args.prompts, say)
    bandwidth.append(bandwidth_gbs())
    gbs = statistics.median(bandwidth)
    bound = gbs / (weights / 1e9)

    def med(engine: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[engine])

    e, l = "embedded", "llama.cpp"
    result = {
        "cpu": cpu_model(), "rounds": args.rounds, "tokens": args.tokens, "llamacpp_threads": args.threads,
        "prompt_tokens": int(med(l, "prompt_tokens")), "bandwidth_gbs": round(gbs, 1), "weight_gb": round(weights / 1e9, 3),
        "bound_tok_s": round(bound, 1),
        "embedded_decode_tok_s": round(med(e, "decode"), 2), "llamacpp_decode_tok_s": round(med(l, "decode"), 2),
        "embedded_prefill_tok_s": round(med(e, "prefill"), 1), "llamacpp_prefill_tok_s": round(med(l, "prefill"), 1),
        "embedded_4_in_flight_tok_s": round(med(e, "in_flight_4"), 2), "llamacpp_4_in_flight_tok_s": round(med(l, "in_flight_4"), 2),
        "embedded_8_in_flight_tok_s": round(med(e, "in_flight_8"), 2), "llamacpp_8_in_flight_tok_s": round(med(l, "in_flight_8"), 2),
        "embedded_decode_8_in_flight_tok_s": round(med(e, "decode_8_in_flight"), 2),
        "llamacpp_decode_8_in_flight_tok_s": round(med(l, "decode_8_in_flight"), 2),
        "greedy_identical": sum(same for same, *_ in agree), "greedy_prompts": len(agree),
        "load_average_end": round(os.getloadavg()[0], 2),
    }
    say(f"bandwidth {gbs:.1f} GB/s (numpy copy, read + written; {', '.join(f'{b:.1f}' for b in bandwidth)}); "
        f"weights read per token {weights / 1e9:.3f} GB; bound {bound:.1f} tok/s single stream")
    say(f"{'median of ' + str(args.rounds) + ' rounds':<28}{'embedded':>10}{'llama.cpp':>11}{'ratio':>8}")
    for label, key in (("single-stream decode", "decode"), ("prefill", "prefill"), ("4 in flight", "in_flight_4"),
                       ("8 in flight", "in_flight_8"), ("decode at 8 in flight", "decode_8_in_flight")):
        a, b = med(e, key), med(l, key)
        say(f"{label + ' tok/s':<28}{a:>10.1f}{b:>11.1f}{a / b:>8.2f}")
    say(f"{'share of the bound':<28}{med(e, 'decode') / bound:>10.2f}{med(l, 'decode') / bound:>11.2f}")
    say(f"greedy, first {AGREEMENT_TOKENS} tokens of HumanEval/0-{args.prompts - 1}: "
        f"{result['greedy_identical']} of {len(agree)} identical")
    for task, (same, common, a, b) in enumerate(agree):
        if not same:
            say(f"  HumanEval/{task}: part after {common} characters: embedded {a[common:common + 24]!r} "
                f"vs llama.cpp {b[common:common + 24]!r}")
    say(f"load average at end {result['load_average_end']:.2f}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
