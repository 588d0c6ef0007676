"""Speed of Qwen2.5-Coder-1.5B on the `local` engine, measured in one run on this machine.

    .venv/bin/python perf/qwen_speed.py [--tokens 128] [--humaneval 16] [--skip-humaneval]

Prints, each measured here and now:
  1. memory bandwidth (a numpy copy of 1 GiB: bytes read per second) and the bound it puts on
     single-stream decoding: one token reads every weight once, so tokens/s <= bandwidth / weight bytes;
  2. greedy decode tokens/s through reinagent's engine (OpenVINO GenAI continuous batching) with 1,
     4 and 8 requests in flight, short distinct prompts, `--tokens` new tokens each;
  3. prefix caching: a trial-2 prompt that repeats trial 1's prompt (the coder's system turn, the
     task, the previous program) costs its new tokens only when the engine keeps the prefix;
     time of that prompt's prefill with the cache on and off;
  4. speculative decoding with the 0.5B as the draft (REINAGENT_OV_DRAFT): single-stream and 8
     concurrent tokens/s with and without it, and whether the greedy token ids are identical;
  5. the time per HumanEval task: `reinagent run` of the first N tasks, NONE, one trial, 8 in flight.
Ratios are against figures of the same run; nothing is compared with a number from elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAME, DRAFT = "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"
TOPICS = ["a lighthouse", "sorting algorithms", "the water cycle", "binary search trees", "a chess opening",
          "TCP handshakes", "bread baking", "the moons of Jupiter"]


def bandwidth_gbs(size: int = 1 << 30, repeats: int = 5) -> float:
    """Memory traffic of a numpy copy, GB/s: each byte is read once and written once."""
    import numpy as np

    a = np.ones(size, dtype=np.uint8)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * size / best / 1e9


def weight_bytes(path: Path) -> int:
    """Bytes of weights one decoded token reads: every tensor, except the embedding table when a
    separate output matrix exists (then a token reads one row of it; tied, it is the output)."""
    import gguf

    tensors = gguf.GGUFReader(str(path)).tensors
    untied = any(t.name == "output.weight" for t in tensors)
    return sum(int(t.n_bytes) for t in tensors if not (untied and t.name == "token_embd.weight"))


async def _decode(llm, n: int, tokens: int, tag: str) -> tuple[float, list[list[int]] | list[str]]:
    from reinagent.llm.base import GenerationParams
    from reinagent.records import Message

    params = GenerationParams(max_tokens=tokens)
    prompts = [[Message(role="user", content=f"Write a long, detailed essay about {TOPICS[i % len(TOPICS)]}.")]
               for i in range(n)]
    t = time.perf_counter()
    done = await asyncio.gather(*(llm.generate(p, params, rollout_id=f"{tag}-{i}") for i, p in enumerate(prompts)))
    wall = time.perf_counter() - t
    return sum(c.completion_tokens for c in done) / wall, [c.text for c in done]


def decode_rates(tokens: int, draft: bool) -> dict[int, tuple[float, list[str]]]:
    from reinagent.llm.openvino import OpenVINOLLM

    if draft:
        os.environ["REINAGENT_OV_DRAFT"] = DRAFT
    else:
        os.environ.pop("REINAGENT_OV_DRAFT", None)
    llm = OpenVINOLLM(NAME, max_batch=8, name=f"local:{NAME}")

    async def go():
        try:
            await _decode(llm, 1, 4, "warm")  # load and warm up
            return {n: await _decode(llm, n, tokens, f"c{n}") for n in (1, 4, 8)}
        finally:
            await llm.aclose()

    return asyncio.run(go())


def prefix_cache(path: Path) -> dict[bool, float]:
    """Prefill time of a trial-2 prompt after its trial-1 prompt, prefix cache on and off."""
    import openvino_genai as og

    task = Path(__file__).parents[1] / "reinagent" / "programming" / "prompts.py"
    trial1 = [{"role": "system", "content": task.read_text()[:6000]},
              {"role": "user", "content": "Write the complete implementation of `has_close_elements`."}]
    trial2 = trial1 + [{"role": "assistant", "content": "def has_close_elements(numbers, threshold):\n    return False"},
                       {"role": "user", "content": "Your tests failed. Reflect and write it again."}]
    out = {}
    for on in (True, False):
        sc = og.SchedulerConfig()
        sc.cache_size, sc.enable_prefix_caching, sc.max_num_batched_tokens, sc.dynamic_split_fuse = 2, on, 1024, True
        pipe = og.ContinuousBatchingPipeline(str(path), sc, "CPU", {})
        tok = pipe.get_tokenizer()
        config = og.GenerationConfig()
        config.max_new_tokens, config.do_sample = 1, False
        pipe.generate([tok.apply_chat_template(trial1, add_generation_prompt=True)], [config])
        t = time.perf_counter()
        pipe.generate([tok.apply_chat_template(trial2, add_generation_prompt=True)], [config])
        out[on] = time.perf_counter() - t
        del pipe
    return out


def humaneval_per_task(n: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "he"
        cmd = [sys.executable, "-m", "reinagent.cli", "run", "--benchmark", "humaneval", "--strategy", "none",
               "--num-trials", "1", "--num-envs", str(n), "--model", f"local:{NAME}", "--max-concurrency", "8",
               "--no-cache", "--quiet", "--run-dir", str(run_dir)]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        wall = time.perf_counter() - t
        report = json.loads(subprocess.run([sys.executable, "-m", "reinagent.cli", "report", str(run_dir), "--format", "json"],
                                           check=True, capture_output=True, text=True).stdout)
        report = report[0] if isinstance(report, list) else report
        print(f"  HumanEval first {n} tasks: {report['pass_at_1'] * n:.0f}/{n} solved, {wall:.0f} s wall "
              f"(model load included), episodes {report['wall_s']:.0f} s")
        return report["wall_s"] / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--humaneval", type=int, default=16)
    ap.add_argument("--skip-humaneval", action="store_true")
    args = ap.parse_args()
    from reinagent.llm import packaged

    path = packaged.model_file(packaged.MODELS[NAME])
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    bw = bandwidth_gbs()
    wb = weight_bytes(path)
    bound = bw / (wb / 1e9)
    print(f"1. bandwidth {bw:.1f} GB/s (numpy copy: bytes read + written); weights read per token {wb / 1e9:.3f} GB; "
          f"bound {bound:.1f} tok/s single stream")
    plain = decode_rates(args.tokens, draft=False)
    for n, (rate, _) in plain.items():
        extra = f", {rate / bound:.2f} of the bound" if n == 1 else ""
        print(f"2. decode, {n} in flight: {rate:.1f} tok/s{extra}")
    cached = prefix_cache(path)
    print(f"3. trial-2 prefill: prefix cache on {cached[True]:.2f} s, off {cached[False]:.2f} s "
          f"({cached[False] / cached[True]:.2f}x)")
    spec = decode_rates(args.tokens, draft=True)
    for n in (1, 8):
        same = spec[n][1] == plain[n][1]
        print(f"4. speculative (draft {DRAFT}), {n} in flight: {spec[n][0]:.1f} vs {plain[n][0]:.1f} tok/s "
              f"({spec[n][0] / plain[n][0]:.2f}x); greedy texts identical: {same}")
    if not args.skip_humaneval:
        per = humaneval_per_task(args.humaneval)
        print(f"5. HumanEval: {per:.1f} s per task (NONE, 1 trial, 8 in flight); 164 tasks ~ {164 * per / 60:.0f} min a trial")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
