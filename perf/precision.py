"""The local engine's inference precision on this CPU: f32 against bf16, interleaved in one run.

    .venv/bin/python perf/precision.py [--model qwen2.5-coder-1.5b|embedded] [--rounds 5] [--tokens 64]
                                       [--in-flight 8] [--json]

Loads one OpenVINO GenAI ContinuousBatchingPipeline per precision hint (f32, bf16; bf16 only where
the CPU has bf16 instructions, else the plugin computes f32 anyway) on the IR the engine loads for
the model (llm/local.prepare: the file's weights), prefix cache off, then alternates rounds. Each
round runs, per hint: a 1-token and a `--tokens`-token greedy request on the same ~150-token
prompt (decode tok/s = (tokens - 1) / (wall n - wall 1), prefill = wall 1), then `--in-flight` such
requests at once (throughput = their completion tokens / their wall, prefill included: what a run
with that many calls in flight gets). Every prompt starts with its own tag, the same for both
hints, so no cached block serves it (with one prompt for every round the time to the first token
was a cache hit, not a prefill: 0.12-0.15 s for 150 tokens on the Zen 4; fixed 2026-12-07).
Medians over rounds and the ratios with their spread are printed, all from this run (on a loaded
machine both hints see the same load, round by round). The greedy texts of the two hints are
compared too: they may differ (bf16 rounds differently), which is why the choice is made per CPU
kind and recorded (reinagent/llm/cpu_precision.py).

Until 2026-12-07 this script timed one stream only, on OpenVINO GenAI's own reading of the GGUF
file: on the Zen 4 the two hints decoded one stream alike, and the rule kept f32 there. With
requests in flight bf16 moved 1.3x the tokens (docs/precision_output_amd_zen4.txt), and the rule
took bf16 on that CPU kind.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = ("Write a Python function `merge_intervals(intervals)` that merges overlapping closed "
          "intervals given as pairs of integers and returns them sorted by start. Explain the edge "
          "cases you handle: empty input, touching intervals, nested intervals, unsorted input. ") * 3


def model_path(name: str) -> Path:
    from reinagent.llm.local import embedded_gguf
    from reinagent.llm.packaged import MODELS, model_file

    return embedded_gguf() if name == "embedded" else model_file(MODELS[name])


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return "unknown"


def pipeline(path: Path, hint: str, in_flight: int):
    import openvino_genai as og

    scheduler = og.SchedulerConfig()
    scheduler.cache_size, scheduler.max_num_seqs, scheduler.enable_prefix_caching = 2, max(8, in_flight), False
    scheduler.dynamic_split_fuse, scheduler.max_num_batched_tokens = True, 1024  # as the engine (llm/openvino.py)
    return og.ContinuousBatchingPipeline(str(path), scheduler, "CPU", {"INFERENCE_PRECISION_HINT": hint})


def wall(pipe, tokens: int, tags: list[str]) -> tuple[float, str]:
    """Seconds for greedy requests of `tokens` new tokens, one per tag, sent at once; the first's text."""
    import openvino_genai as og

    config = og.GenerationConfig()
    config.max_new_tokens, config.do_sample = tokens, False
    config.ignore_eos = True  # every round decodes the same number of tokens
    started = time.perf_counter()
    results = pipe.generate([f"({tag}) {PROMPT}" for tag in tags], [config] * len(tags))
    return time.perf_counter() - started, results[0].m_generation_ids[0]


def spread(values: list[float]) -> list[float]:
    return [round(min(values), 2), round(max(values), 2)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--in-flight", type=int, default=8, help="requests at once for the throughput column")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.rounds < 1 or args.tokens < 2 or args.in_flight < 1:
        ap.error("--rounds and --in-flight take 1 or more, --tokens 2 or more")
    from reinagent.llm.cpu_precision import BF16_FLAGS, choose, cpu_flags
    from reinagent.llm.local import prepare

    path = prepare(model_path(args.model), "fast").path  # the IR the engine loads
    hints = ["f32"] + (["bf16"] if set(BF16_FLAGS) & cpu_flags() else [])
    pipes = {h: pipeline(path, h, args.in_flight) for h in hints}
    for pipe in pipes.values():
        wall(pipe, 4, ["warm-up"])
    prefill: dict[str, list[float]] = {h: [] for h in hints}
    decode: dict[str, list[float]] = {h: [] for h in hints}
    flight: dict[str, list[float]] = {h: [] for h in hints}
    texts: dict[str, str] = {}
    for r in range(args.rounds):
        order = hints if r % 2 == 0 else hints[::-1]  # neither hint always goes first
        for h in order:
            first, _ = wall(pipes[h], 1, [f"round {r + 1} a"])
            whole, texts[h] = wall(pipes[h], args.tokens, [f"round {r + 1} b"])
            prefill[h].append(first)
            decode[h].append((args.tokens - 1) / (whole - first))
            many, _ = wall(pipes[h], args.tokens, [f"round {r + 1} c{i}" for i in range(args.in_flight)])
            flight[h].append(args.in_flight * args.tokens / many)
    out = {"cpu": cpu_name(), "model": args.model, "rounds": args.rounds, "tokens": args.tokens,
           "in_flight": args.in_flight, "chosen": choose("fast").effective,
           **{f"{h}_decode_tok_s": round(statistics.median(decode[h]), 2) for h in hints},
           **{f"{h}_prefill_s": round(statistics.median(prefill[h]), 3) for h in hints},
           **{f"{h}_in_flight_tok_s": round(statistics.median(flight[h]), 2) for h in hints}}
    if "bf16" in hints:
        ratios = [a / b for a, b in zip(decode["f32"], decode["bf16"])]
        out["decode_ratio_f32_over_bf16"] = round(statistics.median(ratios), 2)
        out["decode_ratio_range"] = spread(ratios)
        ratios = [b / a for a, b in zip(flight["f32"], flight["bf16"])]
        out["in_flight_ratio_bf16_over_f32"] = round(statistics.median(ratios), 2)
        out["in_flight_ratio_range"] = spread(ratios)
        out["greedy_identical"] = texts["f32"] == texts["bf16"]
    if args.json:
        print(json.dumps(out))
        return
    print(f"CPU: {out['cpu']} ({'bf16 instructions' if 'bf16' in hints else 'no bf16 instructions'})")
    print(f"model: {args.model} ({path.name}), {args.rounds} interleaved rounds, {args.tokens} tokens a request")
    for h in hints:
        print(f"  {h:5s} one stream: decode {out[f'{h}_decode_tok_s']:6.2f} tok/s (rounds "
              f"{[round(x, 2) for x in decode[h]]}), prefill {out[f'{h}_prefill_s']:.3f} s; "
              f"{args.in_flight} in flight: {out[f'{h}_in_flight_tok_s']:6.2f} tok/s (rounds {[round(x, 2) for x in flight[h]]})")
    if "bf16" in hints:
        print(f"  one stream decode f32/bf16: median {out['decode_ratio_f32_over_bf16']} (range {out['decode_ratio_range']}); "
              f"{args.in_flight} in flight bf16/f32: median {out['in_flight_ratio_bf16_over_f32']} "
              f"(range {out['in_flight_ratio_range']}); greedy texts identical: {out['greedy_identical']}")
    print(f"the engine's rule picks: {out['chosen']}")


if __name__ == "__main__":
    main()
