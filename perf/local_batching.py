"""Throughput of the embedded model with 1 and with 8 concurrent episodes (the batching engine).

    .venv/bin/python perf/local_batching.py            # cached load, batching, prefix reuse
    .venv/bin/python perf/local_batching.py --cold     # also time a cold GGUF conversion

Eight chat prompts of about 300 tokens (a shared few-shot block, then a question), 48 new tokens
each (greedy, no stop string, so every request decodes the same budget unless the model ends its
turn). "1 concurrent" sends them one after the other, "8 concurrent" with asyncio.gather, both
through LocalLLM.generate. Each phase runs with the prompt-prefix cache emptied first, once with
the prefix cache on and once with it off. Figures are generated tokens per wall-clock second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reinagent.llm.base import GenerationParams  # noqa: E402
from reinagent.llm.local import LocalLLM  # noqa: E402
from reinagent.records import Message  # noqa: E402

FEW_SHOT = """Answer the question with a short thought, then one action.

Question: What is the elevation range for the area that the eastern sector of the Colorado orogeny extends into?
Thought: I need to search Colorado orogeny, find the area that the eastern sector extends into, then find its elevation range.
Action: Search[Colorado orogeny]
Observation: The Colorado orogeny was an episode of mountain building in Colorado and surrounding areas. The eastern sector extends into the High Plains.
Thought: The High Plains rise in elevation from around 1,800 to 7,000 ft, so the answer is 1,800 to 7,000 ft.
Action: Finish[1,800 to 7,000 ft]

Question: Musician and satirist Allie Goertz wrote a song about the "The Simpsons" character Milhouse, who Matt Groening named after who?
Thought: The question simplifies to who Milhouse is named after. I only need to search Milhouse.
Action: Search[Milhouse]
Observation: Milhouse Mussolini Van Houten is a recurring character in the Fox animated television series The Simpsons, named by Matt Groening after President Richard Nixon's middle name.
Thought: Milhouse was named after U.S. president Richard Nixon, so the answer is Richard Nixon.
Action: Finish[Richard Nixon]
"""

QUESTIONS = [
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "Were Pavel Urysohn and Leonid Levin known for the same type of work?",
    "What profession do Nicholas Ray and Elia Kazan have in common?",
    "Which documentary is about Finnish rock groups, Adam Clayton Powell or The Saimaa Gesture?",
    "Who was born first, Arthur Conan Doyle or Penelope Lively?",
    "What is the name of the fight song of the university whose main campus is in Lawrence, Kansas?",
    "Are the Laleli Mosque and Esma Sultan Mansion located in the same neighborhood?",
    "Guitars for Wounded Warriors is an album that was recorded in the village in which New York county?",
]
PARAMS = GenerationParams(max_tokens=48, temperature=0.0)


def prompt(question: str) -> list[Message]:
    return [Message(role="system", content="You are a careful research assistant."), Message(role="user", content=f"{FEW_SHOT}\nQuestion: {question}")]


async def load_time(cache_root: str | None) -> tuple[float, str, float]:
    """Load time as the engine measured it, its source, and the first call's full latency."""
    old = os.environ.get("REINAGENT_CACHE_DIR")
    if cache_root:
        os.environ["REINAGENT_CACHE_DIR"] = cache_root
    try:
        llm = LocalLLM(None, prefix_cache_mb=1)  # a key of its own: a fresh engine and load
        start = time.perf_counter()
        await llm.generate(prompt("Hi?"), GenerationParams(max_tokens=1))
        first = time.perf_counter() - start
        info = llm.load_info
        await llm.aclose()
        return info["load_s"], info["source"], first
    finally:
        if cache_root:
            os.environ.pop("REINAGENT_CACHE_DIR", None)
            if old is not None:
                os.environ["REINAGENT_CACHE_DIR"] = old


async def throughput(llm: LocalLLM, concurrent: bool) -> tuple[float, int, float]:
    engine = llm._engine
    if engine is not None and engine.prefix is not None:
        engine.prefix.entries.clear()  # the engine is idle between phases; each phase starts cold
        engine.prefix.nbytes = 0
    start = time.perf_counter()
    if concurrent:
        completions = await asyncio.gather(*(llm.generate(prompt(q), PARAMS) for q in QUESTIONS))
    else:
        completions = [await llm.generate(prompt(q), PARAMS) for q in QUESTIONS]
    wall = time.perf_counter() - start
    tokens = sum(c.completion_tokens for c in completions)
    prompt_tokens = sum(c.prompt_tokens for c in completions) / len(completions)
    return tokens / wall, tokens, prompt_tokens


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", action="store_true", help="also time a cold GGUF conversion (about 30 s)")
    args = parser.parse_args()
    # Other processes on the machine change every figure: say how busy it was.
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")

    if args.cold:
        with tempfile.TemporaryDirectory() as tmp:
            load_s, source, first = await load_time(tmp)
            print(f"load, cold conversion ({source}): {load_s:6.1f} s   (first call {first:.1f} s)")
    load_s, source, first = await load_time(None)
    print(f"load, from the cache  ({source}): {load_s:6.1f} s   (first call {first:.1f} s)")

    results = {}
    for prefix_mb in (256, 0):
        llm = LocalLLM(None, max_batch=8, prefix_cache_mb=prefix_mb)
        await llm.generate(prompt("Warm up?"), GenerationParams(max_tokens=4))  # load + first-call overheads
        for concurrent in (False, True):
            rate, tokens, prompt_len = await throughput(llm, concurrent)
            results[prefix_mb, concurrent] = rate
            label = "8 concurrent" if concurrent else "1 concurrent"
            reuse = "on " if prefix_mb else "off"
            print(f"prefix reuse {reuse}  {label}: {rate:6.1f} generated tok/s  ({tokens} tokens, prompts ~{prompt_len:.0f} tokens)")
        await llm.aclose()
    print(f"batching speed-up, 8 vs 1 concurrent: {results[256, True] / results[256, False]:.2f}x (prefix reuse on), "
          f"{results[0, True] / results[0, False]:.2f}x (off)")
    print(f"prefix reuse pays, 8 concurrent: {results[256, True] / results[0, True]:.2f}x; 1 concurrent: "
          f"{results[256, False] / results[0, False]:.2f}x")
    print(f"torch threads: {__import__('torch').get_num_threads()}; load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
