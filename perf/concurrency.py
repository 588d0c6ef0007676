"""Does a trial of 100 tasks take about as long as a trial of 1? (issue 6, part 1)

Starts the fake OpenAI-compatible server in a child process (each request answered after a fixed
latency), then runs HotpotQA cot-context REFLEXION for 2 trials with 1 task and with 100 tasks
(concurrency 100, cache off), in this process, after one warm-up run that pays the lazy imports
and the first connection. The fake model is always wrong, so every task makes 3 calls: actor,
reflection, actor again; the critical path is 3 x latency in both runs.

Each size runs --repeat times, alternating; the fastest wall time of each counts (other processes
on a shared machine only ever add time). Prints both wall times, their ratio (target <= 1.5), and
this process's CPU time per model call (target < 2 ms): the server's CPU is in the child and is
not counted.

    .venv/bin/python perf/concurrency.py [--latency-ms 200] [--tasks 100] [--repeat 3] [--progress]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf.server_process import ServerProcess  # noqa: E402
from reinagent.config import RunConfig  # noqa: E402
from reinagent.runner import load_run, run_experiment  # noqa: E402


def one_run(server: ServerProcess, tasks: int, run_dir: Path, progress: bool) -> dict[str, float]:
    config = RunConfig(
        benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=2, num_envs=tasks,
        model="openai/fake", base_url=server.base_url, max_concurrency=100, cache=False, run_dir=str(run_dir),
    )
    server_cpu = server.cpu_s()
    wall, cpu = time.perf_counter(), time.process_time()
    run_experiment(config, progress=progress)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    server_cpu = server.cpu_s() - server_cpu
    _spec, records = load_run(run_dir)
    calls = sum(len(r.calls) for r in records)
    errors = sum(r.error is not None for r in records)
    return {"wall_s": wall, "cpu_s": cpu, "server_cpu_s": server_cpu, "calls": calls, "errors": errors}


def best_of(runs: list[dict[str, float]]) -> dict[str, float]:
    """The fastest run's wall time (noise from other processes only ever adds time) and the
    median CPU time."""
    def median(key: str) -> float:
        return sorted(r[key] for r in runs)[len(runs) // 2]

    return {**min(runs, key=lambda r: r["wall_s"]), "cpu_s": median("cpu_s"), "server_cpu_s": median("server_cpu_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each size; the fastest counts")
    parser.add_argument("--progress", action="store_true", help="show the progress bar, as `reinagent run` does")
    parser.add_argument("--profile", help="write a cProfile of one large run to this file")
    args = parser.parse_args()
    smalls, larges = [], []
    with ServerProcess(latency_s=args.latency_ms / 1000) as server, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        one_run(server, 1, root / "warmup", args.progress)
        for i in range(args.repeat):  # alternate, so slow spells of a shared machine hit both sizes
            smalls.append(one_run(server, 1, root / f"small{i}", args.progress))
            larges.append(one_run(server, args.tasks, root / f"large{i}", args.progress))
        if args.profile:
            import cProfile

            with cProfile.Profile() as prof:
                one_run(server, args.tasks, root / "profiled", args.progress)
            prof.dump_stats(args.profile)
        served = server.count()
    small, large = best_of(smalls), best_of(larges)
    critical = 3 * args.latency_ms / 1000
    for name, r, runs in (("1 task", small, smalls), (f"{args.tasks} tasks", large, larges)):
        walls = ", ".join(f"{x['wall_s']:.3f}" for x in runs)
        print(f"{name:>10}: wall {r['wall_s']:.3f} s ({r['wall_s'] - critical:+.3f} s over the critical path; "
              f"runs: {walls}), {r['calls']:.0f} model calls, {r['errors']:.0f} errors, "
              f"CPU {r['cpu_s']:.3f} s (server {r['server_cpu_s']:.3f} s)")
    ratio = large["wall_s"] / small["wall_s"]
    per_call = large["cpu_s"] / large["calls"] * 1000
    marginal = (large["cpu_s"] - small["cpu_s"]) / (large["calls"] - small["calls"]) * 1000
    print(f"latency per call {args.latency_ms:.0f} ms, critical path {critical:.3f} s, "
          f"server answered {served} requests")
    print(f"wall-time ratio {args.tasks} tasks / 1 task: {ratio:.2f} (target <= 1.5)")
    print(f"framework CPU per model call: {per_call:.2f} ms (whole run / calls), "
          f"{marginal:.2f} ms marginal (target < 2 ms)")


if __name__ == "__main__":
    main()
