"""How close does a run come to its critical path without a trial barrier? (issue 17, part 1)

Runs HotpotQA cot-context REFLEXION, 20 tasks x 5 trials (concurrency 20, cache off), against a
loopback OpenAI-compatible server whose every call waits a random 0.1x-1.9x of --latency-ms. The
latency of a call is a pure function of its content and --seed, so both schedules meet the same
latencies. The fake model is always wrong: every task makes actor, reflection, actor, ... calls,
each waiting for the one before.

The critical path is the slowest task's own chain of dependent calls: the sum of its calls'
latencies (a task's calls are sequential in both schedules). A run can finish no sooner. Prints
wall time / critical path for the pipeline schedule (target <= 1.2) and the barrier schedule,
each the fastest of --repeat runs (other processes on a shared machine only ever add time).

    .venv/bin/python perf/pipeline.py [--latency-ms 200] [--tasks 20] [--trials 5] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import hashlib
import json
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reinagent import benchmarks  # noqa: E402
from reinagent.config import RunConfig  # noqa: E402
from reinagent.llm.fake_server import FakeOpenAIServer  # noqa: E402
from reinagent.runner import load_run, run_experiment  # noqa: E402


class VaryingLatency:
    """The server's per-call hook: sleep 0.1x-1.9x the base latency, chosen by the call's content,
    and remember which task the call belonged to and how long it waited."""

    def __init__(self, base_s: float, seed: int, questions: dict[str, str]):
        self.base_s, self.seed, self.questions = base_s, seed, questions
        self.waits: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> None:
        text = json.dumps(body.get("messages", []), sort_keys=True)
        digest = hashlib.sha256(f"{self.seed}:{text}".encode()).digest()
        wait = self.base_s * (0.1 + 1.8 * int.from_bytes(digest[:8], "big") / 2**64)
        plain = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        task = next((tid for tid, q in self.questions.items() if q in plain), "?")
        with self._lock:
            self.waits.append((task, wait))
        time.sleep(wait)
        return None  # no fault: answer normally

    def critical_path_s(self) -> float:
        per_task: dict[str, float] = defaultdict(float)
        for task, wait in self.waits:
            per_task[task] += wait
        if "?" in per_task:
            raise RuntimeError(f"{sum(t == '?' for t, _ in self.waits)} calls named no task's question")
        return max(per_task.values(), default=0.0)


def one_run(args, schedule: str, run_dir: Path, questions: dict[str, str]) -> dict[str, float]:
    hook = VaryingLatency(args.latency_ms / 1000, args.seed, questions)
    with FakeOpenAIServer(fault_when=hook) as server:
        config = RunConfig(benchmark="hotpotqa", agent="cot-context", strategy="reflexion",
                           num_trials=args.trials, num_envs=args.tasks, model="openai/fake",
                           base_url=server.base_url, max_concurrency=args.tasks, cache=False,
                           run_dir=str(run_dir), schedule=schedule)
        wall = time.perf_counter()
        run_experiment(config, progress=False)
        wall = time.perf_counter() - wall
    records = load_run(run_dir)[1]
    return {"wall_s": wall, "critical_s": hook.critical_path_s(), "calls": len(hook.waits),
            "records": len(records), "errors": sum(r.error is not None for r in records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=200.0, help="mean per-call latency")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each schedule; the fastest counts")
    parser.add_argument("--seed", type=int, default=0, help="chooses the latencies")
    args = parser.parse_args()
    bench = benchmarks.make("hotpotqa")
    tasks = bench.load_tasks(bench.default_split)[: args.tasks]
    questions = {t.task_id: t.question for t in tasks}
    runs: dict[str, list[dict[str, float]]] = {"pipeline": [], "barrier": []}
    with tempfile.TemporaryDirectory() as tmp:
        one_run(args, "pipeline", Path(tmp) / "warmup", questions)  # lazy imports, first connection
        for i in range(args.repeat):  # alternate, so slow spells of a shared machine hit both
            for schedule in runs:
                runs[schedule].append(one_run(args, schedule, Path(tmp) / f"{schedule}{i}", questions))
    print(f"{args.tasks} tasks x {args.trials} trials, per-call latency {args.latency_ms:.0f} ms x U(0.1, 1.9)")
    for schedule, results in runs.items():
        best = min(results, key=lambda r: r["wall_s"])
        walls = ", ".join(f"{r['wall_s']:.2f}" for r in results)
        print(f"{schedule:>8}: wall {best['wall_s']:.2f} s, critical path {best['critical_s']:.2f} s, "
              f"ratio {best['wall_s'] / best['critical_s']:.2f} (runs: {walls}); {best['calls']} calls, "
              f"{best['records']} records, {best['errors']} errors")
    print("target: pipeline ratio <= 1.2; load average %.1f" % os.getloadavg()[0])


if __name__ == "__main__":
    main()
