"""How long the run's event loop waits while the local engine decodes: in-process against its own process.

    .venv/bin/python perf/event_loop.py [--model local] [--requests 8] [--tokens 128] [--rounds 2] [--json]

A step of OpenVINO GenAI's pipeline holds the GIL for the whole step (reinagent/llm/ov_process.py).
This sends `--requests` sampled requests at once and, while they decode, runs a ticker on the same
event loop: `await asyncio.sleep(0.001)` in a loop, each gap between two ticks recorded. An agent's
every await (a sandbox's reply, the next request) waits like a tick. Two engines, rounds alternating:
`in-process` (REINAGENT_OV_IN_PROCESS=1, the engine before this change) and `own process` (the
default). Printed per engine: the ticks' median, 99th percentile and largest gap, and the completion
tokens a second of the same requests sent once more without the ticker (its 1 ms wake-ups take CPU
from the engine's threads when the loop is free to run them), which says whether the child process
costs decode speed. Medians over rounds.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # reinagent, from a checkout

PROMPT = "Write a long story about a lighthouse keeper and the ships she guides. Story {i}:"


async def one_round(model: str, requests: int, tokens: int, tag: str) -> dict[str, float]:
    from reinagent.llm import make_llm
    from reinagent.llm.base import GenerationParams
    from reinagent.records import Message

    llm = make_llm(model)
    try:
        await llm.generate([Message(role="user", content="Hi")], GenerationParams(max_tokens=2))  # load, untimed
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        params = GenerationParams(max_tokens=tokens, temperature=0.8, seed=7)

        async def batch(part: str) -> float:
            started = time.perf_counter()
            replies = await asyncio.gather(*(llm.generate([Message(role="user", content=PROMPT.format(i=f"{tag}{part}-{i}"))],
                                                          params, rollout_id=f"{tag}{part}-{i}") for i in range(requests)))
            return sum(r.completion_tokens for r in replies) / (time.perf_counter() - started)

        # the decode rate without the ticker (whose 1 ms wake-ups take CPU from the engine's
        # threads when the loop is free to run them), then the ticks beside the same requests
        rate = await batch("a")
        tick = asyncio.create_task(ticker())
        await batch("b")
        done.set()
        await tick
    finally:
        await llm.aclose()
    gaps.sort()
    return {"median_ms": 1000 * gaps[len(gaps) // 2], "p99_ms": 1000 * gaps[int(len(gaps) * 0.99)],
            "max_ms": 1000 * gaps[-1], "ticks": len(gaps), "tok_s": rate}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="local", help="a local model string (default: the embedded model)")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.model.startswith(("local", "ov")):
        ap.error(f"--model: a local model (local, local:NAME or local:PATH); got {args.model!r}")
    if min(args.requests, args.tokens, args.rounds) < 1:
        ap.error("--requests, --tokens and --rounds must be at least 1")
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else print
    measured: dict[str, list[dict]] = {"in-process": [], "own process": []}
    for r in range(args.rounds):
        order = list(measured) if r % 2 == 0 else list(measured)[::-1]
        for engine in order:
            if engine == "in-process":
                os.environ["REINAGENT_OV_IN_PROCESS"] = "1"
            else:
                os.environ.pop("REINAGENT_OV_IN_PROCESS", None)
            m = asyncio.run(one_round(args.model, args.requests, args.tokens, f"r{r}{engine[0]}"))
            measured[engine].append(m)
            say(f"  round {r + 1} {engine}: " + ", ".join(f"{k} {v:.1f}" for k, v in m.items()))
    result = {"model": args.model, "requests": args.requests, "tokens": args.tokens, "rounds": args.rounds}
    say(f"{args.model}, {args.requests} requests of {args.tokens} tokens, median of {args.rounds} rounds")
    say(f"{'engine':<14}{'tick median ms':>16}{'p99 ms':>10}{'max ms':>10}{'tok/s':>8}")
    for engine, rounds in measured.items():
        med = {k: statistics.median(m[k] for m in rounds) for k in rounds[0]}
        key = engine.replace(" ", "_").replace("-", "_")
        result.update({f"{key}_{k}": round(v, 2) for k, v in med.items()})
        say(f"{engine:<14}{med['median_ms']:>16.1f}{med['p99_ms']:>10.1f}{med['max_ms']:>10.1f}{med['tok_s']:>8.1f}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
