"""Decode rate by requests in flight: how far more concurrency takes each engine (issue 53).

    .venv/bin/python perf/in_flight.py [--levels 1,8,16,32] [--rounds 3] [--tokens 64] [--json]

perf/engines.py stops at 8 in flight, the runs' default. A paired HumanEval run must decode about
60-70 thousand completion tokens (perf/pair_budget.py); at 8 in flight on a 2-core AVX2 CPU that
is an hour of decode alone. On such a CPU the engine's matrix kernel turns each weight into f32
and multiplies in f32 (perf/fc_kernels.py), so the cost of decompressing a weight is shared by
every row of the step: more rows, more tokens per weight decompressed, until the f32 arithmetic
itself is the limit. This script measures where that limit is, for the engine and for llama.cpp's
server on the same GGUF (local:qwen2.5-coder-1.5b's Q4_K_M), greedy, rounds interleaved (perf/engines.py's
discipline; its Embedded and LlamaCpp, sized to the largest level).

For each level N, in each round: N 1-token requests sent at once (their prefill), then N
`--tokens`-token requests sent at once, every prompt tagged so no prefix cache serves it:

  decode at N = N (tokens - 1) / (wall of the N long requests - wall of the N 1-token ones)
  throughput at N = completion tokens / wall of the N long requests (prefill included)

Each figure is the median of the rounds; the spread (lowest, highest) is printed beside it. The
number of steps a level's requests share is what the engine's scheduler makes of them: the
figures are what a run with that many calls in flight gets, not a kernel's peak.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engines import Embedded, LlamaCpp, cpu_model, messages  # noqa: E402


def levels_arg(text: str) -> list[int]:
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"levels: comma-separated whole numbers, e.g. 1,8,16,32; got {text!r}")
    if not levels or levels[0] < 1 or levels[-1] > 64:
        raise argparse.ArgumentTypeError(f"levels: each between 1 and 64; got {text!r}")
    return levels


async def level(engine, n: int, tag: str, tokens: int) -> dict[str, float]:
    """One level of one engine in one round: decode and throughput at `n` in flight."""
    t = time.perf_counter()
    await asyncio.gather(*(engine.complete(messages(0, f"{tag}p{n}-{i}"), 1) for i in range(n)))
    prefill = time.perf_counter() - t
    t = time.perf_counter()
    replies = await asyncio.gather(*(engine.complete(messages(0, f"{tag}d{n}-{i}"), tokens) for i in range(n)))
    wall = time.perf_counter() - t
    made = sum(r.completion_tokens for r in replies)
    return {"decode": (made - n) / max(wall - prefill, 1e-9), "throughput": made / wall}


async def rounds_of(engines, levels: list[int], rounds: int, tokens: int, say) -> dict:
    """Warm each engine (untimed), then `rounds` rounds, each engine in turn (order reversed
    every other round), each level in turn: {engine: {level: [measures]}}."""
    for e in engines:
        await e.complete(messages(0, f"warm-{e.name}"), 4)
    out = {e.name: {n: [] for n in levels} for e in engines}
    for r in range(rounds):
        for e in (engines if r % 2 == 0 else engines[::-1]):
            for n in levels:
                m = await level(e, n, f"r{r}-{e.name}-", tokens)
                out[e.name][n].append(m)
                say(f"  round {r + 1} {e.name} {n} in flight: decode {m['decode']:.1f} tok/s, "
                    f"throughput {m['throughput']:.1f} tok/s")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", type=levels_arg, default=levels_arg("1,8,16,32"), help="requests in flight (1 to 64)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64, help="completion tokens of each timed request")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="llama.cpp's threads")
    ap.add_argument("--engines", default="embedded,llama.cpp", help="embedded, llama.cpp or both (comma-separated)")
    ap.add_argument("--json", action="store_true", help="one JSON line on stdout (progress on stderr)")
    args = ap.parse_args()
    names = [x.strip() for x in args.engines.split(",") if x.strip()]
    if not names or set(names) - {"embedded", "llama.cpp"}:
        ap.error(f"--engines: embedded, llama.cpp or both; got {args.engines!r}")
    if args.rounds < 1 or args.tokens < 2:
        ap.error("--rounds must be at least 1 and --tokens at least 2")
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    top = args.levels[-1]
    say(f"CPU: {cpu_model()}; load average at start {os.getloadavg()[0]:.2f}")

    async def go():
        engines = [Embedded(max_batch=top) if n == "embedded" else LlamaCpp(args.threads, parallel=top) for n in names]
        try:
            return await rounds_of(engines, args.levels, args.rounds, args.tokens, say)
        finally:
            for e in engines:
                await e.close()

    measured = asyncio.run(go())
    result = {"cpu": cpu_model(), "rounds": args.rounds, "tokens": args.tokens, "levels": args.levels,
              "llamacpp_threads": args.threads}
    say(f"median of {args.rounds} rounds (lowest-highest), tok/s; {args.tokens} tokens a request")
    say(f"{'in flight':>9}" + "".join(f"{e + ' decode':>28}{e + ' throughput':>28}" for e in names))
    for n in args.levels:
        line = f"{n:>9}"
        for e in names:
            for key in ("decode", "throughput"):
                vals = [m[key] for m in measured[e][n]]
                med = statistics.median(vals)
                result[f"{e.replace('.', '')}_{key}_{n}_tok_s"] = round(med, 2)
                line += f"{f'{med:.1f} ({min(vals):.1f}-{max(vals):.1f})':>28}"
        say(line)
    if len(names) == 2:
        say("engine / llama.cpp, decode: " + ", ".join(
            f"{n} in flight {result[f'embedded_decode_{n}_tok_s'] / result[f'llamacpp_decode_{n}_tok_s']:.2f}"
            for n in args.levels))
    result["load_average_end"] = round(os.getloadavg()[0], 2)
    say(f"load average at end {result['load_average_end']:.2f}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
