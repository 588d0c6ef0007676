"""How much does a tree search gain from asking for a node's children at once? (issue 16)

Runs one MCTS episode (HotpotQA ReAct, one task, one trial) against the loopback OpenAI-compatible
server with a fixed latency per request, then prints the episode's wall time against the sum of
its calls' latencies. Children of a node, their value samples and the reflections on a batch of
failed branches are each requested concurrently, so the ratio (sum / wall) shows how much of the
episode's model time overlapped; a strictly sequential search would sit at about 1.0.

The fake model answers by the prompt: a random mix of Search, Lookup and a wrong Finish for a
step, "Score: N" for a value prompt, a one-line lesson for a reflection. It never answers right,
so the search spends its whole iteration budget.

    .venv/bin/python perf/rollouts.py [--latency-ms 100] [--iterations 4] [--children 5] [--value-samples 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reinagent import run  # noqa: E402
from reinagent.llm.fake_server import FakeOpenAIServer  # noqa: E402
from reinagent.runner import load_run  # noqa: E402

STEPS = ("Thought: look it up.\nAction: Search[VIVA Media]", "Thought: find the year.\nAction: Lookup[2004]",
         "Thought: the other company.\nAction: Search[Constantin Medien]", "Thought: done.\nAction: Finish[GmbH]")


def reply(messages: list[dict[str, Any]]) -> str:
    text = "\n".join(str(m.get("content")) for m in messages)
    if "Your failed attempt" in text:
        return "I answered with an abbreviation. Next time I will spell the legal form out."
    if "The attempt:" in text:
        return f"The steps look plausible.\nScore: {random.randint(2, 8)}"
    return random.choice(STEPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--children", type=int, default=5)
    parser.add_argument("--value-samples", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(latency_s=args.latency_ms / 1000, reply=reply) as server:
        start = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            run_dir = run(benchmark="hotpotqa", agent="react", rollout="mcts", strategy="none", num_trials=1,
                          num_envs=1, model="openai/fake", base_url=server.base_url, run_dir=str(Path(tmp) / "r"),
                          cache=False, mcts_iterations=args.iterations, mcts_children=args.children,
                          value_samples=args.value_samples, progress=False)
        total = time.perf_counter() - start
        _spec, (record,) = load_run(run_dir)
    calls = record.trajectory.calls
    latency = sum(c.latency_s for c in calls)
    print(f"one MCTS episode: hotpotqa react, {args.iterations} iterations x {args.children} children, "
          f"{args.value_samples} value samples, fake model at {args.latency_ms:.0f} ms per request")
    print(f"nodes {len(record.trajectory.tree)}, model calls {len(calls)} (server saw {server.count}), "
          f"error {record.error}")
    print(f"episode wall {record.wall_s:.2f} s (whole run {total:.2f} s); sum of call latencies {latency:.2f} s")
    print(f"ratio sum/wall = {latency / record.wall_s:.1f}x (1.0 = every call waited for the one before)")


if __name__ == "__main__":
    main()
