"""RL training logs (issue 18): one JSON object per trainer step in the trainer's output
directory, plotted by `reinagent report` next to the trial curves.

The contract with the trainer (reinagent/rl/loop.py writes it): a file named one of
TRAINING_LOG_NAMES in its output directory, each line an object with `step` and any of METRICS
(extra keys are kept, not shown). Its `rollouts/` run directory beside the log is reported as a
run, so `reinagent report OUTPUT_DIR` shows both. A file
of that name without those keys (some other tool's metrics) is not a training log and is skipped.
A trainer killed mid-write leaves a partial last line: it is dropped, as the run store drops one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reinagent.errors import RunDirError
from reinagent.report.tables import Table
from reinagent.runfiles import MAX_LOG_BYTES, read_bounded

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TRAINING_LOG_NAMES = ("train_metrics.jsonl", "metrics.jsonl")  # reinagent/rl writes the first
METRICS = ("loss", "reward_mean", "reward_std", "success_rate", "kl", "tokens_per_s", "rollout_tokens_per_s")
# Panels drawn per step; reward_std is the band around reward_mean, tokens/s stays in the table.
PANELS = (("loss", "loss"), ("reward_mean", "reward (mean, band: \u00b1 std)"), ("kl", "KL to the reference"))


@dataclass
class TrainingLog:
    path: Path
    rows: list[dict[str, Any]]  # in step order

    def series(self, key: str) -> tuple[list[float], list[float]]:
        """(steps, values) where the metric was logged as a finite number."""
        points = [(r["step"], float(r[key])) for r in self.rows
                  if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
        return [p[0] for p in points], [p[1] for p in points]


def training_log_in(directory: Path) -> Path | None:
    """The training log a directory holds, if any."""
    for name in TRAINING_LOG_NAMES:
        path = Path(directory) / name
        if path.is_file():
            return path
    return None


def read_training_log(path: str | Path) -> TrainingLog | None:
    """The log's steps, or None when the file is not a training log (no `step` + metric keys)."""
    path = Path(path)
    # a regular file, bounded: a directory of runs is data anyone may have planted
    lines = read_bounded(path, MAX_LOG_BYTES).decode("utf-8", errors="replace").splitlines(keepends=True)
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) and not line.endswith("\n"):
                break  # a write cut short: the steps before it are whole
            raise RunDirError(f"{path}: line {number} is not JSON (a corrupt training log)") from None
        is_step = isinstance(row, dict) and isinstance(row.get("step"), (int, float))
        if not rows and not (is_step and any(k in row for k in METRICS)):
            return None  # the first line decides: some other tool's file of the same name
        if not is_step:
            raise RunDirError(f"{path}: line {number} has no numeric 'step' (a corrupt training log)")
        rows.append(row)
    return TrainingLog(path, sorted(rows, key=lambda r: r["step"])) if rows else None


def find_training_logs(paths: list[str | Path]) -> list[TrainingLog]:
    """Training logs in the named directories (or in the directories they hold, one level down)."""
    logs = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            continue
        candidates = [training_log_in(path)]
        if candidates[0] is None:
            candidates = [training_log_in(p) for p in sorted(path.iterdir()) if p.is_dir()]
        for found in candidates:
            log = read_training_log(found) if found else None
            if log:
                logs.append(log)
    return logs


def training_table(log: TrainingLog) -> Table:
    """Per metric: steps logged, first, last, min and max value."""
    rows = []
    for key in METRICS:
        steps, values = log.series(key)
        if values:
            rows.append([key, str(len(values)), *(f"{v:.4g}" for v in (values[0], values[-1], min(values), max(values)))])
    return ["metric", "steps", "first", "last", "min", "max"], rows


def training_markdown(logs: list[TrainingLog]) -> str:
    from reinagent.report.markdown import table_markdown

    parts = ["# Training", ""]
    for log in logs:
        parts += [f"`{log.path}`: {len(log.rows)} steps", "", table_markdown(training_table(log)), ""]
    return "\n".join(parts)


def training_figure(log: TrainingLog) -> Figure:
    """Loss, reward (mean with a +-std band) and KL against the trainer step, one panel each."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(11, 3.4))
    axes = fig.subplots(1, len(PANELS))
    for ax, (key, label) in zip(axes, PANELS):
        steps, values = log.series(key)
        ax.grid(True, alpha=0.3)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if not values:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="#57606a")
            continue
        (line,) = ax.plot(steps, values, marker="." if len(values) < 50 else None)
        if key == "reward_mean":
            std = dict(zip(*log.series("reward_std")))
            band = [(s, v, std[s]) for s, v in zip(steps, values) if s in std]
            if band:
                xs, ys, sd = zip(*band)
                ax.fill_between(xs, [y - d for y, d in zip(ys, sd)], [y + d for y, d in zip(ys, sd)],
                                color=line.get_color(), alpha=0.15)
    fig.suptitle(str(log.path), fontsize=9)
    fig.tight_layout()
    return fig


def save_training_plot(log: TrainingLog, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    training_figure(log).savefig(path, dpi=110, bbox_inches="tight")
    return path
