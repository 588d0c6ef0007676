"""Rollout and trainer throughput of reinagent.rl (GRPO on `arithmetic`), in tokens per second.

    .venv/bin/python perf/rl_throughput.py                       # embedded SmolLM2-135M on CPU, TRL's trainer
    .venv/bin/python perf/rl_throughput.py --trainer reinagent   # our own GRPO loss
    .venv/bin/python perf/rl_throughput.py --compare             # both, and the ratio trl / reinagent
    .venv/bin/python perf/rl_throughput.py --steps 3 --async     # the AReaL-style mode (our trainer)
    .venv/bin/python perf/rl_throughput.py --model local:DIR --device cuda --peak-tflops 989
    .venv/bin/python perf/rl_throughput.py --hogs 2                # the same with two busy-looping processes
    .venv/bin/python perf/rl_throughput.py --train-precision bf16      # bf16 autocast, fp32 master weights (TRL's trainer)

Each trainer's rollouts are compared with plain batched `model.generate` (KV cache, sampling at the
same temperature, same batch of batch_size x G prompts, same max_new_tokens) on the same weights
and prompts right after training: `rollout / generate` is the ratio issue 29 asks to be >= 0.8.

Rollout tokens/s counts tokens the policy generated per second of generation; trainer tokens/s
counts every token the forward/backward passes read (prompt, replies, feedback) per second of
update. It also prints the trainer's model FLOPs utilisation (MFU): 6 * parameters * trainer
tokens/s (forward + backward) over this machine's matmul peak, measured in the same run with the
same torch threads (a large fp32 and a bf16 matmul, GFLOP/s each; MFU is given against the peak
of the precision trained in). With --device cuda pass --peak-tflops (the card's datasheet peak)
instead. The reference forward of the KL (kl_coef > 0) adds 2 * parameters * tokens that the MFU
leaves out. `--train-precision bf16` trains under bf16 autocast (fp32 master weights; TRL's trainer).
It prints what one run measured on this machine; nothing is asserted.
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
    parser.add_argument("--train-precision", choices=("fp32", "bf16"), default="fp32",
                        help="fp32, or bf16 autocast with fp32 master weights (TRL's trainer)")
    parser.add_argument("--matmul-size", type=int, default=2048, help="Side of the square matmuls timed for the peak.")
    parser.add_argument("--trainer", choices=("trl", "reinagent"), default="trl",
                        help="GRPO through TRL's GRPOTrainer (default) or our own loss (async mode is always ours)")
    parser.add_argument("--compare", action="store_true", help="Run both trainers and print trl / reinagent ratios.")
    parser.add_argument("--hogs", type=int, default=0, help="Busy-looping processes to run alongside (a loaded machine).")
    parser.add_argument("--generate-repeats", type=int, default=3, help="Plain generate runs (median) per trainer.")
    args = parser.parse_args()
    hogs = [start_hog() for _ in range(args.hogs)]
    device = args.device or "cpu"
    print(f"model {args.model} on {device}, {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}; "
          f"{args.steps} steps x {args.batch_size} tasks x G={args.group_size}{' (async)' if args.async_mode else ''}")
    trainers = ("trl", "reinagent") if args.compare else (args.trainer,)
    try:
        peaks = None if device.startswith("cuda") else matmul_peaks(args.threads, args.matmul_size)
        medians = {name: measure(args, name, peaks) for name in trainers}
    finally:
        for hog in hogs:
            hog.kill()
    if args.compare:
        (r_trl, t_trl), (r_ours, t_ours) = medians["trl"], medians["reinagent"]
        print(f"ratio trl / reinagent: rollout tokens/s {r_trl / r_ours:.2f}, trainer tokens/s {t_trl / t_ours:.2f}")


def matmul_peaks(threads: int | None, size: int) -> dict[str, float]:
    """GFLOP/s of a size x size matmul in fp32 and in bf16 on this CPU with the threads training
    uses: the best of several timed runs of at least 0.3 s each (2 * size^3 flops per matmul)."""
    import torch

    from reinagent.rl.policy import torch_threads

    torch.set_num_threads(torch_threads(threads))
    peaks = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a = torch.randn(size, size, dtype=dtype)
        b = torch.randn(size, size, dtype=dtype)
        torch.mm(a, b)  # warm-up: kernel selection, page faults
        best = 0.0
        for _ in range(3):
            runs, started = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - started) < 0.3:
                torch.mm(a, b)
                runs += 1
            best = max(best, 2 * size ** 3 * runs / elapsed / 1e9)
        peaks[name] = best
    print(f"matmul peak ({size}x{size}, torch threads {torch.get_num_threads()}): fp32 {peaks['fp32']:.0f} GFLOP/s, "
          f"bf16 {peaks['bf16']:.0f} GFLOP/s")
    return peaks


def measure(args: argparse.Namespace, trainer_name: str, peaks: dict[str, float] | None = None) -> tuple[float, float]:
    """Train `args.steps` steps with one trainer; print and return (rollout, trainer) median tokens/s."""
    from reinagent.rl import RLAgent
    from reinagent.rl.policy import load_policy
    from reinagent.rl.rollout import TokenRollout

    model, tokenizer = load_policy(args.model, device=args.device)  # fresh weights for each trainer
    params = sum(p.numel() for p in model.parameters())
    with tempfile.TemporaryDirectory() as out:
        agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", max_turns=1,
                        max_response_length=args.max_response_length, react_format=args.react_format,
                        batch_size=args.batch_size, group_size=args.group_size, max_steps=args.steps,
                        max_workers=args.batch_size * args.group_size, async_mode=args.async_mode,
                        threads=args.threads, output_dir=out, learning_rate=1e-5, trainer=trainer_name,
                        save_steps=args.steps, train_precision=args.train_precision)
        seen = []  # each step's episodes: their prompts feed the plain generate below
        real_run = TokenRollout.run

        def run(self, *a, **k):
            episodes = real_run(self, *a, **k)
            seen.append(episodes)
            return episodes

        TokenRollout.run = run
        started = time.perf_counter()
        try:
            summary = agent.train()
        finally:
            TokenRollout.run = real_run
        wall = time.perf_counter() - started
        rows = [json.loads(line) for line in Path(summary.metrics).read_text().splitlines()]
        plain = [plain_generate(model, tokenizer, agent, seen[-1], args.max_response_length)
                 for _ in range(args.generate_repeats)]
    rollout = [r["rollout_tokens_per_s"] for r in rows]
    trainer = [r["tokens_per_s"] for r in rows]
    name = "reinagent (async)" if args.async_mode else rows[0].get("trainer", trainer_name)
    print(f"[{name}] {params / 1e6:.0f}M parameters")
    print(f"  rollout tokens/s (generated): median {statistics.median(rollout):.1f} (per step: {', '.join(f'{v:.1f}' for v in rollout)})")
    print(f"  trainer tokens/s (read):      median {statistics.median(trainer):.1f} (per step: {', '.join(f'{v:.1f}' for v in trainer)})")
    print(f"  wall time {wall:.1f}s for {summary.episodes} episodes (checkpoints included); rollout "
          f"{sum(r['rollout_s'] for r in rows):.1f}s, train {sum(r['train_s'] for r in rows):.1f}s (async overlaps them)")
    import torch

    print(f"  plain model.generate tokens/s: median {statistics.median(plain):.1f} (runs: "
          f"{', '.join(f'{v:.1f}' for v in plain)}; batch {len(seen[-1])}, torch threads {torch.get_num_threads()})")
    print(f"  rollout / generate: {statistics.median(rollout) / statistics.median(plain):.2f} (target >= 0.8)")
    flops = 6 * params * statistics.median(trainer)  # forward (2) + backward (4) per token read
    if args.peak_tflops and (args.device or "cpu").startswith("cuda"):
        print(f"  trainer MFU: {flops / (args.peak_tflops * 1e12):.2%} of {args.peak_tflops} TFLOP/s")
    elif peaks:
        peak = peaks[args.train_precision]
        print(f"  trainer MFU ({args.train_precision}): 6 x {params / 1e6:.0f}M x {statistics.median(trainer):.1f} tokens/s = "
              f"{flops / 1e9:.1f} GFLOP/s, {flops / (peak * 1e9):.1%} of the {args.train_precision} matmul peak "
              f"{peak:.0f} GFLOP/s")
    return statistics.median(rollout), statistics.median(trainer)


def plain_generate(model, tokenizer, agent, episodes, max_new_tokens: int) -> float:
    """Generated tokens/s of one batched model.generate over the episodes' first prompts: sampling
    at temperature 1, KV cache, stopping rows at the same end tokens; tokens after a row's end are
    not counted (the rollout does not count them either)."""
    import torch

    from reinagent.rl.policy import end_token_ids

    ends = end_token_ids(tokenizer)
    prompts = [e.prompt_ids for e in episodes]
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=model.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)
    model.eval()
    started = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=True,
                             temperature=1.0, top_k=0, top_p=1.0, eos_token_id=ends, pad_token_id=pad, use_cache=True)
    seconds = time.perf_counter() - started
    tokens = 0
    for row in out[:, width:].tolist():
        tokens += next((i + 1 for i, t in enumerate(row) if t in ends), len(row))
    return tokens / seconds


def start_hog():
    """A process that spins on one core until killed."""
    import subprocess

    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


if __name__ == "__main__":
    main()
