"""Why a reflection helps the retry or not (issue 37 §4: "find out why"), from the records.

For every retry after a failed first attempt, with the gold answer g, the first attempt's answer
a1, the reflection m (the task's memory) and the retry's answer a2:

    states gold   m holds g as a number: the reflection knows the answer
    follows       a2 is one of the numbers m holds: the retry took its answer from the reflection
    repeats       a2 == a1: the retry gave the failed answer again

Retry success split by "states gold" says whether the retry uses a right reflection (if it solves
no more of those than of the others, the retry ignores the reflection, however good); "follows"
and "repeats" say what it does instead. Numbers are compared as the math judge's gold is written
(integers and decimals, sign included): this reads arithmetic and GSM8K runs, where answers are
numbers; for other benchmarks "states gold" is a substring test.

Read from an evaluation run (trial-1 and trial-2 records of `reinagent run`, gold and predicted
in each record's `evaluation`) or from `rl train`'s rollouts under method = "reflect" (TASK@first
and TASK@K records, one per step; the first answer in the retry's `trajectory.extra`).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def numbers(text: str) -> set[str]:
    """The numbers a text holds, normalised (3.0 -> 3, -0 -> 0)."""
    return {_norm(n) for n in _NUMBER.findall(text.replace(",", ""))}


def _norm(n: str) -> str:
    try:
        v = float(n)
    except ValueError:
        return n.strip()
    return str(int(v)) if v == int(v) else str(v)


@dataclass
class Retry:
    gold: str
    first: str
    reflection: str
    answer: str
    success: bool

    @property
    def states_gold(self) -> bool:
        g = _norm(self.gold)
        return g in numbers(self.reflection) if _NUMBER.fullmatch(g) else g.lower() in self.reflection.lower()

    @property
    def follows(self) -> bool:
        return bool(self.answer) and _norm(self.answer) in numbers(self.reflection)

    @property
    def repeats(self) -> bool:
        return bool(self.answer) and _norm(self.answer) == _norm(self.first)


def eval_retries(run_dir: str | Path) -> list[Retry]:
    """A `reinagent run` of 2+ trials: trial 2 of each task whose trial 1 failed (the run's live
    records, as every report reads them: a resumed or superseded trial counts once)."""
    from reinagent.store import read_records

    by = {(r.task_id, r.trial): r for r in read_records(Path(run_dir)) if not r.error}
    out = []
    for (task, trial), first in sorted(by.items()):
        second = by.get((task, 2))
        if trial != 1 or first.success or second is None:
            continue
        ev1, ev2 = first.evaluation or {}, second.evaluation or {}
        out.append(Retry(str(ev1.get("gold") or ev2.get("gold") or ""), str(ev1.get("predicted") or first.answer or ""),
                         " ".join(second.memory), str(ev2.get("predicted") or second.answer or ""), second.success))
    return out


def training_retries(rollouts_dir: str | Path) -> list[Retry]:
    """`rl train` rollouts under method = "reflect": every retry (TASK@K) of every step."""
    from reinagent.store import read_records

    out = []
    for r in read_records(Path(rollouts_dir)):
        if r.task_id.endswith("@first") or "@" not in r.task_id:
            continue
        extra = r.trajectory.extra
        out.append(Retry(str((r.evaluation or {}).get("gold") or ""), str(extra.get("first_answer") or ""),
                         str(extra.get("reflection") or " ".join(r.memory)), str(r.answer or ""), r.success))
    return out


def _share(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "0/0"


def retry_use_line(name: str, retries: list[Retry]) -> str:
    """One line: how often the reflection states the answer, and retry success with and without."""
    if not retries:
        return f"{name}: no retry after a failed first attempt"
    known = [r for r in retries if r.gold]
    right = [r for r in known if r.states_gold]
    other = [r for r in known if not r.states_gold]
    line = (f"{name}: {len(retries)} retries; reflection states the right answer in {_share(len(right), len(known))}: "
            f"retry solved {_share(sum(r.success for r in right), len(right))} of those, "
            f"{_share(sum(r.success for r in other), len(other))} of the rest; ")
    with_numbers = [r for r in retries if numbers(r.reflection)]
    return line + (f"retry answers a number of its reflection {_share(sum(r.follows for r in with_numbers), len(with_numbers))}, "
                   f"repeats its failed answer {_share(sum(r.repeats for r in retries), len(retries))}")


def training_line(metrics_path: str | Path) -> str:
    """The reward's sparsity over a reflect training: first-attempt failures, retry success and
    groups with no reward variance (no learning signal), first half of the steps against the second."""
    rows = [json.loads(line) for line in Path(metrics_path).read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r.get("method") == "reflect"]
    if not rows:
        return f"{metrics_path}: no reflect steps"
    half = max(1, len(rows) // 2)

    def part(rs: list[dict[str, Any]]) -> str:
        pairs = sum(r["pairs"] for r in rs)
        groups = sum(r["groups"] for r in rs)
        return (f"retry success {_share(sum(r['retry_successes'] for r in rs), pairs)}, "
                f"flat groups {_share(sum(r['zero_variance_groups'] for r in rs), groups)}")

    failed = sum(r["first_failures"] for r in rows)
    tried = sum(r["first_attempts"] for r in rows)
    text = f"training, {len(rows)} steps: first attempts failed {_share(failed, tried)}; steps 1-{half}: {part(rows[:half])}"
    if len(rows) > half:
        text += f"; steps {half + 1}-{len(rows)}: {part(rows[half:])}"
    return text


def demo_lines(work: Path) -> list[str]:
    """scripts/reflect_demo.sh's "why" lines for its OUTDIR (what exists of it)."""
    lines = []
    metrics = work / "train-reflect" / "train_metrics.jsonl"
    if metrics.is_file():
        lines += [training_line(metrics),
                  retry_use_line("training retries", training_retries(work / "train-reflect" / "rollouts"))]
    for model in ("base", "grpo", "reflect"):
        run = work / "eval" / f"{model}-reflexion"
        if (run / "records.jsonl").is_file():
            lines.append(retry_use_line(f"held-out, {model} under REFLEXION", eval_retries(run)))
        none = work / "eval" / f"{model}-none"
        if (none / "records.jsonl").is_file():
            rs = eval_retries(none)
            lines.append(f"held-out, {model} under NONE: repeats its failed answer {_share(sum(r.repeats for r in rs), len(rs))}")
    return lines


def main(argv: list[str]) -> int:
    """python -m reinagent.rl.reflect_stats DEMO_OUTDIR (scripts/reflect_demo.sh)."""
    from reinagent.errors import ReinagentError

    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m reinagent.rl.reflect_stats OUTDIR  (a folder written by scripts/reflect_demo.sh)",
              file=sys.stderr)
        return 2
    try:
        lines = demo_lines(Path(argv[0]))
    except (ReinagentError, OSError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(lines) if lines else f"{argv[0]}: no reflect training or evaluation runs in it")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
