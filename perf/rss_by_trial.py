"""Peak RSS of a run in each trial's time window, from the run's rss.tsv (scripts/embedded_experiment.sh).

    python perf/rss_by_trial.py hotpot_runs/embedded100/cot_context_reflexion

A run that held its records in memory would grow trial by trial; streamed records keep it flat.
With the pipeline schedule trials overlap in time, so a window is from the first start to the
last end of that trial's episodes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from reinagent.store import read_records


def main(run_dir: str) -> None:
    samples = [tuple(map(float, line.split())) for line in (Path(run_dir) / "rss.tsv").read_text().splitlines()
               if len(line.split()) == 2]
    records = read_records(Path(run_dir))
    trials = sorted({r.trial for r in records})
    print(f"{run_dir}: {len(samples)} samples, peak {max(s[1] for s in samples) / 1024:.0f} MiB overall")
    for t in trials:
        recs = [r for r in records if r.trial == t]
        lo, hi = min(r.started_at for r in recs), max(r.finished_at for r in recs)
        inside = [rss for ts, rss in samples if lo - 5 <= ts <= hi + 5]
        peak = f"{max(inside) / 1024:.0f} MiB" if inside else "no sample"
        print(f"  trial {t}: {len(recs)} episodes, {hi - lo:.0f} s, peak RSS {peak}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python perf/rss_by_trial.py RUN_DIR")
    main(sys.argv[1])
