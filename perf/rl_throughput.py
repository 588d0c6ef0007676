"""Rollout and trainer throughput of reinagent.rl (GRPO on `arithmetic`), in tokens per second.

    .venv/bin/python perf/rl_throughput.py                       # embedded SmolLM2-135M on CPU
    .venv/bin/python perf/rl_throughput.py --steps 3 --async     # the AReaL-style mode
    .venv/bin/python perf/rl_throughput.py --model local:DIR --device cuda --peak-tflops 989

Rollout tokens/s counts tokens the policy generated per second of generation; trainer tokens/s
counts every token the forward/backward passes read (prompt, replies, feedback) per second of
update. On a GPU it also prints the trainer's model FLOPs utilisation: 6 * parameters * tokens per
second (forward + backward; the reference forward adds 2 * parameters * tokens) over the peak
you pass. It prints what one run measured on this machine; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-response-length", type=int, default=8)
    parser.add_argument("--react-format", action="store_true", help="The few-shot Thought/Action prompt (longer).")
    parser.add_argument("--async", dest="async_mode", action="store_true")
    parser.add_argument("--device", default=None, help="cuda to train on the GPU (default: CPU)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="Device peak (e.g. 989 for an H100 in bf16) for MFU.")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    from reinagent.rl import RLAgent
    from reinagent.rl.policy import load_policy

    model, tokenizer = load_policy(args.model, device=args.device)
    params = sum(p.numel() for p in model.parameters())
    with tempfile.TemporaryDirectory() as out:
        agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", max_turns=1,
                        max_response_length=args.max_response_length, react_format=args.react_format,
                        batch_size=args.batch_size, group_size=args.group_size, max_steps=args.steps,
                        max_workers=args.batch_size * args.group_size, async_mode=args.async_mode,
                        threads=args.threads, output_dir=out, learning_rate=1e-5)
        started = time.perf_counter()
        summary = agent.train()
        wall = time.perf_counter() - started
        rows = [json.loads(line) for line in Path(summary.metrics).read_text().splitlines()]
    rollout = [r["rollout_tokens_per_s"] for r in rows]
    trainer = [r["tokens_per_s"] for r in rows]
    device = args.device or "cpu"
    print(f"model {args.model} ({params / 1e6:.0f}M parameters) on {device}, {os.cpu_count()} CPU cores, "
          f"load average {os.getloadavg()[0]:.1f}; {args.steps} steps x {args.batch_size} tasks x G={args.group_size}"
          f"{' (async)' if args.async_mode else ''}")
    print(f"rollout tokens/s (generated): median {statistics.median(rollout):.1f} (per step: {', '.join(f'{v:.1f}' for v in rollout)})")
    print(f"trainer tokens/s (read):      median {statistics.median(trainer):.1f} (per step: {', '.join(f'{v:.1f}' for v in trainer)})")
    print(f"wall time {wall:.1f}s for {summary.episodes} episodes; rollout {sum(r['rollout_s'] for r in rows):.1f}s, "
          f"train {sum(r['train_s'] for r in rows):.1f}s (async overlaps them)")
    if args.peak_tflops and device.startswith("cuda"):
        flops = (6 + 2) * params * statistics.median(trainer)  # forward + backward + the reference forward
        print(f"trainer MFU: {flops / (args.peak_tflops * 1e12):.2%} of {args.peak_tflops} TFLOP/s")


if __name__ == "__main__":
    main()
