"""Throughput of the embedded model with 1 and with 8 concurrent episodes (the batching engine).

    .venv/bin/python perf/local_batching.py            # cached load, batching, prefix reuse
    .venv/bin/python perf/local_batching.py --cold     # also time a cold GGUF conversion

An episode here is a short ReAct-like exchange: a chat prompt of about 350 tokens (a shared
few-shot block, then its own question), answered in up to 48 new tokens (greedy, no stop string),
then an observation of about 40 tokens appended for the next step, 3 steps in all. "1 concurrent"
runs the 8 episodes one after the other, "8 concurrent" all at once with asyncio.gather, both
through LocalLLM.generate; the same is then done with single calls (1 step per episode). Each
phase runs with the prompt-prefix cache emptied first, `--repeat` times (the fastest counts);
the episodes run once with the prefix cache on and once with it off. Figures are generated tokens per wall-clock
second.
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

Question: Which river flows past the place where the composer of the opera Rusalka was born?
Thought: I need to find who composed Rusalka, then where he was born, then which river flows there.
Action: Search[Rusalka opera]
Observation: Rusalka is an opera by the Czech composer Antonin Dvorak, first performed in Prague in 1901. Dvorak was born in Nelahozeves, a village on the Vltava river north of Prague.
Thought: Dvorak was born in Nelahozeves, which lies on the Vltava, so the answer is the Vltava.
Action: Finish[Vltava]

Question: Was the inventor of the telephone older or younger than the founder of the Red Cross when each died?
Thought: I need the inventor of the telephone and the founder of the Red Cross, and their ages at death.
Action: Search[Alexander Graham Bell]
Observation: Alexander Graham Bell (1847-1922) was a Scottish-born inventor credited with patenting the first practical telephone. Henry Dunant (1828-1910), who founded the Red Cross, died at 82.
Thought: Bell died at 75 and Dunant at 82, so the inventor of the telephone was younger when he died.
Action: Finish[younger]
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


def observation(question: str, step: int) -> str:
    subject = question.split(",")[0].removeprefix("Which ").removeprefix("What ").removeprefix("Who ")
    return (f"Observation {step}: The page found for {subject!r} has several paragraphs; the first names "
            f"the places, dates and people involved, and the second gives their background.")


async def episode(llm: LocalLLM, question: str, steps: int) -> list:
    messages, completions = prompt(question), []
    for step in range(1, steps + 1):
        completion = await llm.generate(messages, PARAMS)
        completions.append(completion)
        messages = [*messages, Message(role="assistant", content=completion.text), Message(role="user", content=observation(question, step))]
    return completions


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


async def throughput(llm: LocalLLM, concurrent: bool, steps: int) -> tuple[float, int, float]:
    engine = llm._engine
    if engine is not None and engine.prefix is not None:
        engine.prefix.entries.clear()  # the engine is idle between phases; each phase starts cold
        engine.prefix.nbytes = 0
    start = time.perf_counter()
    if concurrent:
        episodes = await asyncio.gather(*(episode(llm, q, steps) for q in QUESTIONS))
    else:
        episodes = [await episode(llm, q, steps) for q in QUESTIONS]
    wall = time.perf_counter() - start
    completions = [c for e in episodes for c in e]
    tokens = sum(c.completion_tokens for c in completions)
    prompt_tokens = sum(c.prompt_tokens for c in completions) / len(completions)
    return tokens / wall, tokens, prompt_tokens


def decoding_steps(rows: tuple[int, ...] = (1, 8), steps: int = 20) -> dict[int, float]:
    """Median seconds per decoding step of a batch of `rows` rows, ~350 tokens of context each:
    the engine's own kernels, without prefills, joins or rows finishing at different times."""
    import torch

    from reinagent.llm.kv import BatchKV
    from reinagent.llm.local import embedded_gguf, load_model
    from reinagent.llm.prefill import prefill

    lm = load_model(embedded_gguf(), batch=max(rows))
    prompt_ids = lm.encode(prompt(QUESTIONS[0]))
    result = {}
    with torch.inference_mode():
        ((_, kv),) = prefill(lm.model, [prompt_ids], 0, [])
        for b in rows:
            batch = BatchKV()
            batch.rebuild([], [kv] * b)
            times = []
            for step in range(steps):
                ids = torch.zeros(b, 1, dtype=torch.long)
                positions = torch.full((b, 1), len(prompt_ids) + step)
                start = time.perf_counter()
                lm.model(input_ids=ids, attention_mask=batch.grow_mask(), position_ids=positions, past_key_values=batch.cache, use_cache=True)
                times.append(time.perf_counter() - start)
            result[b] = sorted(times)[len(times) // 2]
    return result


def cpu_name() -> str:
    """The CPU model and its widest vector unit: the batching ratio depends on both (measured
    for episodes: 3.0-3.2x on an Intel core with AVX-512 and AMX, 2.4-2.6x on an AVX2 AMD EPYC core)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "cpu unknown"
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "cpu unknown")
    flags = set(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), []))
    vector = next((f for f in ("avx512f", "avx2", "avx") if f in flags), "no avx")
    return f"{name}, {vector}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", action="store_true", help="also time a cold GGUF conversion (about 30 s)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each phase; the fastest counts (default 2)")
    parser.add_argument("--steps", type=int, default=3, help="model calls per episode (default 3)")
    args = parser.parse_args()
    # Other processes on the machine change every figure: say how busy it was.
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus ({cpu_name()})")

    if args.cold:
        with tempfile.TemporaryDirectory() as tmp:
            load_s, source, first = await load_time(tmp)
            print(f"load, cold conversion ({source}): {load_s:6.1f} s   (first call {first:.1f} s)")
    load_s, source, first = await load_time(None)
    print(f"load, from the cache  ({source}): {load_s:6.1f} s   (first call {first:.1f} s)")

    results = {}
    for steps in (args.steps, 1):
        kind = f"8 episodes of {steps} steps" if steps > 1 else "8 single calls"
        print(f"-- {kind}")
        for prefix_mb in (256, 0) if steps > 1 else (256,):
            llm = LocalLLM(None, max_batch=8, prefix_cache_mb=prefix_mb)
            await llm.generate(prompt("Warm up?"), GenerationParams(max_tokens=4))  # load + first-call overheads
            info = llm.load_info
            for concurrent in (False, True):
                # The first run of a phase also pays one-time costs (the allocator growing the heap
                # for a batch of 8); the fastest run is the steady state a long experiment sees.
                runs = [await throughput(llm, concurrent, steps) for _ in range(max(1, args.repeat))]
                rate, tokens, prompt_len = max(runs)
                results[steps, prefix_mb, concurrent] = rate
                label = "8 concurrent" if concurrent else "1 concurrent"
                reuse = "on " if prefix_mb else "off"
                print(f"prefix reuse {reuse}  {label}: {rate:6.1f} generated tok/s  ({tokens} tokens, prompts ~{prompt_len:.0f} tokens; "
                      f"runs: {', '.join(f'{r[0]:.1f}' for r in runs)})")
            await llm.aclose()
    steps = args.steps
    print(f"batching speed-up, 8 vs 1 concurrent, episodes of {steps} steps: {results[steps, 256, True] / results[steps, 256, False]:.2f}x "
          f"(prefix reuse on), {results[steps, 0, True] / results[steps, 0, False]:.2f}x (off)")
    print(f"batching speed-up, 8 vs 1 concurrent, single calls: {results[1, 256, True] / results[1, 256, False]:.2f}x (prefix reuse on)")
    print(f"prefix reuse pays, episodes, 8 concurrent: {results[steps, 256, True] / results[steps, 0, True]:.2f}x; 1 concurrent: "
          f"{results[steps, 256, False] / results[steps, 0, False]:.2f}x")
    step = await asyncio.to_thread(decoding_steps)  # in a thread of its own, like the engine's decoder
    print(f"decoding alone, steady state: batch of 1 {step[1] * 1000:.0f} ms/step, batch of 8 {step[8] * 1000:.0f} ms/step "
          f"= {8 * step[1] / step[8]:.2f}x the tokens per second")
    print(f"torch threads: decoding {info['threads']}, prefill {info['prefill_threads']}; {info['packed_linears']} linear layers packed; "
          f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
