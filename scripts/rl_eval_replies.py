"""Greedy evaluation of an [rl] config that keeps every reply, so the run can be re-judged later.

    python scripts/rl_eval_replies.py docs/rl_demo/rl.toml OUT.jsonl      # generate and judge
    python scripts/rl_eval_replies.py --rejudge OUT.jsonl                 # judge kept replies again

Each line: task_id, question, gold, reply (the model's text), answer and success (the judge of this
checkout). The episodes are `rl eval`'s (the same token rollout, the same seed); `rl eval --save`
keeps only the solved task ids. Ends with `success: N/M (P%)` on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reinagent.benchmarks.math_judge import judge


def generate(config: str, out: Path, split: str = "test") -> list[dict]:
    from reinagent.rl import RLAgent
    from reinagent.rl.toml import load_rl_config

    agent = RLAgent(config=load_rl_config(config))
    tasks = {t.task_id: t for t in agent.bench.load_tasks(split)[: agent.config.num_tasks]}
    episodes = agent.token_rollout().run(agent.ensure_policy()[0], list(tasks.values()),
                                         temperature=agent.config.eval_temperature, seed=agent.config.seed)
    rows = []
    for ep in episodes:
        task = tasks[ep.task_id]
        reply = next((m["content"] for m in reversed(ep.messages) if m["role"] == "assistant"), "")
        rows.append({"task_id": ep.task_id, "question": task.question, "gold": task.answer, "reply": reply,
                     "answer": ep.answer, "success": ep.success})
    return rows


def rejudge(rows: list[dict]) -> list[dict]:
    for row in rows:
        verdict = judge(row["reply"], row["gold"], question=row["question"])
        row.update(answer=verdict.answer, success=verdict.success)
    return rows


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--rejudge":
        path = Path(argv[1])
        rows = rejudge([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()])
    elif len(argv) == 2:
        path = Path(argv[1])
        rows = generate(argv[0], path)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        tmp.replace(path)
    else:
        sys.exit("usage: rl_eval_replies.py CONFIG.toml OUT.jsonl | rl_eval_replies.py --rejudge OUT.jsonl")
    solved = sum(r["success"] for r in rows)
    print(f"success: {solved}/{len(rows)} ({100 * solved / max(1, len(rows)):.1f}%)")


if __name__ == "__main__":
    main(sys.argv[1:])
