"""Run directories as pandas DataFrames, for notebooks and ad-hoc analysis.

    frames = load_frames(["runs/a", "runs/b"])     # or a folder holding runs
    frames.curve.pivot(index="trial", columns="label", values="success_rate_cumulative")

Every frame has `run_id` (the run directory's name, made unique) so frames join on it. The
schema, one row per:

runs    run. run_id, label (agent/strategy/model), run_dir, benchmark, agent, strategy, split,
        model, reflector_model, num_tasks, num_trials, num_records, status ('complete' or
        'partial'), success_rate (tasks solved by the last trial / num_tasks), ci_low, ci_high
        (95% Wilson), num_errors, prompt_tokens, completion_tokens, cost_usd, wall_s,
        git_commit, created_at (UTC timestamp), rollout (react when the config names none).
curve   run x trial number (every planned trial, even one nothing ran in yet). run_id, label,
        trial, attempted, solved, solved_cumulative, num_tasks, success_rate (solved /
        attempted), success_rate_cumulative, ci_low, ci_high, mean_f1, mean_reward, errors, wall_s.
trials  (run, task, trial) record. run_id, task_id, trial, success, reward, f1 (NaN where the
        benchmark has none), answer, error (None when fine), errored, end_reason, num_steps,
        invalid_actions, memory_shown (reflections in the prompt), reflection, started_at,
        finished_at (UTC timestamps), wall_s, actor_calls, actor_tokens, reflector_calls,
        reflector_tokens, cost_usd.
tasks   (run, task) for every task of the run's spec, attempted or not. run_id, task_id,
        attempts, solved, solved_at_trial (<NA> if never), errors, best_f1, last_answer,
        reflections (how many were written).
calls   model call. run_id, task_id, trial, role ('actor' or 'reflector'), call_index (order
        within the record), model, prompt_tokens, completion_tokens, latency_s, cost_usd (NaN
        when the provider gave none), cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reinagent.records import ModelCall, TrialRecord
from reinagent.report.labels import unique_labels
from reinagent.report.loading import LoadedRun, load
from reinagent.report.rollouts import DEFAULT_ROLLOUT, nodes_expanded

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class RunFrames:
    """The five frames of a set of runs, plus the loaded runs for drill-down."""

    runs: pd.DataFrame
    curve: pd.DataFrame
    trials: pd.DataFrame
    tasks: pd.DataFrame
    calls: pd.DataFrame
    loaded: list[LoadedRun] = field(default_factory=list, repr=False)

    def run(self, run_id: str) -> LoadedRun:
        for run, rid in zip(self.loaded, self.runs["run_id"]):
            if rid == run_id:
                return run
        raise KeyError(f"no run {run_id!r}; runs: {', '.join(self.runs['run_id'])}")


def load_frames(paths: list[str | Path] | str | Path) -> RunFrames:
    """Load one or many run directories (or folders of runs) into DataFrames."""
    return frames_of(load(paths))


def frames_of(loaded: list[LoadedRun]) -> RunFrames:
    import pandas as pd

    labels = unique_labels([r.summary for r in loaded])
    ids = _unique_ids([r.run_dir.name for r in loaded])
    runs, curve, trials, tasks, calls = [], [], [], [], []
    for run, rid, label in zip(loaded, ids, labels):
        runs.append(_run_row(run, rid, label))
        curve += [{"run_id": rid, "label": label, **t, "num_tasks": run.summary["num_tasks"]}
                  for t in run.summary["trials"]]
        # Records are stored in the order episodes finished; show them in (trial, task) order.
        order = {tid: i for i, tid in enumerate(run.spec.task_ids)}
        ordered = sorted(run.records, key=lambda r: (r.trial, order.get(r.task_id, len(order))))
        trials += [_trial_row(rid, rec) for rec in ordered]
        tasks += _task_rows(run, rid)
        calls += [_call_row(rid, rec, i, c) for rec in ordered for i, c in enumerate(rec.calls)]
    frames = RunFrames(
        runs=pd.DataFrame(runs, columns=_RUN_COLUMNS),
        curve=pd.DataFrame(curve, columns=_CURVE_COLUMNS),
        trials=pd.DataFrame(trials, columns=_TRIAL_COLUMNS),
        tasks=pd.DataFrame(tasks, columns=_TASK_COLUMNS),
        calls=pd.DataFrame(calls, columns=_CALL_COLUMNS),
        loaded=loaded,
    )
    for frame, columns in ((frames.runs, ["created_at"]), (frames.trials, ["started_at", "finished_at"])):
        for col in columns:
            frame[col] = pd.to_datetime(frame[col], unit="s", utc=True)
    frames.tasks["solved_at_trial"] = frames.tasks["solved_at_trial"].astype("Int64")
    for col in ("f1", "mean_f1", "mean_reward", "success_rate", "best_f1", "cost_usd"):
        for frame in (frames.trials, frames.curve, frames.tasks, frames.calls):
            if col in frame:
                frame[col] = frame[col].astype(float)
    return frames


_RUN_COLUMNS = ["run_id", "label", "run_dir", "benchmark", "agent", "strategy", "split", "model",
                "reflector_model", "num_tasks", "num_trials", "num_records", "status", "success_rate",
                "ci_low", "ci_high", "num_errors", "prompt_tokens", "completion_tokens", "cost_usd",
                "wall_s", "git_commit", "created_at", "rollout"]
_CURVE_COLUMNS = ["run_id", "label", "trial", "attempted", "solved", "solved_cumulative", "num_tasks",
                  "success_rate", "success_rate_cumulative", "ci_low", "ci_high", "mean_f1",
                  "mean_reward", "errors", "wall_s"]
_TRIAL_COLUMNS = ["run_id", "task_id", "trial", "success", "reward", "f1", "answer", "error", "errored",
                  "end_reason", "num_steps", "invalid_actions", "memory_shown", "reflection",
                  "started_at", "finished_at", "wall_s", "actor_calls", "actor_tokens",
                  "reflector_calls", "reflector_tokens", "value_calls", "value_tokens", "cost_usd", "rollout",
                  "nodes_expanded"]
_TASK_COLUMNS = ["run_id", "task_id", "attempts", "solved", "solved_at_trial", "errors", "best_f1",
                 "last_answer", "reflections"]
_CALL_COLUMNS = ["run_id", "task_id", "trial", "role", "call_index", "model", "prompt_tokens",
                 "completion_tokens", "latency_s", "cost_usd", "cached"]


def _unique_ids(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _run_row(run: LoadedRun, rid: str, label: str) -> dict[str, Any]:
    s = run.summary
    keys = ("run_dir", "benchmark", "agent", "strategy", "split", "model", "reflector_model",
            "num_tasks", "num_trials", "num_records", "status", "success_rate", "num_errors",
            "wall_s", "git_commit", "created_at")
    usage = s["usage"]
    return {"run_id": rid, "label": label, **{k: s[k] for k in keys},
            "ci_low": s["success_ci"][0], "ci_high": s["success_ci"][1],
            "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
            "cost_usd": usage["cost_usd"], "rollout": s.get("rollout", DEFAULT_ROLLOUT)}


def _trial_row(rid: str, rec: TrialRecord) -> dict[str, Any]:
    traj = rec.trajectory
    by_role = {"actor": [0, 0], "reflector": [0, 0], "value": [0, 0]}
    cost = 0.0
    for call in rec.calls:
        counts = by_role.setdefault(call.role, [0, 0])
        counts[0] += 1
        counts[1] += 0 if call.cached else call.prompt_tokens + call.completion_tokens
        cost += 0.0 if call.cached else call.cost_usd or 0.0
    return {
        "run_id": rid, "task_id": rec.task_id, "trial": rec.trial, "success": rec.success,
        "reward": rec.reward, "f1": rec.f1, "answer": rec.answer, "error": rec.error,
        "errored": rec.error is not None, "end_reason": traj.end_reason, "num_steps": len(traj.steps),
        "invalid_actions": sum(not s.valid_action for s in traj.steps), "memory_shown": len(rec.memory),
        "reflection": rec.reflection, "started_at": rec.started_at, "finished_at": rec.finished_at,
        "wall_s": rec.wall_s, "actor_calls": by_role["actor"][0], "actor_tokens": by_role["actor"][1],
        "reflector_calls": by_role["reflector"][0], "reflector_tokens": by_role["reflector"][1],
        "value_calls": by_role["value"][0], "value_tokens": by_role["value"][1], "cost_usd": cost, "rollout": traj.rollout, "nodes_expanded": nodes_expanded(rec),
    }


def _task_rows(run: LoadedRun, rid: str) -> list[dict[str, Any]]:
    rows = []
    for task_id in run.spec.task_ids:
        recs = run.records_of(task_id)
        solved_at = run.solved_at(task_id)
        f1s = [r.f1 for r in recs if r.f1 is not None]
        rows.append({
            "run_id": rid, "task_id": task_id, "attempts": len(recs), "solved": solved_at is not None,
            "solved_at_trial": solved_at, "errors": sum(r.error is not None for r in recs),
            "best_f1": max(f1s) if f1s else None, "last_answer": recs[-1].answer if recs else None,
            "reflections": sum(bool(r.reflection) for r in recs),
        })
    return rows


def _call_row(rid: str, rec: TrialRecord, index: int, call: ModelCall) -> dict[str, Any]:
    return {"run_id": rid, "task_id": rec.task_id, "trial": rec.trial, "role": call.role,
            "call_index": index, "model": call.model, "prompt_tokens": call.prompt_tokens,
            "completion_tokens": call.completion_tokens, "latency_s": call.latency_s,
            "cost_usd": call.cost_usd, "cached": call.cached}
