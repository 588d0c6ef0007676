"""The paper's figure: success rate versus trial number, one line per run (matplotlib, no pyplot).

Figures are built with `matplotlib.figure.Figure` directly, never pyplot, so that no GUI backend
or global state is touched: the same code works in the CLI, in tests and inside a notebook.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reinagent.report.labels import unique_labels

MAX_BANDS = 3  # confidence bands drawn for up to this many runs

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def learning_curve_figure(summaries: list[dict[str, Any]], *, title: str | None = None) -> Figure:
    """Cumulative success rate by trial with its 95% Wilson band, one line per run."""
    fig, ax = _axes()
    # Past a few runs the stacked bands hide each other; the tables still give every interval.
    bands = len(summaries) <= MAX_BANDS
    for i, (s, label) in enumerate(zip(summaries, unique_labels(summaries))):
        trials = [t["trial"] + _dodge(i, len(summaries)) for t in s["trials"]]
        rates = [100 * t["success_rate_cumulative"] for t in s["trials"]]
        (line,) = ax.plot(trials, rates, marker="o", label=label)
        if bands:
            ax.fill_between(trials, [100 * t["ci_low"] for t in s["trials"]],
                            [100 * t["ci_high"] for t in s["trials"]], color=line.get_color(), alpha=0.12)
    ax.set_ylabel("tasks solved so far (%)")
    ax.set_ylim(-2, 102)
    what = "success rate by trial" + (" (bands: 95% CI)" if bands else "")
    _finish(ax, summaries, title or _default_title(summaries, what))
    return fig


def metric_figure(summaries: list[dict[str, Any]], *, title: str | None = None) -> Figure:
    """Mean F1 (where the benchmark has it) or pass rate of the attempts made in each trial."""
    fig, ax = _axes()
    for i, (s, label) in enumerate(zip(summaries, unique_labels(summaries))):
        key = "mean_f1" if s.get("metric") == "f1" else "success_rate"
        points = [(t["trial"] + _dodge(i, len(summaries)), t[key]) for t in s["trials"] if t.get(key) is not None]
        if points:
            ax.plot(*zip(*points), marker="s", linestyle="--", label=label)
    names = {"mean F1" if s.get("metric") == "f1" else "pass rate" for s in summaries}
    ax.set_ylabel(" / ".join(sorted(names)) + " of that trial's attempts")
    ax.set_ylim(-0.02, 1.02)
    _finish(ax, summaries, title or _default_title(summaries, "per-trial " + " / ".join(sorted(names))))
    return fig


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def learning_curve_png(summaries: list[dict[str, Any]]) -> bytes:
    return figure_png(learning_curve_figure(summaries))


def save_learning_curve(summaries: list[dict[str, Any]], path: str | Path) -> Path:
    """Write the success-rate-versus-trial figure (PNG, or any format matplotlib knows by suffix)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    learning_curve_figure(summaries).savefig(path, dpi=110, bbox_inches="tight")
    return path


def _dodge(index: int, count: int) -> float:
    """A small sideways shift per run, so that runs with equal values (all 0% is common on small
    models) stay visible instead of hiding behind the last one drawn."""
    return 0.0 if count <= 1 else (index - (count - 1) / 2) * min(0.04, 0.3 / count)


def _axes():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    ax.grid(True, alpha=0.3)
    return fig, ax


def _finish(ax, summaries: list[dict[str, Any]], title: str) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        # Below the axes: labels carry model names that would cover the curves inside them.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=8, frameon=False)


def _default_title(summaries: list[dict[str, Any]], what: str) -> str:
    benches = sorted({str(s.get("benchmark")) for s in summaries})
    sizes = sorted({s.get("num_tasks") for s in summaries})
    # "tasks 20/100" read like a score; say plainly when the compared runs differ in size.
    if len(sizes) > 1:
        tasks = "runs of " + ", ".join(map(str, sizes[:-1])) + f" and {sizes[-1]} tasks"
    else:
        tasks = f"{sizes[0]} tasks" + (" per run" if len(summaries) > 1 else "")
    return f"{', '.join(benches)}: {what}, {tasks}"
