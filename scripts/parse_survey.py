"""How often a real model's replies cannot be parsed, per benchmark and agent, constrained or not.

    .venv/bin/python scripts/parse_survey.py OUTDIR [--model local:qwen2.5-coder-1.5b] [--tasks 10]

For each (benchmark, agent) it runs `reinagent run` on the first N tasks (NONE, one trial, greedy)
with constrained actions on and off (where the agent has a grammar), then reads the records: a
step whose reply gave no action (`valid_action` false: shown to the agent as "(invalid output)"),
a coder reply whose program does not parse (no code block, or a syntax error), and what the
tasks scored. Run directories stay under OUTDIR,
so any count can be traced to the replies behind it (`reinagent show RUN TASK`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from reinagent.runner import load_run

CASES = [  # benchmark, agent, has a grammar (constrained decoding applies)
    ("hotpotqa", "react", True), ("hotpotqa", "cot-context", True), ("humaneval", "coder", True),
    ("mbpp", "coder", True), ("gsm8k", "cot", False), ("alfworld", "react", True),
]


def survey(out: Path, model: str, n: int, benchmark: str, agent: str, constrained: bool | None) -> dict:
    tag = {True: "constrained", False: "free", None: "default"}[constrained]
    run_dir = out / f"{benchmark}-{agent}-{tag}"
    if not (run_dir / "report.md").is_file():
        flag = [] if constrained is None else ["--constrained" if constrained else "--no-constrained"]
        cmd = [sys.executable, "-m", "reinagent.cli", "run", "--benchmark", benchmark, "--agent", agent,
               "--strategy", "none", "--num-trials", "1", "--num-envs", str(n), "--model", model,
               "--run-dir", str(run_dir), "--quiet", *flag]
        if (run_dir / "spec.json").is_file():
            cmd = [sys.executable, "-m", "reinagent.cli", "resume", str(run_dir), "--quiet"]
        started = time.time()
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode not in (0, 3):  # 3: some (task, trial)s errored; still counted below
            print(f"{run_dir.name}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}", flush=True)
            return {}
        print(f"{run_dir.name}: {time.time() - started:.0f} s", flush=True)
    _, records = load_run(run_dir)
    steps = [s for r in records for s in r.trajectory.steps]
    invalid = [s for s in steps if not s.valid_action]
    no_code = [r for r in records if agent == "coder"
               and str(r.trajectory.extra.get("feedback", "")).startswith("The code does not parse")]
    return {"case": f"{benchmark} {agent}", "decoding": tag, "tasks": len(records),
            "solved": sum(r.success for r in records), "replies": len(steps), "unparsed": len(invalid) + len(no_code),
            "errors": sum(r.error is not None for r in records),
            "examples": [s.output[:160] for s in invalid[:3]] + [str(r.trajectory.answer)[:160] for r in no_code[:3]]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated benchmarks to survey (default: all)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for benchmark, agent, grammar in CASES:
        if args.only and benchmark not in args.only.split(","):
            continue
        for constrained in ((True, False) if grammar else (None,)):
            row = survey(args.out, args.model, args.tasks, benchmark, agent, constrained)
            if row:
                rows.append(row)
    print(f"\n{'case':<22} {'decoding':<12} {'solved':>7} {'replies':>8} {'unparsed':>9} {'errors':>7}")
    for r in rows:
        print(f"{r['case']:<22} {r['decoding']:<12} {r['solved']:>3}/{r['tasks']:<3} {r['replies']:>8} {r['unparsed']:>9} {r['errors']:>7}")
    (args.out / "survey.json").write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        for example in r["examples"]:
            print(f"  {r['case']} {r['decoding']}: {example!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
