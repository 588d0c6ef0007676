"""How long a paired run must take at least, at an engine's measured rates: issue 53's 30 minutes.

    .venv/bin/python perf/pair_budget.py RUN_DIR [RUN_DIR ...] --rates FILE [FILE ...] [--in-flight N] [--json]

RUN_DIR: the run directories of a pair (scripts/paper_on_qwen.sh's REFLEXION run and its NONE
branch). Their records give the model calls the pair made itself (a branch's trials copied from
its parent are not counted again) with their prompt and completion tokens, and each run's span
from its first record's start to its last record's end.

FILE: a perf/engines.py output (docs/engines_output*.txt) or a perf/in_flight.py one (its last line
is the --json line). For each engine in it, the decode floor of a pair run at `--in-flight N`
(its --max-concurrency; 8, the committed runs', by default):

    completion tokens / the best decode tok/s measured at N requests in flight or fewer (prefill
    taken out: perf/engines.py's one stream and `*_decode_8_in_flight_tok_s`, perf/in_flight.py's
    `*_decode_<N>_tok_s`)

Every completion token must be decoded, a run of `--max-concurrency N` never has more than N
calls in flight, its prompts (300 tokens and more against the measured 174) make a step no
faster, and fewer in flight decode slower (so measured, 8 to 32: docs/in_flight_output.txt): so at
the measured rates no such pair on that CPU and engine beats its floor, prefill not counted at all
(a shared VM's rates move from day to day: measure on the day). An output with no decode rate of
several requests up to N has no floor: perf/engines.py's older `8_in_flight` rates include each
call's prefill, and the prefix cache saves a run part of that.
"""

from __future__ import annotations

import argparse
import json
import re
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


def decode_rates(measured: dict, prefix: str) -> dict[int, float]:
    """An engine's decode tok/s (prefill taken out) by requests in flight: perf/engines.py's one
    stream and 8 in flight, perf/in_flight.py's levels."""
    out = {}
    if f"{prefix}_decode_tok_s" in measured:
        out[1] = measured[f"{prefix}_decode_tok_s"]
    if f"{prefix}_decode_8_in_flight_tok_s" in measured:
        out[8] = measured[f"{prefix}_decode_8_in_flight_tok_s"]
    for key, value in measured.items():
        level = re.fullmatch(rf"{prefix}_decode_(\d+)_tok_s", key)
        if level:
            out[int(level.group(1))] = value
    return out


def floor_s(work: dict[str, float], measured: dict, engine: str, in_flight: int = 8) -> float | None:
    """Completion tokens / the best decode rate measured at `in_flight` requests or fewer; None
    when the output measured no level of several requests up to it."""
    rates_by_level = {n: r for n, r in decode_rates(measured, ENGINES[engine]).items() if n <= in_flight}
    if not any(n > 1 for n in rates_by_level):
        return None
    return work["completion_tokens"] / max(rates_by_level.values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--rates", nargs="+", type=Path, required=True, help="perf/engines.py or perf/in_flight.py outputs")
    ap.add_argument("--in-flight", type=int, default=8,
                    help="the pair's --max-concurrency: the floor takes the best rate measured at this many requests or fewer")
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
        for engine in ENGINES:
            floor = floor_s(work, measured, engine, args.in_flight)
            if floor is None:
                print(f"{measured['cpu'][:40]:40s} {engine:10s} no floor: {path} has no decode rate of several requests "
                      f"in flight up to {args.in_flight} (an older perf/engines.py, or not measured)")
                continue
            out["floors"].append({"rates": str(path), "cpu": measured["cpu"], "engine": engine, "in_flight": args.in_flight,
                                  "decode_floor_min": floor / 60})
            print(f"{measured['cpu'][:40]:40s} {engine:10s} decode floor {floor / 60:5.1f} min ({args.in_flight} in flight)")
    need = work["completion_tokens"] / 1800
    print(f"within 30 min the decode alone needs {need:.1f} tok/s over the whole pair")
    out["tok_s_for_30_min"] = need
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
