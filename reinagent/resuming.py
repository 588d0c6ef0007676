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
- Always: a task whose trial k has no record while a later trial has one (`repair` moved the trial-k
  line aside, or a hand edit removed it) has its later trials superseded, for the same reason: they
  ran on the lost trial. Trial k is redone with the memory of trials 1..k-1 only (schedule.py).

- `--base-url`, `--model`, `--reflector-model`, `--max-concurrency`, ... (OVERRIDABLE): where and
  with what the run continues (a model server restarted on another port). Each change is one
  `history` entry ({"base_url": {"from": OLD, "to": NEW}}); records already finished stay as they
  are. What the run measures (benchmark, agent, strategy, split, ...) is refused: that is a new run.
  A new `--base-url` drops the recorded `--api-key-env` (A's key never goes to B) unless the
  resume names it again; the history entry says so.
- Where keys go: a spec.json this user did not seal on this machine (reinagent/seal.py) cannot
  send a key anywhere: the resume asks for --base-url / --api-key-env / --env-url again
  (`confirm_destinations`), and seals the spec once they are given. Nor can it choose whose
  cached answers the run replays: a recorded --cache-dir or --cache-scope shared is asked for too.

Superseding is a marker line appended (and fsynced) to records.jsonl before any redo starts
(store.Supersede): reports, notebooks and the next resume never count those records again, even
when this resume is killed right after writing it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from reinagent.errors import ConfigError, ModelError
from reinagent.records import RunSpec, SpecChange, TrialRecord, recorded_evaluator, stops_loop
from reinagent.redact import redact, redact_argv, redact_url
from reinagent.runlock import append_text
from reinagent.slots import Slots
from reinagent.text import clipped, shown

Key = tuple[str, int]


# Settings a resume may change: where the model and environments are and how hard to push them.
OVERRIDABLE = ("base_url", "model", "reflector_model", "max_concurrency", "max_model_concurrency",
               "api_key_env", "env_url", "schedule", "executor", "ray_address", "cache_dir", "cache_scope")
# Settings that define the experiment; changing them mid-run would mix two experiments in one.
FIXED = ("benchmark", "agent", "strategy", "split", "num_envs", "memory_size", "max_steps",
         "max_prompt_tokens", "temperature", "max_tokens", "seed", "num_internal_tests", "timeout_s",
         "alfworld_data", "search_reflections", "search_reflect_on", "evaluator", "internal_tests_kept", "preset",
         "truncate_attempts", "reflector_memory", "reflection_prompt", "reflection_max_tokens", "alfworld_demos", "alfworld_loop",
         "short_reply_retries")


@dataclass
class ResumePlan:
    num_trials: int
    settings: dict[str, Any] = field(default_factory=dict)  # overrides applied to the config
    stale: set[Key] = field(default_factory=set)  # records to supersede before continuing
    changes: dict[str, Any] = field(default_factory=dict)  # for the spec's history
    reason: str = ""
    notice: str = ""  # a line for the user before the resume starts (lost trials redone)
    confirmed: bool = False  # this user chose the run's endpoints (seal or flags): the spec is sealed anew


def plan_resume(spec: RunSpec, records: list[TrialRecord], *, num_trials: int | None,
                from_trial: int | None, retry_errors: bool, overrides: dict[str, Any] | None = None) -> ResumePlan:
    """Check the flags against the run; a ConfigError (one line) when they do not fit it."""
    from reinagent.config import MAX_TRIALS, RunConfig

    if num_trials is not None and num_trials > MAX_TRIALS:  # before any loop over the trials
        raise ConfigError(f"--num-trials must be at most {MAX_TRIALS}, got {num_trials}")
    settings = check_overrides(spec, overrides or {})
    confirmed = confirm_destinations(spec, settings, overrides or {})
    dropped_key = _drop_key_on_new_server(spec, settings, overrides or {})
    same_server: dict[str, str] = {}
    for name, flag in (("base_url", "--base-url"), ("env_url", "--env-url")):
        recorded = spec.config.get(name)
        if isinstance(recorded, str) and "***" in recorded and name not in settings:
            # spec.json never holds a URL's userinfo or query values (redact.py): a resume cannot
            # reconnect with `?key=***`, so it asks for the URL instead of failing at the server
            if not (overrides or {}).get(name):
                raise ConfigError(f"the run's {name} was recorded without its credentials ({clipped(recorded, 200)}); "
                                  f"give it again: {flag} URL")
            same_server[name] = overrides[name]  # the recorded URL, given whole: used, not a change

    current = int(spec.config.get("num_trials") or RunConfig.model_fields["num_trials"].default)
    target = current if num_trials is None else num_trials
    if target < current:
        raise ConfigError(
            f"--num-trials {num_trials} is below the run's {current} trials; a run keeps the trials it "
            f"finished: pass --num-trials {current} or more (or leave it out)"
        )
    if from_trial is not None and not 1 <= from_trial <= target:
        raise ConfigError(f"--from-trial {from_trial} is beyond the run's {target} trials; valid: 1 to {target}")
    plan = ResumePlan(num_trials=target, settings=settings, confirmed=confirmed)
    for name, value in settings.items():
        old = spec.config.get(name)
        plan.changes[name] = {"from": _shown(name, old), "to": _shown(name, value)}
    settings.update(same_server)
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
    lost = lost_trials(records)
    if lost:
        plan.stale |= {(r.task_id, r.trial) for r in records if r.task_id in lost and r.trial > lost[r.task_id]}
        plan.changes["lost_trials"] = sorted(f"{t}/trial{n}" for t, n in lost.items())
        reasons.append("lost trials")
        shown = ", ".join(plan.changes["lost_trials"][:3]) + (", ..." if len(lost) > 3 else "")
        plan.notice = (f"{len(lost)} task(s) lack the record of a trial their later trials ran on ({shown}; "
                       f"moved aside by `reinagent repair`?): redoing from that trial, superseding the later ones")
    if plan.stale:  # the history says how many; the marker in records.jsonl says which
        plan.changes["superseded"] = len(plan.stale)
    plan.reason = ", ".join(reasons)
    return plan


def lost_trials(records: list[TrialRecord]) -> dict[str, int]:
    """Per task, its first trial without a record when a later trial of it has one. Trials run in
    order and stop at a success, so such a gap is a record lost after the later trials ran on it."""
    trials: dict[str, set[int]] = {}
    for r in records:
        trials.setdefault(r.task_id, set()).add(r.trial)
    lost = {}
    for task_id, have in trials.items():
        first_gap = next(k for k in range(1, max(have) + 2) if k not in have)
        if first_gap < max(have):
            lost[task_id] = first_gap
    return lost


def check_overrides(spec: RunSpec, overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides that change something; ConfigError for a setting a resume may not change."""
    from reinagent.config import RunConfig, flag_name

    given = {k: v for k, v in overrides.items() if v is not None}
    for name, value in given.items():
        if name in OVERRIDABLE:
            continue
        if name in FIXED or name in RunConfig.model_fields:
            raise ConfigError(
                f"resume cannot change {flag_name(name)} (the run's is {shown(spec.config.get(name))}, asked "
                f"{shown(value)}): it would change what the run measures; start a new run with `reinagent run` "
                f"instead. A resume may change {', '.join(flag_name(n) for n in OVERRIDABLE)}"
            )
        raise ConfigError(f"unknown setting {shown(name)} for resume; valid: {', '.join(OVERRIDABLE)}")
    # Validate as a config would (a bad URL or -2 is the same one-line error as for `run`).
    from reinagent.config import build_config

    build_config(**{k: v for k, v in spec.config.items() if k in RunConfig.model_fields and k not in given},
                 **given)
    return {k: v for k, v in given.items() if spec.config.get(k) != _shown(k, v)}


def confirm_destinations(spec: RunSpec, settings: dict[str, Any], overrides: dict[str, Any]) -> bool:
    """Whether this user chose where the run's keys go: spec.json carries this user's seal of its
    endpoints (reinagent/seal.py), or this command line names every endpoint the run records. A
    ConfigError (one line) when neither holds and a key would travel: the recorded --api-key-env
    (whatever variable it names), REINAGENT_SERVER_API_KEY to a recorded --base-url, or
    REINAGENT_ENV_TOKEN to a recorded --env-url; or when the run would join a recorded Ray
    cluster (--ray-address). A run directory is data anyone can write; it must not choose which
    of your secrets go where, nor whose cluster runs your episodes (issue 45)."""
    from reinagent.llm.wire import SERVER_KEY_ENV, is_provider_endpoint
    from reinagent.seal import CACHE_SETTINGS, DESTINATIONS, is_sealed, trusted_cache
    from reinagent.service.client import TOKEN_ENV

    if is_sealed(spec.config, spec.settings):
        return True
    given = {name for name in (*DESTINATIONS, *CACHE_SETTINGS) if overrides.get(name)}
    recorded = {name: spec.config.get(name) for name in DESTINATIONS if spec.config.get(name)}
    cache = trusted_cache(spec.config)  # whose answers are replayed as this run's model's
    key_env = recorded.get("api_key_env")
    if "api_key_env" not in given and "base_url" in settings:
        key_env = None  # a new --base-url drops the recorded variable (_drop_key_on_new_server)
    ask = []
    if key_env and "api_key_env" not in given:
        ask.append(("--api-key-env VAR", f"api_key_env {clipped(str(key_env), 100)}"))
    base = recorded.get("base_url") if "base_url" not in given else None
    if base and (key_env or overrides.get("api_key_env")
                 or (not is_provider_endpoint(base) and os.environ.get(SERVER_KEY_ENV))):
        ask.insert(0, ("--base-url URL", f"base_url {clipped(str(base), 200)}"))
    env_url = recorded.get("env_url") if "env_url" not in given else None
    if env_url and os.environ.get(TOKEN_ENV):
        ask.append(("--env-url URL", f"env_url {clipped(str(env_url), 200)}"))
    # a Ray cluster is sent the episode code and its answers are unpickled here: as trusted as a key
    ray = recorded.get("ray_address") if "ray_address" not in given else None
    if ray and (overrides.get("executor") or spec.config.get("executor")) == "ray":
        ask.append(("--ray-address HOST:PORT", f"ray_address {clipped(str(ray), 200)}"))
    # a cache is asked for whether or not a key travels: its entries become the run's model answers
    if "cache_dir" in cache and "cache_dir" not in given:
        ask.append(("--cache-dir DIR", f"cache_dir {clipped(str(cache['cache_dir']), 200)}"))
    if "cache_scope" in cache and "cache_scope" not in given:
        ask.append(("--cache-scope shared|run", f"cache_scope {clipped(str(cache['cache_scope']), 40)}"))
    if ask:
        raise ConfigError(
            f"spec.json names where to send your keys or whose cached answers to replay "
            f"({', '.join(why for _, why in ask)}) and this user did not seal it on this machine (a run from "
            f"elsewhere, or an edited spec): a run directory does not choose these; give them again: "
            f"{' '.join(flag for flag, _ in ask)}")
    return (all(name in given or (name == "api_key_env" and key_env is None) for name in recorded)
            and all(name in given for name in cache))


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
    its server, for which the default is worked out afresh; `search_reflections` None (no bound)
    for a run started before that setting existed; and `evaluator` (see `_evaluator`)."""
    kept: dict[str, Any] = {} if "search_reflections" in spec.config else {"search_reflections": None}
    kept.update(_evaluator(spec))
    kept.update(_coder_tokens(spec))
    if spec.config.get("constrained") is not None or {"model", "base_url"} & plan.settings.keys():
        return kept
    recorded = spec.settings.get("constrained")
    return kept if recorded is None else {**kept, "constrained": recorded}


def _evaluator(spec: RunSpec) -> dict[str, Any]:
    """A run keeps its Evaluator. One started before `--evaluator` existed (no such key in its spec)
    was judged by the hidden tests every trial: it goes on so, not under today's default."""
    if "evaluator" in spec.config:
        return {}
    evaluator = recorded_evaluator(spec.config)
    return {} if evaluator is None else {"evaluator": evaluator}


def _coder_tokens(spec: RunSpec) -> dict[str, Any]:
    """A coder run started before its config recorded a part's defaults (spec.settings has no
    `defaults_recorded`) recorded max_tokens 256 whether or not it was given, and its coder used
    768 unless the value differed from 256: it goes on with what it used."""
    config = spec.config
    if spec.settings.get("defaults_recorded") or config.get("agent") != "coder" or config.get("max_tokens") != 256:
        return {}
    from reinagent.agents.coder import DEFAULT_MAX_TOKENS

    return {"max_tokens": DEFAULT_MAX_TOKENS}


def _shown(name: str, value: Any) -> Any:
    """As spec.json holds it: URLs without credentials."""
    return redact_url(value) if name in ("base_url", "env_url", "store") and isinstance(value, str) else value


def with_change(spec: RunSpec, plan: ResumePlan) -> RunSpec:
    """The spec with the new trial count, the overrides and one more history entry (none when the
    plan changes nothing), sealed when this user confirmed its endpoints (`plan.confirmed`)."""
    config = {**spec.config, **{k: _shown(k, v) for k, v in plan.settings.items()}, "num_trials": plan.num_trials}
    update: dict[str, Any] = {"config": config, "settings": sealed_settings(spec.settings, config, plan.confirmed)}
    if plan.changes:
        change = SpecChange(at=time.time(), command=redact_argv(sys.argv), changes=plan.changes)
        update["history"] = [*spec.history, change]
    return spec.model_copy(update=update)


def sealed_settings(settings: dict[str, Any], config: dict[str, Any], confirmed: bool) -> dict[str, Any]:
    """`settings` with the seal of `config`'s endpoints when this user confirmed them, else as they
    were (a seal that does not verify trusts nothing)."""
    from reinagent.seal import SEAL_FIELD, seal

    tag = seal(config) if confirmed else None
    return {**settings, SEAL_FIELD: tag} if tag else settings


def missing_reflections(done: dict[Key, TrialRecord], num_trials: int, uses_reflections: bool,
                        evaluator: str | None = None) -> list[TrialRecord]:
    """Failed records whose reflection a run with `num_trials` trials would have written: those of a
    trial that was the last one when it ran, and whose task has not gone on to the next trial.
    Failed as the run's Evaluator says (under --evaluator internal: the program's own tests, even
    where the hidden tests, run because that trial was the last, passed it)."""
    if not uses_reflections:
        return []
    return [r for (task_id, trial), r in done.items()
            if trial < num_trials and not stops_loop(r, evaluator) and r.error is None and r.reflection is None
            and (task_id, trial + 1) not in done]


async def write_missing_reflections(exp, done: dict[Key, TrialRecord], limit: Slots) -> None:
    """Reflect on those records (as `run_episode` would have) and append the completed records,
    which replace the originals; `done` is updated so the next trial's memory holds them."""
    todo = missing_reflections(done, exp.config.num_trials, exp.config.strategy.uses_reflections,
                               getattr(exp.config, "evaluator", None))
    if not todo:
        return
    tasks = {t.task_id: t for t in exp.tasks}

    async def one(rec: TrialRecord) -> TrialRecord:
        past = [r.reflection for (tid, n), r in sorted(done.items()) if tid == rec.task_id and n < rec.trial
                and r.reflection and r.error is None]
        async with limit:
            amended = await reflect_on(exp, tasks[rec.task_id], rec, past)
        await exp.store.append_async(amended)
        return amended

    for amended in await asyncio.gather(*(one(r) for r in todo)):
        done[(amended.task_id, amended.trial)] = amended
    print(f"wrote {len(todo)} reflection{'' if len(todo) == 1 else 's'} the old last trial skipped",
          file=sys.stderr, flush=True)


async def reflect_on(exp, task, rec: TrialRecord, past: list[str] | None = None) -> TrialRecord:
    """The record with the reflection run_episode would have written; `past`: the task's earlier
    reflections, in trial order (the Reflector sees the last --reflector-memory of them)."""
    from reinagent.episode import reflector_input
    from reinagent.memory import EpisodicMemory

    rollout = f"{task.task_id}/trial{rec.trial}"  # the rollout id run_episode uses: same cache key
    amended = rec.model_copy(deep=True)
    try:
        shown = EpisodicMemory(reflections=list(past or [])).last(exp.config.reflector_memory)
        reflected = await exp.reflector.reflect(
            reflector_input(exp, task, rec.trajectory), rollout_id=f"{rollout}/reflect", past=shown)
        amended.reflection, amended.reflection_raw = reflected.text, reflected.raw
        amended.reflection_calls.append(reflected.call)
    except ModelError as err:
        amended.error = redact(f"model error: {err}")
    except Exception as err:  # noqa: BLE001 - as in run_episode: an error of this (task, trial)
        amended.error = redact(f"{type(err).__name__}: {err}")
        exp.store.run_dir.mkdir(parents=True, exist_ok=True)  # a database run's folder: made on demand
        append_text(exp.store.run_dir / "errors.log", f"--- {task.task_id} trial {rec.trial} (reflection) at "
                                                      f"{time.ctime()}\n{redact(traceback.format_exc())}\n")
    return amended
