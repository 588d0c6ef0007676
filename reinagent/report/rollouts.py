"""Per rollout strategy (react, tot, mcts, multi-turn): what a solved task costs.

A search rollout (ToT, MCTS) may solve more tasks than greedy ReAct but pays for it in nodes
expanded and model calls; these numbers put the two side by side. Runs are grouped by
`config.rollout`; runs from before rollouts existed have none and are greedy ReAct.

Definitions (per run, summed over a group of runs):
- episodes: trial records (one per task and trial);
- nodes expanded: a search episode's tree size (`len(Trajectory.tree)`, root included), else its
  number of steps: the comparable unit of work of one episode;
- model calls and tokens: every call of every role (actor, value, reflector), tokens as made
  (prompt + completion; a call answered from the response cache counts its original tokens), so
  a replayed run compares with a fresh one;
- benchmark judge runs: how often the benchmark's own judge (hidden tests, gold answer) ran,
  `evaluation.benchmark_evaluations` of each record: 1 per react episode, more where a search
  judged many paths by it (an oracle's pass@k, not one attempt); records from before it was
  recorded count 1 for a react episode without an error, else as unknown ("-" when no record
  of the group says);
- per solved task: divided by the tasks solved by the last trial (none solved: no figure); for an
  RL training run's rollouts (`rl-tokens`, each step samples its own tasks) "solved" is episodes
  solved of episodes attempted, and the figures are per solved episode.
"""

from __future__ import annotations

from typing import Any

from reinagent.records import RunSpec, TrialRecord
from reinagent.report.stats import format_rate
from reinagent.report.tables import Table

DEFAULT_ROLLOUT = "react"  # what every run did before `--rollout` existed


def rollout_of(spec: RunSpec) -> str:
    return str(spec.config.get("rollout") or DEFAULT_ROLLOUT)


def nodes_expanded(rec: TrialRecord) -> int:
    """A search episode's tree size, else its steps."""
    traj = rec.trajectory
    return len(traj.tree) if traj.tree else len(traj.steps)


def benchmark_evaluations(rec: TrialRecord) -> int | None:
    """How often the benchmark's judge ran for this record: as recorded; for an older record of a
    react episode that ended without an error, 1 (react has always judged once); else unknown."""
    recorded = rec.evaluation.get("benchmark_evaluations")
    if isinstance(recorded, int):
        return recorded
    return 1 if rec.trajectory.rollout == DEFAULT_ROLLOUT and rec.error is None else None


def rollout_stats(records: list[TrialRecord], solved_tasks: int) -> dict[str, Any]:
    """The run's totals and per-solved-task figures (the summary's `rollout_stats`)."""
    calls = [c for rec in records for c in rec.calls]
    nodes = sum(nodes_expanded(rec) for rec in records)
    tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
    judged = [n for n in (benchmark_evaluations(rec) for rec in records) if n is not None]
    return {
        "episodes": len(records),
        "benchmark_evaluations": sum(judged),
        "judged_episodes": len(judged),  # records that say how often the judge ran
        "nodes_expanded": nodes,
        "calls": len(calls),
        "tokens": tokens,
        "solved_tasks": solved_tasks,
        **_ratios(len(records), nodes, len(calls), tokens, solved_tasks),
    }


def _ratios(episodes: int, nodes: int, calls: int, tokens: int, solved: int) -> dict[str, float | None]:
    return {
        "nodes_per_episode": nodes / episodes if episodes else None,
        "calls_per_solved": calls / solved if solved else None,
        "tokens_per_solved": tokens / solved if solved else None,
    }


ROLLOUT_HEADER = ["rollout", "runs", "solved [95% CI]", "benchmark judge runs (per episode)", "episodes",
                  "nodes expanded (per episode)",
                  "model calls per solved task", "tokens per solved task"]


def rollout_table(summaries: list[dict[str, Any]]) -> Table:
    """One row per rollout strategy, summing the runs that used it (in order of first appearance)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for s in summaries:
        groups.setdefault(s.get("rollout") or DEFAULT_ROLLOUT, []).append(s)
    rows = []
    for name, runs in groups.items():
        stats = [s.get("rollout_stats") or {} for s in runs]
        total = {k: sum(st.get(k, 0) for st in stats)
                 for k in ("episodes", "nodes_expanded", "calls", "tokens", "benchmark_evaluations", "judged_episodes")}
        solved = sum(st.get("solved_tasks", 0) for st in stats)
        # RL training rollouts count episodes (each step samples its own tasks): solved of attempted
        tasks = sum(int((s.get("rollout_stats") or {}).get("attempted") or s.get("num_tasks") or 0) for s in runs)
        ratios = _ratios(total["episodes"], total["nodes_expanded"], total["calls"], total["tokens"], solved)
        rows.append([
            shown_rollout(name), str(len(runs)), format_rate(solved, tasks), _judge_runs(total), str(total["episodes"]),
            f"{total['nodes_expanded']} ({_fixed(ratios['nodes_per_episode'], 1)})",
            _fixed(ratios["calls_per_solved"], 1), _fixed(ratios["tokens_per_solved"], 0),
        ])
    return ROLLOUT_HEADER, rows


def shown_rollout(name: str) -> str:
    """The rollout as a report names it: the default `react` rollout is one pass of whatever agent
    the run has (a cot-context run's report said "react", which it is not)."""
    return "one pass" if name == DEFAULT_ROLLOUT else name


def _judge_runs(total: dict[str, int]) -> str:
    if not total["judged_episodes"]:
        return "-"
    return f"{total['benchmark_evaluations']} ({total['benchmark_evaluations'] / total['judged_episodes']:.1f})"


def _fixed(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
