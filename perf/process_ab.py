"""A run's wall time with the local engine in its own process against in the run's process.

    .venv/bin/python perf/process_ab.py [--tasks 8] [--rounds 1] [--max-concurrency 8]
                                        [--model local:qwen2.5-coder-1.5b] [--keep DIR] [--json]

perf/event_loop.py shows the event loop waiting on the engine's steps (reinagent/llm/ov_process.py);
this asks what that wait costs a real run. Each round makes the same run twice, the order
alternating: the first `--tasks` HumanEval tasks, trial 1 only (greedy, the settings of
scripts/paper_on_qwen.sh), no response cache, once with REINAGENT_OV_IN_PROCESS=1 (the engine in
the run's process, as every committed engine run was made) and once with the engine in its own
process (the default). Read from each run's records: the span from the first episode's start to
the last one's end, the completion tokens decoded in it, and each episode's time outside its model
calls (judging, the sandbox, and, in-process, the loop's waits). Also counted: for how many tasks
the two runs' replies (the program and the test generation's) are all identical (greedy is not
batch-invariant: a reply can part at a near tie when the batch around it differs, and a reply that
parts changes the tokens and the span). Medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # reinagent, from a checkout
MODES = {"in-process": {"REINAGENT_OV_IN_PROCESS": "1"}, "own process": {}}


def paper_flags() -> list[str]:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "paper_on_qwen.sh"), "--print-flags"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def one_run(mode: str, run_dir: Path, args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "REINAGENT_OV_IN_PROCESS"} | MODES[mode]
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's reinagent
    # later flags win: one trial, this model, this many in flight, no cache
    cmd = [sys.executable, "-c", "import sys; from reinagent.cli import main; sys.exit(main())",
           "run", "--benchmark", "humaneval", "--num-envs", str(args.tasks), *paper_flags(), "--num-trials", "1", "--model", args.model,
           "--max-concurrency", str(args.max_concurrency), "--no-cache", "--run-dir", str(run_dir), "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"process_ab: the {mode} run failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return {"wall_s": wall, **measure(run_dir)}


def measure(run_dir: Path) -> dict:
    """A finished run's span, completion tokens, time outside calls and replies, from its records."""
    from reinagent.store import read_records

    records = read_records(run_dir)  # the live records: a record appended again counts once
    outside = [(r.finished_at - r.started_at) - sum(c.latency_s for c in r.trajectory.calls) for r in records]
    span = max(r.finished_at for r in records) - min(r.started_at for r in records)
    tokens = sum(c.completion_tokens for r in records for c in r.trajectory.calls)
    # the test-generation call's reply too: it is a call whose reply the messages do not carry
    replies = {r.task_id: [m.content for m in r.trajectory.messages if m.role == "assistant"]
               + [m["content"] for m in r.trajectory.extra.get("test_generation", []) if m["role"] == "assistant"]
               for r in records}
    return {"span_s": span, "completion_tokens": tokens, "tok_s": tokens / span,
            "outside_calls_median_s": statistics.median(outside), "solved": sum(r.success for r in records),
            "replies": replies}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=8, help="the first N HumanEval tasks (default 8)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-concurrency", type=int, default=8)
    ap.add_argument("--model", default="local:qwen2.5-coder-1.5b", help="a local model (default: the 1.5B)")
    ap.add_argument("--keep", type=Path, help="keep the run directories under this folder")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.model.startswith("local"):
        ap.error(f"--model: a local model (local, local:NAME or local:PATH); got {args.model!r}")
    if min(args.tasks, args.rounds, args.max_concurrency) < 1:
        ap.error("--tasks, --rounds and --max-concurrency must be at least 1")
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else print
    base = args.keep or Path(tempfile.mkdtemp(prefix="process_ab-"))
    measured: dict[str, list[dict]] = {mode: [] for mode in MODES}
    shared: list[int] = []
    for r in range(args.rounds):
        order = list(MODES) if r % 2 == 0 else list(MODES)[::-1]
        for mode in order:
            m = one_run(mode, base / f"round{r + 1}-{mode.replace(' ', '_')}", args)
            measured[mode].append(m)
            say(f"  round {r + 1} {mode}: span {m['span_s']:.0f} s, {m['completion_tokens']} completion tokens, "
                f"{m['tok_s']:.2f} tok/s, outside calls median {m['outside_calls_median_s']:.1f} s, "
                f"{m['solved']}/{args.tasks} solved")
        a, b = (measured[mode][-1]["replies"] for mode in MODES)
        shared.append(sum(a[t] == b[t] for t in a))
    result = {"model": args.model, "tasks": args.tasks, "rounds": args.rounds, "max_concurrency": args.max_concurrency,
              "identical_replies_median": statistics.median(shared)}
    say(f"{args.model}, the first {args.tasks} HumanEval tasks, trial 1, {args.max_concurrency} in flight, "
        f"median of {args.rounds} rounds; tasks whose replies are identical in both runs: {shared}")
    say(f"{'engine':<14}{'span s':>8}{'tokens':>8}{'tok/s':>8}{'outside calls s':>17}")
    for mode, rounds in measured.items():
        keys = ("span_s", "completion_tokens", "tok_s", "outside_calls_median_s")
        med = {k: statistics.median(m[k] for m in rounds) for k in keys}
        result.update({f"{mode.replace(' ', '_').replace('-', '_')}_{k}": round(v, 2) for k, v in med.items()})
        say(f"{mode:<14}{med['span_s']:>8.0f}{med['completion_tokens']:>8.0f}{med['tok_s']:>8.2f}"
            f"{med['outside_calls_median_s']:>17.1f}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
