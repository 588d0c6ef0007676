"""How long a paired run must take at least, at an engine's measured rates: issue 53's 30 minutes.

    .venv/bin/python perf/pair_budget.py RUN_DIR [RUN_DIR ...] --rates FILE [FILE ...] [--json]

RUN_DIR: the run directories of a pair (scripts/paper_on_qwen.sh's REFLEXION run and its NONE
branch). Their records give the model calls the pair made itself (a branch's trials copied from
its parent are not counted again) with their prompt and completion tokens, and each run's span
from its first record's start to its last record's end.

FILE: a perf/engines.py output (docs/engines_output*.txt; its last line is the --json line). For
each engine in it, the decode floor:

    completion tokens / decode tok/s at 8 in flight (prefill taken out: perf/engines.py's
    `*_decode_8_in_flight_tok_s`, or the best of its single-stream decode if that is higher)

Every completion token must be decoded, a run of `--max-concurrency 8` never has more than 8
calls in flight, and its prompts (300 tokens and more against the measured 174) make a step no
faster: so at the measured rates no such pair on that CPU and engine beats its floor, prefill not
counted at all (a shared VM's rates move from day to day: measure on the day). An output made
before perf/engines.py measured decode at 8 in flight has no floor: its `8_in_flight` rates
include each call's prefill, and the prefix cache saves a run part of that.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # reinagent, from a checkout

ENGINES = {"engine": "embedded", "llama.cpp": "llamacpp"}


def tokens(run_dirs: list[Path]) -> dict[str, float]:
    """Prompt and completion tokens of the calls these runs made themselves (a record's
    `own_calls`: a branch's copy of its parent's trial was made once, in the parent), and the sum of
    each run's own span (a branch runs after its parent; the gap between them is not the pair's)."""
    from reinagent.errors import ReinagentError
    from reinagent.store import read_records

    prompt = completion = calls = 0
    span = 0.0
    for run in run_dirs:
        try:
            made = [r for r in read_records(run) if r.own_calls]
        except (ReinagentError, ValueError) as err:
            raise SystemExit(f"{run}: unreadable records ({err})") from None
        prompt += sum(c.prompt_tokens for r in made for c in r.own_calls)
        completion += sum(c.completion_tokens for r in made for c in r.own_calls)
        calls += sum(len(r.own_calls) for r in made)
        if made:
            span += max(r.finished_at for r in made) - min(r.started_at for r in made)
    if not calls:
        raise SystemExit(f"no model calls in {', '.join(map(str, run_dirs))}")
    return {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion, "span_s": span}


def rates(path: Path) -> dict:
    lines = [line for line in path.read_text().splitlines() if line.startswith("{")]
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(f"{path}: no perf/engines.py --json line at its end") from None


def floor_s(work: dict[str, float], measured: dict, engine: str) -> float:
    prefix = ENGINES[engine]
    best = max(measured[f"{prefix}_decode_tok_s"], measured[f"{prefix}_decode_8_in_flight_tok_s"])
    return work["completion_tokens"] / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--rates", nargs="+", type=Path, required=True, help="perf/engines.py outputs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for path in [*args.runs, *args.rates]:
        if not path.exists():
            ap.error(f"{path}: no such file or directory")
    work = tokens(args.runs)
    print(f"{len(args.runs)} runs: {work['calls']} calls, {work['prompt_tokens']} prompt and "
          f"{work['completion_tokens']} completion tokens; the runs' own spans add up to {work['span_s'] / 60:.1f} min")
    out = {"work": work, "floors": []}
    for path in args.rates:
        measured = rates(path)
        if "embedded_decode_8_in_flight_tok_s" not in measured:
            print(f"{measured['cpu'][:40]:40s} no floor: {path} has no decode rate at 8 in flight (made by an older perf/engines.py)")
            continue
        for engine in ENGINES:
            floor = floor_s(work, measured, engine)
            out["floors"].append({"rates": str(path), "cpu": measured["cpu"], "engine": engine, "decode_floor_min": floor / 60})
            print(f"{measured['cpu'][:40]:40s} {engine:10s} decode floor {floor / 60:5.1f} min")
    need = work["completion_tokens"] / 1800
    print(f"within 30 min the decode alone needs {need:.1f} tok/s over the whole pair")
    out["tok_s_for_30_min"] = need
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
