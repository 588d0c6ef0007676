"""`reinagent check-solutions`: run outside solutions against a benchmark's hidden tests.

    reinagent check-solutions --benchmark humaneval --solutions samples.jsonl

Each line is `{"task_id": ..., "completion": ...}`, HumanEval's sample format: for HumanEval the
completion continues the prompt (a full re-definition of the function works too); for MBPP it is
the whole function. stdout gets `{"task_id": true|false, ...}` as JSON; stderr the pass count.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from reinagent.config import MAX_TIMEOUT_S
from reinagent.errors import ConfigError, ReinagentError, choices

BENCHMARKS = ("humaneval", "mbpp")


def read_solutions(path: Path, bench) -> dict[str, str]:
    """task id -> completion; a ReinagentError naming the line for anything malformed."""
    if not path.is_file():
        raise ReinagentError(f"solutions file {path} does not exist")
    solutions: dict[str, str] = {}
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            where = f"{path}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ReinagentError(f"{where}: not UTF-8 text (byte {err.start + 1})") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as err:  # a 5,000-digit number is a ValueError too
                raise ReinagentError(f"{where}: malformed JSON ({getattr(err, 'msg', err)})") from None
            if not isinstance(row, dict) or "task_id" not in row or "completion" not in row:
                raise ReinagentError(f"{where}: expected an object with 'task_id' and 'completion'")
            if not isinstance(row["completion"], str):
                raise ReinagentError(f"{where}: 'completion' must be a string")
            task_id = bench.canonical_id(row["task_id"])
            if task_id is None:
                shown = repr(row["task_id"])
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                raise ReinagentError(f"{where}: unknown task_id {shown} for {bench.name} "
                                     f"(ids look like {bench.id_prefix}/N)")
            if task_id in solutions:
                raise ReinagentError(f"{where}: second solution for {task_id}")
            solutions[task_id] = row["completion"]
    if not solutions:
        raise ReinagentError(f"solutions file {path} holds no solutions")
    return solutions


def check_file(benchmark: str, path: Path, timeout_s: float = 10.0, workers: int | None = None,
               allow_weak_sandbox: bool = False) -> dict[str, bool]:
    from reinagent import benchmarks
    from reinagent.sandbox import Sandbox

    if benchmark not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {benchmark!r} for check-solutions; valid: {choices(BENCHMARKS)}")
    if not 0 < timeout_s <= MAX_TIMEOUT_S:  # nan fails every comparison; inf or 1e19 would fail every program
        raise ReinagentError(f"--timeout-s must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}; "
                             f"got {timeout_s}")
    bench = benchmarks.make(benchmark)
    solutions = read_solutions(path, bench)
    if workers:
        bench.sandbox = Sandbox(workers, warn=allow_weak_sandbox)
    try:
        bench.require_strong_sandbox(allow_weak_sandbox)
        results = bench.check_solutions(solutions, timeout_s=timeout_s)
    finally:
        bench.close()
    return {task_id: result.passed for task_id, result in results.items()}


@click.command(name="check-solutions")
@click.option("--benchmark", required=True, help=f"Benchmark whose hidden tests to run: {choices(BENCHMARKS)}.")
@click.option("--solutions", "solutions", required=True, help="JSONL file of {\"task_id\", \"completion\"} lines.")
@click.option("--timeout-s", type=float, default=10.0, show_default=True, help="Seconds per solution.")
@click.option("--workers", type=int, default=None, help="Parallel sandboxed runs (default: CPU count).")
@click.option("--allow-weak-sandbox", is_flag=True, help="Run even without bubblewrap (the uid/rlimits fallback: "
              "generated code can reach the network and host files).")
def check_solutions(benchmark: str, solutions: str, timeout_s: float, workers: int | None,
                    allow_weak_sandbox: bool) -> None:
    """Judge solutions by the hidden tests (run on the trusted side, the solution sandboxed behind
    a proxy); JSON {task_id: passed} on stdout."""
    if workers is not None and workers <= 0:
        raise ReinagentError(f"--workers must be a positive whole number, got {workers}")
    verdicts = check_file(benchmark.strip().lower(), Path(solutions), timeout_s, workers, allow_weak_sandbox)
    click.echo(json.dumps(verdicts, indent=1))
    passed = sum(verdicts.values())
    print(f"{passed}/{len(verdicts)} solutions passed ({benchmark})", file=sys.stderr)
