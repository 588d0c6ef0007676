"""Episodes in flight over a run's span, by trial: where a run's wall time went idle.

    .venv/bin/python perf/occupancy.py RUN_DIR [RUN_DIR ...] [--every 60] [--json]

For each run directory, from its live records' started_at/finished_at: the episodes in flight at
the middle of each `--every`-second slice (trial 1 and later trials apart), and the run's tail,
the time from the last moment it had all of its --max-concurrency slots busy to its end. On the
local engine fewer calls in flight decode fewer tokens a second, so a long tail at low occupancy
is wall time the engine could have used (the pipeline's first-come queue put every retry behind
every first trial: programming_runs/qwen2.5-coder-1.5b-split-zen4's retries began at minute 19
of 30; reinagent/slots.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # reinagent, from a checkout


def occupancy(run_dir: Path, every: float = 60.0) -> dict:
    from reinagent.errors import RunDirError
    from reinagent.store import read_records, read_spec

    records = read_records(run_dir)
    if not records:
        raise RunDirError(f"{run_dir}: no records (not a run directory, or a run with none yet)")
    slots = read_spec(run_dir).config.get("max_concurrency")
    start = min(r.started_at for r in records)
    spans = [(r.started_at - start, r.finished_at - start, r.trial) for r in records]
    end = max(f for _, f, _ in spans)
    slices = []
    t = every / 2
    while t < end:
        first = sum(s <= t < f for s, f, k in spans if k == 1)
        later = sum(s <= t < f for s, f, k in spans if k > 1)
        slices.append({"at_s": round(t - every / 2), "trial_1": first, "later": later})
        t += every
    # the last moment every slot was busy: an episode start or end after which the count is full
    edges = sorted({x for s, f, _ in spans for x in (s, f)})
    full = [x for x in edges if slots and sum(s <= x < f for s, f, _ in spans) >= slots]
    tail = end - max(full) if full else None
    later_start = min((s for s, _, k in spans if k > 1), default=None)
    return {"run": str(run_dir), "slots": slots, "span_s": round(end, 1), "tail_s": None if tail is None else round(tail, 1),
            "first_retry_s": None if later_start is None else round(later_start, 1), "slices": slices}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--every", type=float, default=60.0, help="seconds a slice (default 60)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from reinagent.errors import ReinagentError

    if args.every <= 0:
        ap.error(f"--every: seconds above 0; got {args.every}")
    try:
        found = [occupancy(d, args.every) for d in args.runs]
    except (ReinagentError, OSError) as err:  # not a run directory, a corrupt record, no spec.json
        ap.error(str(err))
    for o in found:
        print(f"{o['run']}: {o['span_s'] / 60:.1f} min, {o['slots']} slots; first later-trial episode at "
              + (f"{o['first_retry_s'] / 60:.1f} min" if o["first_retry_s"] is not None else "none")
              + "; tail (all slots busy last to the end) "
              + (f"{o['tail_s'] / 60:.1f} min" if o["tail_s"] is not None else "n/a (never all busy)"), file=sys.stderr)
        print("  minute   trial 1   later trials", file=sys.stderr)
        for s in o["slices"]:
            print(f"  {s['at_s'] / 60:6.1f}   {s['trial_1']:7d}   {s['later']:12d}", file=sys.stderr)
    if args.json:
        print(json.dumps([{k: v for k, v in o.items() if k != "slices"} for o in found]))


if __name__ == "__main__":
    main()
