"""What a resume changes before it continues, so that it ends exactly where a run started with the
final settings would have ended.

- `--num-trials N` above the run's count: the spec gets the new count (and a `history` entry), and
  the failed records of the old last trial get the reflections that trial skipped because it was
  last (`write_missing_reflections`, run before any new trial). Below the count: refused, since a
  run never forgets trials it finished (a report can still look at the first trials only).
- `--from-trial K`: every record of trial K and later is superseded.
- `--retry-errors`: a task's errored (task, trial) and every later trial of that task are
  superseded: the later trials ran without that trial's reflection (or after a trial that might
  have solved the task), so keeping them would not be what an error-free run records.

- `--base-url`, `--model`, `--reflector-model`, `--max-concurrency`, ... (OVERRIDABLE): where and
  with what the run continues (a model server restarted on another port). Each change is one
  `history` entry ({"base_url": {"from": OLD, "to": NEW}}); records already finished stay as they
  are. What the run measures (benchmark, agent, strategy, split, ...) is refused: that is a new run.
  A new `--base-url` drops the recorded `--api-key-env` (A's key never goes to B) unless the
  resume names it again; the history entry says so.

Superseding is a marker line appended (and fsynced) to records.jsonl before any redo starts
(store.Supersede): reports, notebooks and the next resume never count those records again, even
when this resume is killed right after writing it.
"""

from __future__ import annotations

import asyncio
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from reinagent.errors import ConfigError, ModelError
from reinagent.records import RunSpec, SpecChange, TrialRecord
from reinagent.redact import redact

Key = tuple[str, int]


# Settings a resume may change: where the model and environments are and how hard to push them.
OVERRIDABLE = ("base_url", "model", "reflector_model", "max_concurrency", "max_model_concurrency",
               "api_key_env", "env_url", "schedule", "executor", "ray_address")
# Settings that define the experiment; changing them mid-run would mix two experiments in one.
FIXED = ("benchmark", "agent", "strategy", "split", "num_envs", "memory_size", "max_steps",
         "max_prompt_tokens", "temperature", "max_tokens", "seed", "num_internal_tests", "timeout_s",
         "alfworld_data")


@dataclass
class ResumePlan:
    num_trials: int
    settings: dict[str, Any] = field(default_factory=dict)  # overrides applied to the config
    stale: set[Key] = field(default_factory=set)  # records to supersede before continuing
    changes: dict[str, Any] = field(default_factory=dict)  # for the spec's history
    reason: str = ""


def plan_resume(spec: RunSpec, records: list[TrialRecord], *, num_trials: int | None,
                from_trial: int | None, retry_errors: bool, overrides: dict[str, Any] | None = None) -> ResumePlan:
    """Check the flags against the run; a ConfigError (one line) when they do not fit it."""
    from reinagent.config import MAX_TRIALS, RunConfig

    if num_trials is not None and num_trials > MAX_TRIALS:  # before any loop over the trials
        raise ConfigError(f"--num-trials must be at most {MAX_TRIALS}, got {num_trials}")
    settings = check_overrides(spec, overrides or {})
    dropped_key = _drop_key_on_new_server(spec, settings, overrides or {})

    current = int(spec.config.get("num_trials") or RunConfig.model_fields["num_trials"].default)
    target = current if num_trials is None else num_trials
    if target < current:
        raise ConfigError(
            f"--num-trials {num_trials} is below the run's {current} trials; a run keeps the trials it "
            f"finished: pass --num-trials {current} or more (or leave it out)"
        )
    if from_trial is not None and not 1 <= from_trial <= target:
        raise ConfigError(f"--from-trial {from_trial} is beyond the run's {target} trials; valid: 1 to {target}")
    plan = ResumePlan(num_trials=target, settings=settings)
    for name, value in settings.items():
        old = spec.config.get(name)
        plan.changes[name] = {"from": _shown(name, old), "to": _shown(name, value)}
    if dropped_key:
        plan.changes["api_key_env"]["why"] = dropped_key
    if target != current:
        plan.changes["num_trials"] = {"from": current, "to": target}
    reasons = []
    if from_trial is not None and any(r.trial >= from_trial for r in records):
        plan.stale |= {(r.task_id, r.trial) for r in records if r.trial >= from_trial}
        plan.changes["from_trial"] = from_trial
        reasons.append(f"from-trial {from_trial}")
    if retry_errors:
        first_error: dict[str, int] = {}
        for r in records:
            if r.error is not None:
                first_error[r.task_id] = min(r.trial, first_error.get(r.task_id, r.trial))
        if first_error:
            plan.stale |= {(r.task_id, r.trial) for r in records
                           if r.task_id in first_error and r.trial >= first_error[r.task_id]}
            plan.changes["retry_errors"] = sorted(f"{t}/trial{n}" for t, n in first_error.items())
            reasons.append("retry-errors")
    if plan.stale:  # the history says how many; the marker in records.jsonl says which
        plan.changes["superseded"] = len(plan.stale)
    plan.reason = ", ".join(reasons)
    return plan


def check_overrides(spec: RunSpec, overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides that change something; ConfigError for a setting a resume may not change."""
    from reinagent.config import RunConfig, flag_name

    given = {k: v for k, v in overrides.items() if v is not None}
    for name, value in given.items():
        if name in OVERRIDABLE:
            continue
        if name in FIXED or name in RunConfig.model_fields:
            raise ConfigError(
                f"resume cannot change {flag_name(name)} (the run's is {spec.config.get(name)!r}, asked "
                f"{value!r}): it would change what the run measures; start a new run with `reinagent run` "
                f"instead. A resume may change {', '.join(flag_name(n) for n in OVERRIDABLE)}"
            )
        raise ConfigError(f"unknown setting {name!r} for resume; valid: {', '.join(OVERRIDABLE)}")
    # Validate as a config would (a bad URL or -2 is the same one-line error as for `run`).
    from reinagent.config import build_config

    build_config(**{k: v for k, v in spec.config.items() if k in RunConfig.model_fields and k not in given},
                 **given)
    return {k: v for k, v in given.items() if spec.config.get(k) != _shown(k, v)}


def _drop_key_on_new_server(spec: RunSpec, settings: dict[str, Any], overrides: dict[str, Any]) -> str:
    """A resume against another server does not send it the old server's key: the recorded
    --api-key-env is dropped unless it is given again (then the key goes where the user said)."""
    if "base_url" not in settings or overrides.get("api_key_env") or not spec.config.get("api_key_env"):
        return ""
    settings["api_key_env"] = None
    return ("--base-url changed: the key of the old server is not sent to the new one; "
            "pass --api-key-env again to send it")


def recorded_settings(spec: RunSpec, plan: ResumePlan) -> dict[str, Any]:
    """Defaults the run resolved when it started, so that a resume does not take this version's:
    `constrained` (what None came to, in spec.settings), unless the resume changes the model or
    its server, for which the default is worked out afresh."""
    if spec.config.get("constrained") is not None or {"model", "base_url"} & plan.settings.keys():
        return {}
    recorded = spec.settings.get("constrained")
    return {} if recorded is None else {"constrained": recorded}


def _shown(name: str, value: Any) -> Any:
    """As spec.json holds it: URLs without credentials."""
    return redact(value) if name in ("base_url", "env_url") and isinstance(value, str) else value


def with_change(spec: RunSpec, plan: ResumePlan) -> RunSpec:
    """The spec with the new trial count, the overrides and one more history entry."""
    config = {**spec.config, **{k: _shown(k, v) for k, v in plan.settings.items()}, "num_trials": plan.num_trials}
    change = SpecChange(at=time.time(), command=[redact(a) for a in sys.argv], changes=plan.changes)
    return spec.model_copy(update={"config": config, "history": [*spec.history, change]})


def missing_reflections(done: dict[Key, TrialRecord], num_trials: int, uses_reflections: bool) -> list[TrialRecord]:
    """Failed records whose reflection a run with `num_trials` trials would have written: those of a
    trial that was the last one when it ran, and whose task has not gone on to the next trial."""
    if not uses_reflections:
        return []
    return [r for (task_id, trial), r in done.items()
            if trial < num_trials and not r.success and r.error is None and r.reflection is None
            and (task_id, trial + 1) not in done]


async def write_missing_reflections(exp, done: dict[Key, TrialRecord], limit: asyncio.Semaphore) -> None:
    """Reflect on those records (as `run_episode` would have) and append the completed records,
    which replace the originals; `done` is updated so the next trial's memory holds them."""
    todo = missing_reflections(done, exp.config.num_trials, exp.config.strategy.uses_reflections)
    if not todo:
        return
    tasks = {t.task_id: t for t in exp.tasks}

    async def one(rec: TrialRecord) -> TrialRecord:
        async with limit:
            amended = await reflect_on(exp, tasks[rec.task_id], rec)
        await exp.store.append_async(amended)
        return amended

    for amended in await asyncio.gather(*(one(r) for r in todo)):
        done[(amended.task_id, amended.trial)] = amended
    print(f"wrote {len(todo)} reflections the old last trial skipped", file=sys.stderr, flush=True)


async def reflect_on(exp, task, rec: TrialRecord) -> TrialRecord:
    rollout = f"{task.task_id}/trial{rec.trial}"  # the rollout id run_episode uses: same cache key
    amended = rec.model_copy(deep=True)
    try:
        attempt = exp.agent.render_attempt(task, rec.trajectory)
        amended.reflection, call = await exp.reflector.reflect(attempt, rollout_id=f"{rollout}/reflect")
        amended.reflection_calls.append(call)
    except ModelError as err:
        amended.error = redact(f"model error: {err}")
    except Exception as err:  # noqa: BLE001 - as in run_episode: an error of this (task, trial)
        amended.error = redact(f"{type(err).__name__}: {err}")
        exp.store.run_dir.mkdir(parents=True, exist_ok=True)  # a database run's folder: made on demand
        with open(exp.store.run_dir / "errors.log", "a", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(f"--- {task.task_id} trial {rec.trial} (reflection) at {time.ctime()}\n"
                     f"{redact(traceback.format_exc())}\n")
    return amended
