"""Sandbox throughput: all 164 canonical HumanEval solutions with 1 worker, then with N.

    .venv/bin/python perf/humaneval_sandbox.py [--workers N] [--mode auto|bwrap|uid|rlimits]

Prints solutions per second for each worker count and the ratio (N workers / 1 worker), all
measured in this one run. Not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from reinagent import benchmarks
from reinagent.sandbox import Sandbox


def measure(bench, workers: int, mode: str) -> tuple[float, int, int]:
    bench.sandbox = Sandbox(workers, mode=mode)
    tasks = bench.load_tasks("test")
    bench.check_solutions({tasks[0].task_id: tasks[0].canonical})  # warm-up: probe, page cache
    start = time.perf_counter()
    results = bench.check_solutions({t.task_id: t.canonical for t in tasks})
    wall = time.perf_counter() - start
    bench.close()
    return wall, sum(r.passed for r in results.values()), len(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--mode", default="auto")
    args = parser.parse_args()
    bench = benchmarks.make("humaneval")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    rates = {}
    for workers in (1, args.workers):
        wall, passed, total = measure(bench, workers, args.mode)
        rates[workers] = total / wall
        print(f"workers={workers:<3} mode={bench.sandbox.mode.value:<8} {passed}/{total} passed  "
              f"{wall:6.2f} s  {rates[workers]:6.1f} solutions/s")
    if args.workers != 1:
        print(f"speed-up with {args.workers} workers: {rates[args.workers] / rates[1]:.2f}x")


if __name__ == "__main__":
    main()
