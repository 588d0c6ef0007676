"""How many model calls does the response cache save? (issue 6, part 3)

Runs the four Reflexion strategies one after another on the same HotpotQA tasks against the
loopback OpenAI-compatible server, sharing one fresh cache directory, then runs all four again.
Prints, per run, the calls the agents asked for, the calls that reached the server, and the hits
(trial 1 separately: every strategy starts from an empty memory, so trial-1 prompts are
identical across strategies and only the first strategy pays for them).

The fake model's answer depends on the prompt (a hash of it), as a real model's would, so two
requests share an entry only when their prompts are really identical. It never answers right,
so every task runs every trial.

    .venv/bin/python perf/cache_savings.py [--tasks 20] [--trials 3] [--agent cot-context]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reinagent import run  # noqa: E402
from reinagent.llm.fake_server import FakeOpenAIServer  # noqa: E402
from reinagent.runner import load_run  # noqa: E402
from reinagent.strategy import ReflexionStrategy  # noqa: E402


def prompt_dependent_reply(messages: list[dict[str, Any]]) -> str:
    digest = hashlib.sha256("".join(str(m.get("content")) for m in messages).encode()).hexdigest()[:6]
    if "failed attempt" in str(messages[-1].get("content", "")).lower():
        return f"I guessed ({digest}) without reading the context. Next time I will read both paragraphs."
    return f"Thought: a guess.\nAction: Finish[guess {digest}]"


def one_run(server: FakeOpenAIServer, strategy: str, args, run_dir: Path, cache_dir: Path) -> dict[str, int]:
    before = server.count
    with contextlib.redirect_stderr(io.StringIO()):  # the runner's per-trial lines
        run(benchmark="hotpotqa", agent=args.agent, strategy=strategy, num_trials=args.trials,
            num_envs=args.tasks, model="openai/fake", base_url=server.base_url, run_dir=str(run_dir),
            cache_dir=str(cache_dir), cache_scope="shared",  # runs share answers only when asked
            max_concurrency=args.tasks, temperature=args.temperature, progress=False)
    _spec, records = load_run(run_dir)
    calls = [(r.trial, c) for r in records for c in r.calls]
    return {
        "calls": len(calls),
        "server": server.count - before,
        "hits": sum(c.cached for _, c in calls),
        "hits_trial1": sum(c.cached for t, c in calls if t == 1),
        "errors": sum(r.error is not None for r in records),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--agent", default="cot-context", help="cot-context, cot-no-context or react")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="> 0: sampling, so the rollout id (task/trial/call) joins the key")
    args = parser.parse_args()
    strategies = [s.value for s in ReflexionStrategy]
    rows: list[tuple[str, dict[str, int]]] = []
    with tempfile.TemporaryDirectory() as tmp, \
            FakeOpenAIServer(latency_s=args.latency_ms / 1000, reply=prompt_dependent_reply) as server:
        cache_dir = Path(tmp) / "cache"
        for attempt in ("first", "re-run"):
            for strategy in strategies:
                result = one_run(server, strategy, args, Path(tmp) / f"{attempt}-{strategy}", cache_dir)
                rows.append((f"{attempt:<7} {strategy}", result))
    print(f"hotpotqa {args.agent}, {args.tasks} tasks, {args.trials} trials, temperature {args.temperature:g}, "
          f"one shared cache (fake model at {args.latency_ms:.0f} ms)")
    print(f"{'run':<36}{'calls':>7}{'server':>8}{'hits':>6}{'trial-1 hits':>14}{'errors':>8}")
    for name, r in rows:
        print(f"{name:<36}{r['calls']:>7}{r['server']:>8}{r['hits']:>6}{r['hits_trial1']:>14}{r['errors']:>8}")
    first = [r for name, r in rows if name.startswith("first")]
    rerun = [r for name, r in rows if name.startswith("re-run")]
    asked = sum(r["calls"] for r in first)
    paid = sum(r["server"] for r in first)
    print(f"four strategies: {asked} calls asked, {paid} reached the server, cache saved {asked - paid} "
          f"({100 * (asked - paid) / asked:.0f}%); trial-1 calls shared across strategies: "
          f"{sum(r['hits_trial1'] for r in first)}")
    print(f"identical re-run of all four: {sum(r['calls'] for r in rerun)} calls asked, "
          f"{sum(r['server'] for r in rerun)} reached the server")
    if args.temperature == 0:
        print("(greedy: a `none` retry repeats trial 1's prompt word for word, so its later trials are hits "
              "too; with --temperature > 0 each trial's rollout id keeps them apart)")


if __name__ == "__main__":
    main()
