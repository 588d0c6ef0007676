"""What `--deterministic` costs on the local engine, and what it buys (issue 26 §1).

    .venv/bin/python perf/deterministic.py                 # 16 prompts, 48 new tokens each
    .venv/bin/python perf/deterministic.py --prompts 8 --new-tokens 24   # a quick one

The same greedy requests go to the embedded model (`--model local`, precision fast) in each mode:
all at once on the continuous-batching engine (the default), and with `deterministic=True` (one
sequence at a time, no prefix cache). Then the first half of them is sent again, alone: the same
prompts batched with other companions. Printed: the wall time of the full pass in each mode, the
slowdown, and how many greedy texts of the half changed between the two passes. Figures are from
one run on the machine it ran on.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reinagent.llm.base import GenerationParams  # noqa: E402
from reinagent.records import Message  # noqa: E402

QUESTIONS = ["Which river is longer, the Nile or the Amazon?", "Who wrote Dubliners?", "What is 17 times 23?",
             "Name the capital of Australia.", "Why is the sky blue?", "What does DNA stand for?",
             "Which planet has the most moons?", "Who painted the Night Watch?"]


def prompts(n: int) -> list[list[Message]]:
    return [[Message(role="system", content="Answer with a short thought, then the answer."),
             Message(role="user", content=f"Question {i}: {QUESTIONS[i % len(QUESTIONS)]} (variant {i // len(QUESTIONS)})")]
            for i in range(n)]


async def one_pass(llm, batch: list[list[Message]], params: GenerationParams, order: list[int]) -> tuple[float, list[str]]:
    """All requests at once, submitted in `order`."""
    started = time.perf_counter()
    done = await asyncio.gather(*(llm.generate(batch[i], params, rollout_id=f"p{i}") for i in order))
    texts = [""] * len(batch)
    for i, c in zip(order, done):
        texts[i] = c.text
    return time.perf_counter() - started, texts


async def main(args) -> None:
    from reinagent.llm.openvino import OpenVINOLLM

    batch = prompts(args.prompts)
    params = GenerationParams(max_tokens=args.new_tokens)
    forward = list(range(len(batch)))
    results = {}
    for mode, deterministic in (("batched", False), ("deterministic", True)):
        llm = OpenVINOLLM(deterministic=deterministic)
        await llm.generate([Message(role="user", content="Hi")], GenerationParams(max_tokens=1))  # load
        t1, a = await one_pass(llm, batch, params, forward)
        t2, b = await one_pass(llm, batch[: len(batch) // 2], params, list(range(len(batch) // 2)))
        results[mode] = (t1, a, b)
        await llm.aclose()
        print(f"{mode:>13}: {t1:6.2f} s for {len(batch)} requests; greedy texts that differ when half of them "
              f"run again alone: {sum(x != y for x, y in zip(a, b))} of {len(b)}", flush=True)
    slow = results["deterministic"][0] / results["batched"][0]
    print(f"--deterministic costs {slow:.2f}x the wall time of batched decoding ({args.prompts} prompts, "
          f"{args.new_tokens} new tokens)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=48)
    asyncio.run(main(parser.parse_args()))
