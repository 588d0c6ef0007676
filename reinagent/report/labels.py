"""How runs are named in reports. The bottom floor of the report package: summaries, tables,
plots and frames all name runs this way, so it imports nothing from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_label(summary: dict[str, Any]) -> str:
    """How a run is named in comparisons: agent/strategy/model (the three things people vary), and
    the rollout when it is a search or multi-turn one (ToT, MCTS and multi-turn runs of one agent
    were otherwise three columns with the same name)."""
    label = f"{summary.get('agent')}/{summary.get('strategy')}/{summary.get('model')}"
    rollout = summary.get("rollout") or "react"
    label = label if rollout == "react" else f"{label} ({rollout})"
    # a programming run judged by its hidden tests every trial is an oracle's pass@N: say so
    # wherever its numbers stand (--evaluator hidden)
    return f"{label} {ORACLE_MARK}" if summary.get("evaluator") == "hidden" else label


ORACLE_MARK = "[judged by the hidden tests: oracle]"


def unique_labels(summaries: list[dict[str, Any]]) -> list[str]:
    """Labels for side-by-side columns; repeated labels get their run directory's name appended."""
    labels = [s.get("label") or run_label(s) for s in summaries]
    return [
        f"{label} ({Path(s.get('run_dir') or str(i)).name})" if labels.count(label) > 1 else label
        for i, (label, s) in enumerate(zip(labels, summaries))
    ]
