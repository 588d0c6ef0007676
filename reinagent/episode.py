"""One (task, trial): the rollout plays the episode, the benchmark judges it, the Reflector reflects
on a failure. Whatever goes wrong ends up in the record, never in the trial loop."""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reinagent.agents.base import Activity, Actor, Budget, text_tokens
from reinagent.errors import InfrastructureError, ModelError, SandboxError
from reinagent.memory import EpisodicMemory, trial_view
from reinagent.records import TrialRecord, Trajectory, first_non_finite, stops_loop
from reinagent.redact import redact
from reinagent.runlock import append_text
from reinagent.rollouts import Episode, make_rollout
from reinagent.text import clipped

if TYPE_CHECKING:
    from reinagent.benchmarks.base import Task
    from reinagent.plan import Experiment

# An error message kept in a record (and shown in reports): a server's 200 MB error body or a
# program's endless exception text must not become a 200 MB records.jsonl.
MAX_ERROR_CHARS = 4000


async def run_episode(
    exp: Experiment, task: Task, trial: int, memory: EpisodicMemory, previous: TrialRecord | None
) -> TrialRecord:
    """One (task, trial): act, evaluate, reflect on failure. Errors end up in the record."""
    cfg = exp.config
    last_attempt = None
    if previous is not None and previous.error is None and cfg.strategy.uses_last_attempt:
        last_attempt = last_attempt_text(exp, task, previous.trajectory)
    view = trial_view(trial, cfg.strategy, memory, last_attempt, kept_tests(previous),
                      previous.trajectory if last_attempt is not None else None)
    rollout = f"{task.task_id}/trial{trial}"
    record = TrialRecord(
        task_id=task.task_id, trial=trial, memory=view.shown_reflections, started_at=time.time()
    )
    actor = Actor(exp.actor_llm, Trajectory(), rollout, budget=Budget.of(exp.plan.agent_settings),
                  activity=getattr(exp, "activity", None) or Activity(),
                  temperature=cfg.first_trial_temperature if trial == 1 else None)
    settings = exp.plan.rollout
    evaluator = getattr(cfg, "evaluator", None)
    episode = Episode(exp.benchmark, exp.agent, task, view, actor, exp.plan.task_settings, settings, exp.reflector,
                      evaluator=evaluator, last_trial=trial >= cfg.num_trials)
    try:
        trajectory, evaluation = await make_rollout(cfg.rollout, settings).run(episode)
        record.trajectory = trajectory
        record.success, record.reward, record.f1 = evaluation.success, evaluation.reward, evaluation.f1
        record.internal_passed = evaluation.internal_passed
        record.answer = trajectory.answer
        record.evaluation = dict(evaluation.detail)
        # Reflect where the loop goes on: the Evaluator (the program's own tests under
        # --evaluator internal, else the benchmark's verdict) failed the attempt, and trials are left.
        if not stops_loop(record, evaluator) and trial < cfg.num_trials and cfg.strategy.uses_reflections:
            reflected = await exp.reflector.reflect(
                reflector_input(exp, task, trajectory), rollout_id=f"{rollout}/reflect",
                past=memory.last(cfg.reflector_memory))
            record.reflection, record.reflection_raw = reflected.text, reflected.raw
            record.reflection_calls.append(reflected.call)
    except InfrastructureError as err:  # the model server or the sandbox failed, not the model
        record.trajectory = record.trajectory if record.trajectory.steps else actor.trajectory
        label = "model error" if isinstance(err, ModelError) else "sandbox error" if isinstance(
            err, SandboxError) else "infrastructure error"
        record.error = clipped(redact(f"{label}: {err}"), MAX_ERROR_CHARS, "error")
    except Exception as err:  # noqa: BLE001 - one broken episode must never kill the run
        record.trajectory = record.trajectory if record.trajectory.steps else actor.trajectory
        record.error = clipped(redact(f"{type(err).__name__}: {err}"), MAX_ERROR_CHARS, "error")
        _log_traceback(exp.store.run_dir, task.task_id, trial)
    record = _finite(record)
    if record.error is not None:
        record.reflection = record.reflection_raw = None  # never reflect on (or remember) an attempt that was not judged
        if view.internal_tests is not None and "internal_tests" not in record.trajectory.extra:
            # the tests this trial was given go on to the next: they are written once per task
            record.trajectory.extra["internal_tests"] = list(view.internal_tests)
    # how often the benchmark's judge ran: 1 for react, more where a search asked it for many paths
    record.evaluation["benchmark_evaluations"] = episode.benchmark_evaluations
    record.finished_at = time.time()
    return record


def kept_tests(previous: TrialRecord | None) -> tuple[str, ...] | None:
    """The internal tests the task's earlier trial ran (the coder writes them once per task, as
    the reference does, and every later trial keeps them, none usable included); None when no
    earlier trial recorded any (trial 1, or one that ended in an error before they were kept)."""
    tests = previous.trajectory.extra.get("internal_tests") if previous is not None else None
    return tuple(str(t) for t in tests) if isinstance(tests, list) else None


def last_attempt_text(exp: Experiment, task: Task, trajectory: Trajectory) -> str:
    """The previous attempt as LAST_ATTEMPT shows it, cut to --truncate-attempts tokens of the actor."""
    text = exp.agent.render_last_attempt(task, trajectory)
    return _shortened(exp, text, exp.actor_llm)


def reflector_input(exp: Experiment, task: Task, trajectory: Trajectory) -> str:
    """The failed attempt as the Reflector reads it, cut to --truncate-attempts tokens of its model."""
    return _shortened(exp, exp.agent.render_attempt(task, trajectory), exp.reflector.llm)


def _shortened(exp: Experiment, text: str, llm) -> str:
    limit = exp.config.truncate_attempts
    return text if limit is None else exp.agent.shorten_attempt(text, limit, text_tokens(llm))


def _finite(record: TrialRecord) -> TrialRecord:
    """The record, or (when a NaN or an infinity reached it, e.g. from an environment's info) an
    errored copy with those numbers removed: every number written must read back as written."""
    found = first_non_finite(record.model_dump())
    if found is None:
        return record
    error = record.error or f"non-finite number at {found[0]} ({found[1]}); records hold finite numbers only"
    for blank in (None, 0.0):  # None where the field allows it (info dicts), else 0.0 (typed floats)
        data = record.model_dump()
        while (found := first_non_finite(data)) is not None:
            *parents, last = found[0].split(".")
            holder: Any = data
            for key in parents:
                holder = holder[int(key) if isinstance(holder, list) else key]
            holder[int(last) if isinstance(holder, list) else last] = blank
        data.update(success=False, reward=0.0, f1=None, error=error)
        try:
            return TrialRecord.model_validate(data)
        except ValueError:
            continue
    return TrialRecord(task_id=record.task_id, trial=record.trial, memory=record.memory,
                       started_at=record.started_at, error=error)


def _log_traceback(run_dir: Path, task_id: str, trial: int) -> None:
    text = redact(traceback.format_exc())
    run_dir.mkdir(parents=True, exist_ok=True)  # a database run's local folder exists only for this
    append_text(run_dir / "errors.log", f"--- {task_id} trial {trial} at {time.ctime()}\n{text}\n")  # never via a link
