"""The per-run summary behind every report format; the `--format json` keys are a contract.

Pure Python on purpose (no pandas, no matplotlib): `reinagent report` in markdown or JSON must
start fast and work wherever the package imports, including on a run that is still being written.

Contract keys (stable since the first release): benchmark, agent, strategy, num_tasks,
trials[{trial, attempted, solved, solved_cumulative}], usage{calls, prompt_tokens,
completion_tokens, cost_usd}, errors. Everything else here is an addition a reader may use but
must not rely on being the only keys. `rollout` (react when the config names none) and
`rollout_stats` (nodes expanded, model calls and tokens per solved task) are defined in
report/rollouts.py. `reference`: {preset, departures: [{setting, value, reference, source}]},
departures [] when the run's settings are the reference code's, null for a benchmark it never ran.
`retries_repeat`: {why, calls, cached} when the retries repeat the first attempts (NONE at
temperature 0: the retries' actor calls, and how many the response cache answered), else null.

Usage is what the run *paid*: a call answered from the response cache counts as a hit with no
tokens and no cost. `usage.if_uncached` (and per role) counts every call at the tokens and cost
it had when it was first made, and `cache_share` is the fraction of calls answered from the
cache, so a run served mostly from the cache is never mistaken for a cheap one.

A branch (`reinagent branch`) starts with records copied from its source run: `copied` says how
many and from where ({"from", "records", "trials"}, null elsewhere), and usage, wall_s and
episode_s count only what the branch itself did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reinagent.records import RunSpec, TrialRecord, Usage, final_record, recorded_evaluator, solved_at, stops_loop
from reinagent.reference import departures_summary
from reinagent.report.labels import run_label
from reinagent.report.rollouts import rollout_of, rollout_stats
from reinagent.report.stats import wilson_interval

# Benchmarks whose evaluator records a token-level F1 next to exact match.
F1_BENCHMARKS = ("hotpotqa",)


def summarize(run_dir: str | Path) -> dict[str, Any]:
    """One JSON-able object describing a run, complete, in progress or killed."""
    from reinagent.report.first_programs import read_first_programs
    from reinagent.store import read_records, read_spec

    spec, records = read_spec(Path(run_dir)), read_records(Path(run_dir))
    return summarize_records(spec, records, run_dir=str(run_dir), first_programs=read_first_programs(run_dir))


def _as_training(summary: dict[str, Any], records: list[TrialRecord]) -> None:
    """An RL training run's rollouts, in the units they have: token episodes (rollout `rl-tokens`),
    solved episodes over episodes, no reflector, and no call latencies or episode times (tokens
    are generated a batch at a time, so a call has no latency of its own and every episode of a
    step spans the step): None, shown "-", never a misleading 0."""
    summary["rollout"] = next((r.trajectory.rollout for r in records if r.trajectory.rollout), "rl-tokens")
    summary["reflector_model"] = None
    summary["rollout_stats"] = rollout_stats(records, sum(r.success for r in records)) | {"attempted": len(records)}
    summary["episode_s"] = None
    usage = summary["usage"]
    for u in (usage, usage["if_uncached"], *usage["by_role"].values(),
              *(u["if_uncached"] for u in usage["by_role"].values())):
        u["latency_s"] = None


def summarize_records(spec: RunSpec, records: list[TrialRecord], run_dir: str = "",
                      first_programs: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The summary of de-duplicated records (one per (task, trial), as `load_run` gives them).
    `first_programs`: a programming run's first programs judged after its loop
    (reinagent.first_programs), which become `solved_tasks.first_program`."""
    cfg = spec.config
    num_trials = int(cfg.get("num_trials") or 0)
    # An RL training run's rollouts (reinagent/rl/loop.py): trial = training step, tasks are sampled
    # per step, so the planned trials are the steps and "cumulative solved" does not apply.
    steps = spec.settings.get("steps") if isinstance(spec.settings.get("rl"), dict) else None
    if steps:
        num_trials = int(steps)
    task_ids = list(spec.task_ids)
    n_tasks = len(task_ids)
    by_trial: dict[int, list[TrialRecord]] = {}
    for rec in records:
        by_trial.setdefault(rec.trial, []).append(rec)
    # One entry per planned trial even when nothing ran yet (a killed run still shows them all).
    last_trial = max([num_trials, *by_trial])
    evaluator = recorded_evaluator(cfg)
    # where each task's loop stopped with a success (report/README: under --evaluator internal, the
    # hidden verdict on the program the loop stopped with; else its first success)
    by_task: dict[str, list[TrialRecord]] = {}
    for rec in records:
        by_task.setdefault(rec.task_id, []).append(rec)
    stopped_at = {tid: solved_at(recs, evaluator) for tid, recs in by_task.items()}
    # the trial each task's loop ended at (its Evaluator passed it): under `internal` a program that
    # passed its own tests and failed the hidden ones ends its loop unsolved, and is not "not attempted" later
    loop_ended = {tid: final.trial for tid, recs in by_task.items()
                  if (final := final_record(recs, evaluator)) is not None and stops_loop(final, evaluator)}
    trials, solved_so_far, solved_first = [], set(), set()
    for t in range(1, last_trial + 1):
        recs = by_trial.get(t, [])
        solved_now = {r.task_id for r in recs if stopped_at.get(r.task_id) == t}
        # tasks still open at trial t that have no record of it: their outcome is not known yet
        ended = {tid for tid, at in loop_ended.items() if at < t}
        not_attempted = n_tasks - len(ended | {r.task_id for r in recs})
        solved_so_far |= solved_now
        if t == 1:
            solved_first = set(solved_now)
        low, high = wilson_interval(len(solved_so_far), n_tasks)
        trials.append({
            "trial": t,
            "attempted": len(recs),
            "solved": len(solved_now),
            "solved_cumulative": len(solved_so_far),
            "success_rate": len(solved_now) / len(recs) if recs else None,
            "success_rate_cumulative": len(solved_so_far) / n_tasks if n_tasks else 0.0,
            "ci_low": low,
            "ci_high": high,
            "errors": sum(r.error is not None for r in recs),
            "not_attempted": max(0, not_attempted),  # > 0: the cumulative figures are a lower bound
            "mean_f1": _mean([r.f1 for r in recs if r.f1 is not None]),
            "mean_reward": _mean([r.reward for r in recs]),
            "wall_s": _wall(_own(recs)),
            # --evaluator internal: attempts the hidden tests never ran on (they failed their own
            # tests with trials left); their "unsolved" is no verdict. None under other evaluators.
            "not_judged": sum(_not_judged(r) for r in recs) if evaluator == "internal" else None,
        })
    usage, by_role = Usage(), {"actor": Usage(), "reflector": Usage()}
    full, full_by_role = Usage(), {"actor": Usage(), "reflector": Usage()}
    for rec in records:
        for call in rec.own_calls:  # a branch's copied records: the source run paid for those
            usage.add(call)
            by_role.setdefault(call.role, Usage()).add(call)
            as_paid = call.model_copy(update={"cached": False})  # tokens and cost it had when made
            full.add(as_paid)
            full_by_role.setdefault(call.role, Usage()).add(as_paid)
    errors = [{"task_id": r.task_id, "trial": r.trial, "error": r.error}
              for r in sorted(records, key=lambda r: (r.trial, r.task_id)) if r.error]
    final = trials[-1] if trials else {"solved_cumulative": 0, "ci_low": 0.0, "ci_high": 1.0}
    summary = {
        "run_dir": run_dir,
        "benchmark": cfg.get("benchmark"),
        "agent": cfg.get("agent"),
        "strategy": cfg.get("strategy"),
        "split": cfg.get("split"),
        "model": cfg.get("model"),
        "seed": cfg.get("seed"),  # two seeds of one setting are told apart by it (report/labels.py)
        "reflector_model": cfg.get("reflector_model") or cfg.get("model"),
        "num_tasks": n_tasks,
        "task_ids": task_ids,
        # which tasks, for the paired tests of report/significance.py
        "solved_tasks": {"first_trial": sorted(solved_first), "by_last_trial": sorted(solved_so_far),
                         # trial-1 failures that were retried (no error, the loop went on: under `internal`
                         # a program that passed its own tests is not) and the tasks solved at trial 2:
                         # report/significance.py
                         "failed_first_trial": sorted({r.task_id for r in by_trial.get(1, [])
                                                       if not r.success and r.error is None
                                                       and not stops_loop(r, evaluator)}),
                         "second_trial": sorted({r.task_id for r in by_trial.get(2, [])
                                                 if r.success and stopped_at.get(r.task_id) == 2})},
        "num_trials": num_trials,
        "status": ("complete" if (steps and by_trial and max(by_trial) >= num_trials)
                   or (not steps and _finished(records, task_ids, num_trials, evaluator)) else "partial"),
        "training_steps": steps,  # set for RL training rollouts: trial = step, no cumulative figures
        "metric": "f1" if cfg.get("benchmark") in F1_BENCHMARKS else "pass_rate",
        # under --evaluator internal the programming headline: the hidden verdict on each task's
        # final program (the paper's pass@1); elsewhere success at trial 1
        "pass_at_1": (final["solved_cumulative"] if evaluator == "internal" else trials[0]["solved"] if trials else 0)
        / n_tasks if n_tasks else 0.0,
        "success_rate": final["solved_cumulative"] / n_tasks if n_tasks else 0.0,
        "evaluator": evaluator,
        "judged_by": judged_by(evaluator),
        "success_ci": [final["ci_low"], final["ci_high"]],
        "trials": trials,
        "usage": _usage_dict(usage) | {
            "by_role": {k: _usage_dict(v) | {"if_uncached": _uncached(full_by_role[k])} for k, v in by_role.items()},
            "if_uncached": _uncached(full),
        },
        "cache_share": usage.cache_hits / usage.calls if usage.calls else 0.0,
        "errors": errors,
        "num_errors": len(errors),
        "num_records": len(records),
        "wall_s": _wall(_own(records)),
        "episode_s": round(sum(r.wall_s for r in _own(records)), 3),
        "copied": _copied(records),
        "git_commit": spec.git_commit,
        "created_at": spec.created_at,
        "reinagent_version": spec.reinagent_version,
        "rollout": rollout_of(spec),
        # the preset and where the settings differ from the reference code's (reinagent/reference.py)
        "reference": departures_summary(cfg),
        "rollout_stats": rollout_stats(records, final["solved_cumulative"]),
        "retries_repeat": _retries_repeat(cfg, num_trials, records),
        # reflections asked for whose reply held nothing of the model's own (reflector.clean_reflection):
        # recorded as "" (memory gains nothing); the reply is in the record's reflection_raw
        "empty_reflections": sum(r.reflection == "" for r in records),
    }
    if steps:
        _as_training(summary, records)
    if first_programs is not None:
        # the single attempt on the same tasks: which first programs the hidden tests pass
        summary["solved_tasks"]["first_program"] = sorted(t for t, v in first_programs.items() if v["passed"] and t in task_ids)
        summary["first_programs_judged"] = sum(t in first_programs for t in task_ids)
    from reinagent.report.programming import own_tests, retry_unchanged
    from reinagent.report.significance import first_program_vs_pass_at_1, retry_after_failure

    if cfg.get("agent") == "coder":  # the paper's two figures of a programming run (report/programming.py)
        summary["retry_unchanged"] = retry_unchanged(records)  # a branch copies trial 1 only: its retries are its own
        summary["own_tests"] = own_tests(records, first_programs)

    summary["first_program_vs_pass_at_1"] = first_program_vs_pass_at_1(summary)

    summary["retry_after_failure"] = retry_after_failure(summary)  # None below 2 trials
    summary["label"] = run_label(summary)
    return summary


def _retries_repeat(cfg: dict[str, Any], num_trials: int, records: list[TrialRecord]) -> dict[str, Any] | None:
    """{"why", "calls", "cached"} when the run's retries repeat its first attempts (NONE at
    temperature 0: reinagent.strategy.repeated_retries) with the retries' actor calls and how many
    the response cache answered; else None."""
    from reinagent.strategy import repeated_retries

    why = repeated_retries(cfg.get("strategy"), cfg.get("temperature"), cfg.get("rollout"), num_trials)
    if why is None:
        return None
    calls = [c for r in records if r.trial > 1 for c in r.own_calls if c.role == "actor"]
    return {"why": why, "calls": len(calls), "cached": sum(c.cached for c in calls)}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _usage_dict(u: Usage) -> dict[str, Any]:
    return {"calls": u.calls, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "cost_usd": round(u.cost_usd, 6), "cache_hits": u.cache_hits, "latency_s": round(u.latency_s, 3)}


def _uncached(u: Usage) -> dict[str, Any]:
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "cost_usd": round(u.cost_usd, 6)}


def judged_by(evaluator: str | None) -> str | None:
    """What the success rate is, said next to it for a programming run (None elsewhere)."""
    if evaluator == "internal":
        return ("pass@1: the hidden tests judged once the program each task's loop stopped with "
                "(the loop ended on the program's own tests)")
    if evaluator == "hidden":
        return ("judged by the hidden tests (an oracle) at every trial: an oracle-gated pass@N, "
                "not the paper's pass@1")
    return None


def _finished(records: list[TrialRecord], task_ids: list[str], num_trials: int, evaluator: str | None = None) -> bool:
    """Every task's loop either stopped (its Evaluator passed it) or tried every trial."""
    tried: dict[str, set[int]] = {}
    solved = set()
    for r in records:
        tried.setdefault(r.task_id, set()).add(r.trial)
        if stops_loop(r, evaluator):
            solved.add(r.task_id)
    return all(tid in solved or len(tried.get(tid, ())) >= num_trials for tid in task_ids)


def _not_judged(record: TrialRecord) -> bool:
    """The hidden tests did not run on this attempt (reinagent/rollouts/base.py says so in its
    evaluation), or it ended in an error before anything judged it."""
    hidden = record.evaluation.get("hidden")
    return record.error is not None or (isinstance(hidden, str) and hidden.startswith("not run"))


def _own(records: list[TrialRecord]) -> list[TrialRecord]:
    """The records this run made: not those `reinagent branch` copied (their time is the source's)."""
    return [r for r in records if r.copied_from is None]


def _copied(records: list[TrialRecord]) -> dict[str, Any] | None:
    """What `reinagent branch` copied into this run: {"from", "records", "trials"}, else None."""
    copied = [r for r in records if r.copied_from is not None]
    if not copied:
        return None
    return {"from": copied[0].copied_from, "records": len(copied), "trials": sorted({r.trial for r in copied})}


def _wall(records: list[TrialRecord]) -> float:
    """Seconds from the first episode's start to the last one's end (0 when nothing ran)."""
    if not records:
        return 0.0
    return round(max(r.finished_at for r in records) - min(r.started_at for r in records), 3)
