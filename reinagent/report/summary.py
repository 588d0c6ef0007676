"""The per-run summary behind `reinagent report --format json` (keys are a contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reinagent.records import RunSpec, TrialRecord, Usage


def summarize(run_dir: str | Path) -> dict[str, Any]:
    """One JSON-able object describing a run, complete or still in progress."""
    from reinagent.runner import load_run

    spec, records = load_run(run_dir)
    return summarize_records(spec, records, run_dir=str(run_dir))


def summarize_records(spec: RunSpec, records: list[TrialRecord], run_dir: str = "") -> dict[str, Any]:
    cfg = spec.config
    num_trials = int(cfg.get("num_trials") or 0)
    task_ids = list(spec.task_ids)
    by_trial: dict[int, list[TrialRecord]] = {}
    for rec in records:
        by_trial.setdefault(rec.trial, []).append(rec)
    last_trial = max([num_trials, *by_trial])
    trials, solved_so_far = [], set()
    for t in range(1, last_trial + 1):
        recs = by_trial.get(t, [])
        solved_now = {r.task_id for r in recs if r.success}
        solved_so_far |= solved_now
        f1s = [r.f1 for r in recs if r.f1 is not None]
        trials.append({
            "trial": t,
            "attempted": len(recs),
            "solved": len(solved_now),
            "solved_cumulative": len(solved_so_far),
            "success_rate_cumulative": len(solved_so_far) / len(task_ids) if task_ids else 0.0,
            "errors": sum(r.error is not None for r in recs),
            "mean_f1": sum(f1s) / len(f1s) if f1s else None,
        })
    usage, by_role = Usage(), {"actor": Usage(), "reflector": Usage()}
    for rec in records:
        for call in rec.calls:
            usage.add(call)
            by_role.setdefault(call.role, Usage()).add(call)
    errors = [{"task_id": r.task_id, "trial": r.trial, "error": r.error} for r in records if r.error]
    expected_done = _finished(records, task_ids, num_trials)
    return {
        "run_dir": run_dir,
        "benchmark": cfg.get("benchmark"),
        "agent": cfg.get("agent"),
        "strategy": cfg.get("strategy"),
        "split": cfg.get("split"),
        "model": cfg.get("model"),
        "reflector_model": cfg.get("reflector_model") or cfg.get("model"),
        "num_tasks": len(task_ids),
        "num_trials": num_trials,
        "status": "complete" if expected_done else "partial",
        "pass_at_1": trials[0]["solved"] / len(task_ids) if trials and task_ids else 0.0,
        "trials": trials,
        "usage": _usage_dict(usage) | {"by_role": {k: _usage_dict(v) for k, v in by_role.items()}},
        "errors": errors,
        "num_errors": len(errors),
        "wall_s": _wall(records),
        "git_commit": spec.git_commit,
        "created_at": spec.created_at,
    }


def _usage_dict(u: Usage) -> dict[str, Any]:
    return {
        "calls": u.calls,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cost_usd": round(u.cost_usd, 6),
        "cache_hits": u.cache_hits,
        "latency_s": round(u.latency_s, 3),
    }


def _finished(records: list[TrialRecord], task_ids: list[str], num_trials: int) -> bool:
    """Every task either solved or tried in every trial."""
    tried: dict[str, set[int]] = {}
    solved = set()
    for r in records:
        tried.setdefault(r.task_id, set()).add(r.trial)
        if r.success:
            solved.add(r.task_id)
    return all(tid in solved or len(tried.get(tid, ())) >= num_trials for tid in task_ids)


def _wall(records: list[TrialRecord]) -> float:
    if not records:
        return 0.0
    return max(r.finished_at for r in records) - min(r.started_at for r in records)


def to_markdown(summary: dict[str, Any]) -> str:
    s = summary
    lines = [
        f"# {s['benchmark']} / {s['agent']} / {s['strategy']}",
        "",
        f"model `{s['model']}`, reflector `{s['reflector_model']}`, {s['num_tasks']} tasks, "
        f"{s['num_trials']} trials, status {s['status']}",
        "",
        "| trial | attempted | solved | cumulative | rate | mean F1 | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in s["trials"]:
        f1 = "" if t["mean_f1"] is None else f"{t['mean_f1']:.3f}"
        lines.append(
            f"| {t['trial']} | {t['attempted']} | {t['solved']} | {t['solved_cumulative']} | "
            f"{100 * t['success_rate_cumulative']:.1f}% | {f1} | {t['errors']} |"
        )
    u = s["usage"]
    lines += ["", f"usage: {u['calls']} calls ({u['cache_hits']} cache hits), "
              f"{u['prompt_tokens']} prompt + {u['completion_tokens']} completion tokens, "
              f"${u['cost_usd']:.4f}", ""]
    return "\n".join(lines)
