"""How runs are named in reports. The bottom floor of the report package: summaries, tables,
plots and frames all name runs this way, so it imports nothing from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reinagent.terminal import plain


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
    """Labels for side-by-side columns. Runs of one setting (two seeds of agent/strategy/model)
    are told apart: the seed where theirs differ, and the shortest end of their run directories'
    paths that differs (`runs/seed0/r` and `runs/seed1/r`: `seed0/r`, `seed1/r`; the directory's
    name alone once read `(r)` under both columns)."""
    labels = [plain(s.get("label") or run_label(s)) for s in summaries]  # also drawn into plots: no escapes
    out = []
    for i, (label, s) in enumerate(zip(labels, summaries)):
        twins = [j for j, other in enumerate(labels) if other == label]
        out.append(f"{label} ({_apart(summaries, twins, i)})" if len(twins) > 1 else label)
    return out


def _apart(summaries: list[dict[str, Any]], twins: list[int], i: int) -> str:
    """What tells run i apart from the other runs of its label (`twins`, i among them)."""
    bits = []
    seeds = {j: summaries[j].get("seed") for j in twins}
    if len(set(map(str, seeds.values()))) > 1:
        bits.append(f"seed {seeds[i]}")
    parts = {j: Path(summaries[j].get("run_dir") or summaries[j].get("run_id") or str(j)).parts for j in twins}
    ends = {j: "/".join(p[-1:]) for j, p in parts.items()}
    for k in range(1, max(len(p) for p in parts.values()) + 1):
        longer = {j: "/".join(p[-k:]) for j, p in parts.items()}
        if len(set(longer.values())) == len(longer):
            ends = longer
            break
    bits.append(ends[i])  # the same run given twice: its name under both columns
    return ", ".join(bits)
