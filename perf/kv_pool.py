"""Where the embedded engine's RSS goes as prompts grow (issue 17 §5).

    .venv/bin/python perf/kv_pool.py                  # KV pools of 2 GB (the default) and 1 GB
    .venv/bin/python perf/kv_pool.py --waves 6 --pools 2,1

A REFLEXION run's peak RSS climbed from about 1.9 to 3.0 GB over its trials while a NONE run's
stayed near 1-1.5 GB (hotpot_runs/embedded100). This script asks whether that is records held in
memory or the OpenVINO KV pool. It sends waves of 8 concurrent requests whose prompts grow wave
by wave, as a task's prompt grows with its reflections, and after each wave prints the process's
RSS next to the size of the KV pool the pipeline reports (`kv_cache_size_in_bytes`). Each pool
size runs in its own child process (REINAGENT_OV_CACHE_GB). No run records are involved, so a
rise that follows the pool, and stops where the pool is capped, is the engine's and not ours.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORDS = "the river carried silt past the old mill while herons waited in the reeds for fish".split()


def rss_mib() -> float:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024


def prompt(wave: int, i: int, words_per_wave: int) -> list:
    from reinagent.records import Message

    # Different from the first word on, so that no request reuses another's cached prefix.
    body = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(words_per_wave * wave))
    return [Message(role="user", content=f"Request {wave}-{i}. {body}\nSummarise the text above in one line.")]


async def waves(n: int, words_per_wave: int) -> list[dict]:
    from reinagent.llm.base import GenerationParams
    from reinagent.llm.openvino import OpenVINOLLM

    llm = OpenVINOLLM(None, precision="fast")
    params = GenerationParams(max_tokens=16)
    rows = [{"wave": 0, "prompt_tokens": 0, "rss_mib": rss_mib(), "kv_mib": 0.0, "max_cache_usage": 0.0}]
    # Up and down twice: a second pass over prompts no longer than the first shows whether memory
    # follows the longest prompt so far (a high-water mark) or keeps growing with the calls made.
    for step, wave in enumerate([*range(1, n + 1), *range(n, 0, -1), *range(1, n + 1)], start=1):
        done = await asyncio.gather(*(llm.generate(prompt(wave, i + 8 * step, words_per_wave), params) for i in range(8)))
        kv = llm._engine.kv_cache()
        rows.append({"wave": step, "prompt_tokens": max(c.prompt_tokens for c in done), "rss_mib": rss_mib(),
                     "kv_mib": kv["kv_cache_bytes"] / 2**20, "max_cache_usage": kv["max_cache_usage"]})
    await llm.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waves", type=int, default=6)
    parser.add_argument("--words-per-wave", type=int, default=500, help="prompt growth per wave (about 1.1 tokens a word)")
    parser.add_argument("--pools", default="2,1", help="KV pool sizes to compare, whole GB")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(asyncio.run(waves(args.waves, args.words_per_wave))))
        return
    for pool in args.pools.split(","):
        env = dict(os.environ, REINAGENT_OV_CACHE_GB=pool)
        out = subprocess.run([sys.executable, __file__, "--child", "--waves", str(args.waves),
                              "--words-per-wave", str(args.words_per_wave)], env=env, capture_output=True, text=True)
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"pool {pool} GB failed:\n{out.stderr[-2000:]}")
            continue
        print(f"\nKV pool capped at {pool} GB")
        print(f"{'wave':>4} {'prompt tokens':>13} {'RSS MiB':>8} {'KV pool MiB':>11} {'peak pool use':>13}")
        for row in json.loads(line[7:]):
            print(f"{row['wave']:>4} {row['prompt_tokens']:>13} {row['rss_mib']:>8.0f} {row['kv_mib']:>11.0f} "
                  f"{row['max_cache_usage']:>12.1f}%")  # OpenVINO reports percent


if __name__ == "__main__":
    main()
