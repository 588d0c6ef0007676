"""The local engine's inference precision on this CPU: f32 against bf16, interleaved in one run.

    .venv/bin/python perf/precision.py [--model qwen2.5-coder-1.5b|embedded] [--rounds 5] [--tokens 64] [--json]

Loads one OpenVINO GenAI pipeline per precision hint (f32, bf16; bf16 only where the CPU has
bf16 instructions, else the plugin computes f32 anyway) on the same GGUF file, then alternates
rounds: each round runs, per hint, one greedy request of `--tokens` new tokens on the same
~200-token prompt and times prefill (time to the first token) and decode (tokens/s after it). Each
round's prompt starts with its own tag, the same for both hints: the pipeline keeps earlier
requests' KV blocks (a prefix cache), and with one prompt for every round the time to the first
token was a cache hit, not a prefill (0.12-0.15 s for 150 tokens on the Zen 4; fixed 2026-12-07).
Medians over rounds and the decode ratio f32/bf16 are printed with their spread, all from this
run (on a loaded machine both hints see the same load, round by round). The greedy texts of the
two hints are compared too: they may differ (bf16 rounds differently), which is why the choice is
made per machine once and recorded (reinagent/llm/cpu_precision.py).
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


def one(pipe, tokens: int, tag: str) -> tuple[float, float, str]:
    import openvino_genai as og

    config = og.GenerationConfig()
    config.max_new_tokens, config.do_sample = tokens, False
    config.ignore_eos = True  # every round decodes the same number of tokens
    result = pipe.generate([f"({tag}) {PROMPT}"], config)  # a new first token: nothing cached
    metrics = result.perf_metrics
    return metrics.get_ttft().mean / 1000, metrics.get_throughput().mean, result.texts[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import openvino_genai as og

    from reinagent.llm.cpu_precision import BF16_FLAGS, choose, cpu_flags

    path = model_path(args.model)
    hints = ["f32"] + (["bf16"] if set(BF16_FLAGS) & cpu_flags() else [])
    pipes = {h: og.LLMPipeline(str(path), "CPU", INFERENCE_PRECISION_HINT=h) for h in hints}
    for pipe in pipes.values():
        one(pipe, 4, "warm-up")
    prefill: dict[str, list[float]] = {h: [] for h in hints}
    decode: dict[str, list[float]] = {h: [] for h in hints}
    texts: dict[str, str] = {}
    for r in range(args.rounds):
        order = hints if r % 2 == 0 else hints[::-1]  # neither hint always goes first
        for h in order:
            ttft, tps, texts[h] = one(pipes[h], args.tokens, f"round {r + 1}")
            prefill[h].append(ttft)
            decode[h].append(tps)
    out = {"cpu": cpu_name(), "model": args.model, "rounds": args.rounds, "tokens": args.tokens,
           "chosen": choose("fast").effective,
           **{f"{h}_decode_tok_s": round(statistics.median(decode[h]), 2) for h in hints},
           **{f"{h}_prefill_s": round(statistics.median(prefill[h]), 3) for h in hints}}
    if "bf16" in hints:
        ratios = [a / b for a, b in zip(decode["f32"], decode["bf16"])]
        out["decode_ratio_f32_over_bf16"] = round(statistics.median(ratios), 2)
        out["decode_ratio_range"] = [round(min(ratios), 2), round(max(ratios), 2)]
        out["greedy_identical"] = texts["f32"] == texts["bf16"]
    if args.json:
        print(json.dumps(out))
        return
    print(f"CPU: {out['cpu']} ({'bf16 instructions' if 'bf16' in hints else 'no bf16 instructions'})")
    print(f"model: {args.model} ({path.name}), {args.rounds} interleaved rounds, {args.tokens} tokens each")
    for h in hints:
        print(f"  {h:5s} decode {out[f'{h}_decode_tok_s']:6.2f} tok/s (rounds {[round(x, 2) for x in decode[h]]}), "
              f"prefill {out[f'{h}_prefill_s']:.3f} s")
    if "bf16" in hints:
        print(f"  decode f32/bf16: median {out['decode_ratio_f32_over_bf16']} (range {out['decode_ratio_range']}); "
              f"greedy texts identical: {out['greedy_identical']}")
    print(f"the engine's rule picks: {out['chosen']}")


if __name__ == "__main__":
    main()
