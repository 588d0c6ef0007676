"""Reports over run directories: summaries, markdown, HTML, plots and pandas frames; per rollout
strategy what a solved task costs (rollouts.py), search trees (tree.py), RL training curves
(training.py). The HTML page is a jinja2 template in templates/.

    from reinagent.report import load_frames, task_story, learning_curve_figure
    frames = load_frames("runs/")           # runs, curve, trials, tasks, calls DataFrames

Names are imported on first use, so `import reinagent.report` stays free of pandas/matplotlib.

    loading.py summary.py   finding and reading runs once; the per-run summary (JSON keys are a contract)
    first_programs.py       a programming run's first programs judged after its loop (first_programs.json)
    programming.py          a programming run's unchanged retries and its own tests' false positives
    labels.py stats.py      run names (the package's bottom floor); confidence intervals
    significance.py         exact McNemar and two-proportion tests: trial 1 vs last, a strategy vs NONE
    tables.py markdown.py html.py   rows of text; the markdown and HTML renderers (templates/)
    plots.py frames.py      the success-per-trial figure; pandas DataFrames for notebooks
    trajectory.py tree.py   one task's story; a search tree arranged for drawing
    rollouts.py training.py cost per rollout strategy; RL training curves
    cli.py files.py         `reinagent report`; report.md and report.html written into a finished run
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {  # module -> the names it exports
    "summary": "summarize summarize_records",
    "loading": "load find_run_dirs LoadedRun",
    "frames": "load_frames RunFrames",
    "stats": "wilson_interval",
    "markdown": "report_markdown comparison_markdown",
    "html": "report_html",
    "plots": "learning_curve_figure metric_figure learning_curve_png save_learning_curve",
    "trajectory": "task_story pick_task task_question",
    "rollouts": "rollout_table",
    "tree": "chosen_path",
    "training": "find_training_logs read_training_log training_figure",
}
_EXPORTS = {name: f"reinagent.report.{module}" for module, names in _MODULES.items() for name in names.split()}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reinagent.report' has no attribute {name!r}")
