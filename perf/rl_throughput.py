"""Rollout and trainer throughput of reinagent.rl (GRPO on `arithmetic`), in tokens per second.

    .venv/bin/python perf/rl_throughput.py                       # embedded SmolLM2-135M on CPU, TRL's trainer
    .venv/bin/python perf/rl_throughput.py --trainer reinagent   # our own GRPO loss
    .venv/bin/python perf/rl_throughput.py --compare             # both, and the ratio trl / reinagent
    .venv/bin/python perf/rl_throughput.py --steps 3 --async     # the AReaL-style mode (our trainer)
    .venv/bin/python perf/rl_throughput.py --steps 0 --rounds 15 # no training: only rollouts vs generate
    .venv/bin/python perf/rl_throughput.py --model local:DIR --device cuda --peak-tflops 989
    .venv/bin/python perf/rl_throughput.py --hogs 2                # the same with two busy-looping processes
    .venv/bin/python perf/rl_throughput.py --train-precision bf16      # bf16 autocast, fp32 master weights (TRL's trainer)
    .venv/bin/python perf/rl_throughput.py --json                  # also one JSON line per trainer on stdout

Rollouts against plain generate (the ratio issue 29 asks to be >= 0.8). After training, on the
trained weights and the last step's tasks, --rounds rounds each time one training rollout
(TokenRollout.run: prompts rendered and tokenised, environments made and stepped, replies sampled
with their log-probs, as a GRPO step runs it) and one plain batched `model.generate` (KV cache, the
same batch_size x G prompts already tokenised, sampling at the same temperature, the same
max_new_tokens, rows stopped at the same end tokens; tokens after a row's end not counted). The two
alternate within a round (rollout first in odd rounds, generate first in even ones) after one
untimed warm-up of each, and both start from the same seed, so they sample the same tokens (the
script says in how many rounds they did). Each round gives a ratio of the two tokens/s measured a
second apart; the median over rounds, with the quartiles, min and max and every round's ratio, is
the figure. On a shared machine the load moves between phases minutes apart (issue 53: one phase
after the other read 0.45, 0.65, 4.30 and 1.83 in four runs), much less within one round. The same
ratio over this process's CPU seconds (every thread's) is printed beside it: time spent waiting
for a core while other processes run does not count there, so it barely moves with the load.

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
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

say = print  # the human-readable lines; to stderr under --json, so stdout holds only the JSON


def main() -> None:
    global say
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local")
    parser.add_argument("--steps", type=int, default=2, help="Training steps (0: only the rollout / generate rounds).")
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
    parser.add_argument("--rounds", "--generate-repeats", dest="rounds", type=int, default=9,
                        help="Interleaved rounds of (rollout, plain generate) per trainer, after one warm-up of each.")
    parser.add_argument("--json", action="store_true", help="One JSON line per trainer on stdout (the rest on stderr).")
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 0:
        fail("--rounds must be at least 1 and --steps at least 0 (0: no training, only the rounds)")
    if args.json:
        def say(*parts, **kw):
            print(*parts, **kw, file=sys.stderr)
    hogs = [start_hog() for _ in range(args.hogs)]
    device = args.device or "cpu"
    load = os.getloadavg()[0]
    say(f"model {args.model} on {device}, {os.cpu_count()} CPU cores, load average {load:.1f}; "
        f"{args.steps} steps x {args.batch_size} tasks x G={args.group_size}{' (async)' if args.async_mode else ''}")
    trainers = ("trl", "reinagent") if args.compare and args.steps else (args.trainer,)  # no training: one set of rounds
    try:
        peaks = None if device.startswith("cuda") or not args.steps else matmul_peaks(args.threads, args.matmul_size)
        results = {name: measure(args, name, peaks) for name in trainers}
    finally:
        for hog in hogs:
            hog.kill()
    if args.compare and args.steps:
        trl, ours = results["trl"], results["reinagent"]
        say(f"ratio trl / reinagent: rollout tokens/s {trl['train_rollout_tok_s'] / ours['train_rollout_tok_s']:.2f}, "
            f"trainer tokens/s {trl['trainer_tok_s'] / ours['trainer_tok_s']:.2f}")
    if args.json:
        for name, result in results.items():
            print(json.dumps({"trainer": name if args.steps else None, "model": args.model, "device": device,
                              "load_average": load, **result}))


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
    say(f"matmul peak ({size}x{size}, torch threads {torch.get_num_threads()}): fp32 {peaks['fp32']:.0f} GFLOP/s, "
        f"bf16 {peaks['bf16']:.0f} GFLOP/s")
    return peaks


def measure(args: argparse.Namespace, trainer_name: str, peaks: dict[str, float] | None = None) -> dict:
    """Train `args.steps` steps with one trainer (none at 0), then the interleaved rounds; print
    both and return the figures (the --json fields)."""
    from reinagent.rl import RLAgent
    from reinagent.rl.policy import load_policy
    from reinagent.rl.rollout import TokenRollout

    model, tokenizer = load_policy(args.model, device=args.device)  # fresh weights for each trainer
    params = sum(p.numel() for p in model.parameters())
    figures: dict = {"parameters": params}
    with tempfile.TemporaryDirectory() as out:
        agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", max_turns=1,
                        max_response_length=args.max_response_length, react_format=args.react_format,
                        batch_size=args.batch_size, group_size=args.group_size, max_steps=max(1, args.steps),
                        max_workers=args.batch_size * args.group_size, async_mode=args.async_mode,
                        threads=args.threads, output_dir=out, learning_rate=1e-5, trainer=trainer_name,
                        save_steps=max(1, args.steps), train_precision=args.train_precision)
        if args.steps:
            seen = []  # each step's tasks: the last step's are the rounds' tasks
            real_run = TokenRollout.run

            def run(self, model, tasks, *a, **k):
                seen.append(tasks)
                return real_run(self, model, tasks, *a, **k)

            TokenRollout.run = run
            started = time.perf_counter()
            try:
                summary = agent.train()
            finally:
                TokenRollout.run = real_run
            figures.update(report_training(args, trainer_name, params, summary, time.perf_counter() - started, peaks))
            tasks = seen[-1]
        else:
            agent.ensure_policy()  # torch threads, as training sets them
            tasks = agent.bench.load_tasks("train")[: args.batch_size]
            say(f"[no training] {params / 1e6:.0f}M parameters")
        rounds = interleaved(agent, model, tasks, args.group_size, args.rounds)
    figures.update(report_rounds(rounds, len(tasks) * args.group_size))
    return figures


def report_training(args, trainer_name: str, params: int, summary, wall: float, peaks) -> dict:
    """Print the training steps' rollout and trainer tokens/s and the MFU; return their medians."""
    rows = [json.loads(line) for line in Path(summary.metrics).read_text().splitlines()]
    rollout = [r["rollout_tokens_per_s"] for r in rows]
    trainer = [r["tokens_per_s"] for r in rows]
    name = "reinagent (async)" if args.async_mode else rows[0].get("trainer", trainer_name)
    say(f"[{name}] {params / 1e6:.0f}M parameters")
    say(f"  rollout tokens/s in training:  median {statistics.median(rollout):.1f} (per step: {', '.join(f'{v:.1f}' for v in rollout)})")
    say(f"  trainer tokens/s (read):       median {statistics.median(trainer):.1f} (per step: {', '.join(f'{v:.1f}' for v in trainer)})")
    say(f"  wall time {wall:.1f}s for {summary.episodes} episodes (checkpoints included); rollout "
        f"{sum(r['rollout_s'] for r in rows):.1f}s, train {sum(r['train_s'] for r in rows):.1f}s (async overlaps them)")
    flops = 6 * params * statistics.median(trainer)  # forward (2) + backward (4) per token read
    mfu = None
    if args.peak_tflops and (args.device or "cpu").startswith("cuda"):
        mfu = flops / (args.peak_tflops * 1e12)
        say(f"  trainer MFU: {mfu:.2%} of {args.peak_tflops} TFLOP/s")
    elif peaks:
        peak = peaks[args.train_precision]
        mfu = flops / (peak * 1e9)
        say(f"  trainer MFU ({args.train_precision}): 6 x {params / 1e6:.0f}M x {statistics.median(trainer):.1f} tokens/s = "
            f"{flops / 1e9:.1f} GFLOP/s, {mfu:.1%} of the {args.train_precision} matmul peak {peak:.0f} GFLOP/s")
    return {"train_rollout_tok_s": statistics.median(rollout), "trainer_tok_s": statistics.median(trainer), "mfu": mfu}


@dataclass(frozen=True)
class Phase:
    """One timed rollout or plain generate: the replies sampled (token ids, each up to its end
    token), wall seconds, and this process's CPU seconds (every thread's), which other processes'
    load does not lengthen as it does the wall."""

    replies: list[list[int]]
    wall_s: float
    cpu_s: float

    @property
    def tokens(self) -> int:
        return sum(len(r) for r in self.replies)


@dataclass(frozen=True)
class Round:
    """The same seed's rollout and plain generate, one right after the other."""

    rollout_first: bool
    rollout: Phase
    generate: Phase

    @property
    def ratio(self) -> float:
        """rollout / generate tokens/s, over wall seconds."""
        return (self.rollout.tokens / self.rollout.wall_s) / (self.generate.tokens / self.generate.wall_s)

    @property
    def cpu_ratio(self) -> float:
        """The same over CPU seconds: a cross-check that the load barely moves."""
        return (self.rollout.tokens / self.rollout.cpu_s) / (self.generate.tokens / self.generate.cpu_s)


@dataclass
class Rounds:
    threads: int
    rounds: list[Round] = field(default_factory=list)


def interleaved(agent, model, tasks: list, group: int, count: int) -> Rounds:
    """`count` rounds of one training rollout and one plain generate of the same prompts, in
    alternating order, after one untimed warm-up of each (first calls pay for allocation)."""
    import torch

    rollout = agent.token_rollout()
    temperature = agent.config.temperature
    prompts = [rollout.start(t, g, k).prompt_ids for g, t in enumerate(tasks) for k in range(group)]

    def timed(work) -> Phase:
        wall, cpu = time.perf_counter(), time.process_time()
        replies = work()
        return Phase(replies, time.perf_counter() - wall, time.process_time() - cpu)

    def timed_rollout(seed: int) -> Phase:
        # one turn (max_turns = 1): an episode's completion is its reply
        return timed(lambda: [e.completion_ids for e in rollout.run(
            model, tasks, samples=group, temperature=temperature, seed=seed)])

    def timed_generate(seed: int) -> Phase:
        torch.manual_seed(seed)  # as the rollout seeds itself: the same draws, so the same tokens
        return timed(lambda: plain_generate(model, rollout, prompts, temperature))

    timed_rollout(10_000), timed_generate(10_000)  # warm-up, not counted
    measured = Rounds(threads=torch.get_num_threads())
    for index in range(count):
        seed = 10_001 + index
        first = index % 2 == 0
        if first:
            r, g = timed_rollout(seed), timed_generate(seed)
        else:
            g, r = timed_generate(seed), timed_rollout(seed)
        measured.rounds.append(Round(first, r, g))
    return measured


def plain_generate(model, rollout, prompts: list[list[int]], temperature: float) -> list[list[int]]:
    """The replies of one batched model.generate over the prompt ids (left-padded), as the
    rollout samples (temperature, no top-k/top-p, KV cache, its end tokens), each row cut after its
    end token (the rollout does not count the padding after it either)."""
    import torch

    ends, pad = rollout.ends, rollout.pad_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=model.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=rollout.cfg.max_response_length,
                                 do_sample=True, temperature=temperature, top_k=0, top_p=1.0, eos_token_id=ends,
                                 pad_token_id=pad, use_cache=True)
    finally:
        model.train(was_training)
    return [row[:next((i + 1 for i, t in enumerate(row) if t in ends), len(row))] for row in out[:, width:].tolist()]


def spread(values: list[float]) -> dict[str, float]:
    """Median, quartiles, min and max."""
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else (values[0],) * 3
    return {"median": statistics.median(values), "q1": q1, "q3": q3, "min": min(values), "max": max(values)}


def report_rounds(measured: Rounds, batch: int) -> dict:
    """Print the rounds: rollout and generate tokens/s, the ratio's median, quartiles, range and
    every round's ratio (over wall and over CPU seconds); return them (the --json fields)."""
    rounds = measured.rounds
    ratios, cpu_ratios = [r.ratio for r in rounds], [r.cpu_ratio for r in rounds]
    wall, cpu = spread(ratios), spread(cpu_ratios)
    rollout = statistics.median(r.rollout.tokens / r.rollout.wall_s for r in rounds)
    generate = statistics.median(r.generate.tokens / r.generate.wall_s for r in rounds)
    same = sum(r.rollout.replies == r.generate.replies for r in rounds)
    say(f"  interleaved rounds ({len(rounds)}, batch {batch}, torch threads {measured.threads}, after one warm-up of each):")
    say(f"    rollout tokens/s: median {rollout:.1f}; plain model.generate tokens/s: median {generate:.1f}; "
        f"same tokens sampled in {same} of {len(rounds)} rounds")
    say(f"    rollout / generate: median {wall['median']:.2f} (quartiles {wall['q1']:.2f}-{wall['q3']:.2f}, "
        f"min {wall['min']:.2f}, max {wall['max']:.2f}; target >= 0.8)")
    say("    per round (r: rollout first, g: generate first): "
        + ", ".join(f"{'r' if r.rollout_first else 'g'}{r.ratio:.2f}" for r in rounds))
    say(f"    over CPU seconds: median {cpu['median']:.2f} (quartiles {cpu['q1']:.2f}-{cpu['q3']:.2f}, "
        f"min {cpu['min']:.2f}, max {cpu['max']:.2f}); per round: {', '.join(f'{v:.2f}' for v in cpu_ratios)}")
    return {"rollout_tok_s": rollout, "generate_tok_s": generate,
            **{f"ratio_{k}": v for k, v in wall.items()}, "ratios": ratios,
            **{f"cpu_ratio_{k}": v for k, v in cpu.items()}, "cpu_ratios": cpu_ratios,
            "first": ["rollout" if r.rollout_first else "generate" for r in rounds], "rounds": len(rounds),
            "same_tokens_rounds": same, "torch_threads": measured.threads}


def start_hog():
    """A process that spins on one core until killed."""
    import subprocess

    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def fail(message: str) -> None:
    """Bad input: one line naming the fix, exit 2."""
    print(f"rl_throughput: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    from reinagent.errors import ConfigError

    try:
        main()
    except ConfigError as err:  # a model that does not load, a bad setting: the one line it says
        fail(str(err))
