"""The local engine's single-stream decode under CPU-plugin settings, interleaved in one run.

    .venv/bin/python perf/cpu_settings.py ['{"name": {PROPERTY: VALUE}, ...}'] [--rounds 3] [--tokens 96]

Loads one OpenVINO GenAI ContinuousBatchingPipeline (the engine's pipeline, prefix cache off) per
named property set on local:qwen2.5-coder-1.5b's published Q4_K_M file, then alternates rounds
(the order reversed every other round, so load from other work falls on all alike): per set, a
1-token and an n-token greedy request on the same ~200-token prompt, each with its own tag so no
cache serves it; decode tok/s = (n - 1) / (wall n - wall 1). Medians and each set's rounds are
printed, and whether its greedy text is the first set's. The default sets ask whether the plugin's
dynamic quantisation of activations (on by default, groups of 32) or its thread count is what
holds single-stream decode back on this CPU (issue 53). Each set goes on top of the engine's
precision choice (llm/cpu_precision.py); until 2026-12-07 it went on the plugin's defaults, which
on a CPU with bf16 instructions compute in bf16 (the Zen 4 figures of docs/dq_group_output_amd_zen4.txt
are bf16's, while the engine then ran f32).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from precision import PROMPT, model_path  # noqa: E402 - perf/precision.py's prompt, so the figures compare

DEFAULT_SETS = {"default": {}, "dq0": {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 0},
                "dq128": {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 128}, "threads2": {"INFERENCE_NUM_THREADS": 2}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="?", default=json.dumps(DEFAULT_SETS), help="JSON: name -> plugin properties")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=96)
    args = ap.parse_args()
    try:
        sets = json.loads(args.sets)
    except json.JSONDecodeError as err:
        ap.error(f"sets: not JSON ({err}); e.g. '{{\"default\": {{}}, \"dq0\": {{\"DYNAMIC_QUANTIZATION_GROUP_SIZE\": 0}}}}'")
    if not (isinstance(sets, dict) and sets and all(isinstance(v, dict) for v in sets.values())):
        ap.error("sets: a JSON object of name -> object of plugin properties, at least one")
    import openvino_genai as og

    path = model_path("qwen2.5-coder-1.5b")
    pipes = {}
    from reinagent.llm import cpu_precision

    base = cpu_precision.choose("fast").properties("fast")  # the engine's precision, unless a set names another
    print(f"each set on top of the engine's precision choice: {base or 'the plugin default (f32 here)'}")
    for name, props in sets.items():
        scheduler = og.SchedulerConfig()
        scheduler.cache_size, scheduler.max_num_seqs, scheduler.enable_prefix_caching = 2, 8, False
        scheduler.dynamic_split_fuse, scheduler.max_num_batched_tokens = True, 1024
        pipes[name] = og.ContinuousBatchingPipeline(str(path), scheduler, "CPU", base | props)

    def wall(pipe, n: int, tag: str) -> tuple[float, str]:
        config = og.GenerationConfig()
        config.max_new_tokens, config.do_sample, config.ignore_eos = n, False, True
        t = time.perf_counter()
        result = pipe.generate([f"[{tag}] {PROMPT}"], [config])[0]
        return time.perf_counter() - t, result.m_generation_ids[0]

    for pipe in pipes.values():
        wall(pipe, 4, "warm")
    decode: dict[str, list[float]] = {name: [] for name in pipes}
    texts: dict[str, str] = {}
    for r in range(args.rounds):
        for name in (list(pipes) if r % 2 == 0 else list(pipes)[::-1]):
            first, _ = wall(pipes[name], 1, f"{r}{name}a")
            whole, texts[name] = wall(pipes[name], args.tokens, f"{r}{name}b")
            decode[name].append((args.tokens - 1) / (whole - first))
            print(f"  round {r + 1} {name}: prefill {first:.2f} s, decode {decode[name][-1]:.2f} tok/s", flush=True)
    base = next(iter(pipes))
    for name in pipes:
        print(f"{name:10s} decode median {statistics.median(decode[name]):.2f} tok/s, rounds "
              f"{[round(x, 2) for x in decode[name]]}, greedy text same as {base}'s: {texts[name] == texts[base]}")


if __name__ == "__main__":
    main()
