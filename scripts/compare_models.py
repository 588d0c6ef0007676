"""Two programming runs of the same tasks and settings, made by two models or engines, task by task.

    .venv/bin/python scripts/compare_models.py RUN_A RUN_B [--json]

`reinagent report` compares strategies over the same first attempts (a REFLEXION run and its NONE
branch); this asks the other question: what changed when the *model* changed (the engine's rounded
reading of the GGUF against the file's own weights, OpenVINO against llama.cpp, a checkpoint against
its base). For each run: the single attempt (each task's first program judged by the hidden tests
after the loop, first_programs.json) and pass@1 (solved by the last trial). Between the two, paired
on the tasks both hold: gained and lost (B against A) with an exact McNemar p, and how many first
programs are the same text (greedy first trials of one model would all be).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # reinagent, from a checkout


def outcomes(run: Path) -> dict[str, dict]:
    """task id -> {"single": bool, "pass1": bool, "program": trial 1's program}."""
    from reinagent.report.first_programs import read_first_programs
    from reinagent.store import read_records

    first = read_first_programs(run)
    if first is None:
        raise SystemExit(f"{run}: no first_programs.json (not a finished programming run)")
    by_task: dict[str, dict] = {}
    for r in read_records(run):
        task = by_task.setdefault(r.task_id, {"pass1": False, "program": None})
        task["pass1"] = task["pass1"] or bool(r.success)
        if r.trial == 1:
            task["program"] = r.answer
    for task_id, verdict in first.items():
        by_task.setdefault(task_id, {"pass1": False, "program": None})["single"] = verdict["passed"]
    return {k: v for k, v in by_task.items() if "single" in v}


def compare(a: dict[str, dict], b: dict[str, dict]) -> dict:
    from reinagent.report.significance import mcnemar_exact

    tasks = sorted(set(a) & set(b))
    out = {"tasks": len(tasks), "same_first_program": sum(a[t]["program"] == b[t]["program"] for t in tasks)}
    for key in ("single", "pass1"):
        gained = sum(b[t][key] and not a[t][key] for t in tasks)
        lost = sum(a[t][key] and not b[t][key] for t in tasks)
        out[key] = {"a": sum(a[t][key] for t in tasks), "b": sum(b[t][key] for t in tasks), "gained": gained,
                    "lost": lost, "p": mcnemar_exact(gained, lost)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for run in (args.run_a, args.run_b):
        if not (run / "records.jsonl").is_file():
            ap.error(f"{run}: not a run directory (no records.jsonl)")
    result = compare(outcomes(args.run_a), outcomes(args.run_b))
    if args.json:
        print(json.dumps(result))
        return 0
    n = result["tasks"]
    print(f"A = {args.run_a}\nB = {args.run_b}\n{n} tasks in both; first programs the same text: {result['same_first_program']}")
    for key, label in (("single", "single attempt"), ("pass1", "pass@1 (solved by the last trial)")):
        c = result[key]
        print(f"{label}: A {c['a']}/{n}, B {c['b']}/{n}; B against A +{c['gained']} -{c['lost']}, "
              f"exact McNemar p = {c['p']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
