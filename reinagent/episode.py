"""One (task, trial): the rollout plays the episode, the benchmark judges it, the Reflector reflects
on a failure. Whatever goes wrong ends up in the record, never in the trial loop."""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from reinagent.agents.base import Actor, Budget
from reinagent.errors import InfrastructureError, ModelError, SandboxError
from reinagent.memory import EpisodicMemory, MemoryView
from reinagent.records import TrialRecord, Trajectory
from reinagent.redact import redact
from reinagent.rollouts import Episode, make_rollout

if TYPE_CHECKING:
    from reinagent.benchmarks.base import Task
    from reinagent.experiment import Experiment


async def run_episode(
    exp: Experiment, task: Task, trial: int, memory: EpisodicMemory, previous: TrialRecord | None
) -> TrialRecord:
    """One (task, trial): act, evaluate, reflect on failure. Errors end up in the record."""
    cfg = exp.config
    last_attempt = None
    if previous is not None and previous.error is None and cfg.strategy.uses_last_attempt:
        last_attempt = exp.agent.render_attempt(task, previous.trajectory)
    view = MemoryView(trial, cfg.strategy, tuple(memory.recent()), last_attempt)
    rollout = f"{task.task_id}/trial{trial}"
    record = TrialRecord(
        task_id=task.task_id, trial=trial, memory=view.shown_reflections, started_at=time.time()
    )
    actor = Actor(exp.actor_llm, Trajectory(), rollout, budget=Budget.of(cfg))
    try:
        episode = Episode(exp.benchmark, exp.agent, task, view, actor, cfg, exp.reflector)
        trajectory, evaluation = await make_rollout(cfg.rollout, cfg).run(episode)
        record.trajectory = trajectory
        record.success, record.reward, record.f1 = evaluation.success, evaluation.reward, evaluation.f1
        record.answer = trajectory.answer
        record.evaluation = evaluation.detail
        if not evaluation.success and trial < cfg.num_trials and cfg.strategy.uses_reflections:
            attempt = exp.agent.render_attempt(task, trajectory)
            record.reflection, call = await exp.reflector.reflect(attempt, rollout_id=f"{rollout}/reflect")
            record.reflection_calls.append(call)
    except InfrastructureError as err:  # the model server or the sandbox failed, not the model
        record.trajectory = record.trajectory if record.trajectory.steps else actor.trajectory
        label = "model error" if isinstance(err, ModelError) else "sandbox error" if isinstance(
            err, SandboxError) else "infrastructure error"
        record.error = redact(f"{label}: {err}")
    except Exception as err:  # noqa: BLE001 - one broken episode must never kill the run
        record.trajectory = record.trajectory if record.trajectory.steps else actor.trajectory
        record.error = redact(f"{type(err).__name__}: {err}")
        _log_traceback(exp.store.run_dir, task.task_id, trial)
    if record.error is not None:
        record.reflection = None  # never reflect on (or remember) an attempt that was not judged
    record.finished_at = time.time()
    return record


def _log_traceback(run_dir: Path, task_id: str, trial: int) -> None:
    text = redact(traceback.format_exc())
    with open(run_dir / "errors.log", "a", encoding="utf-8", errors="backslashreplace") as fh:  # any str
        fh.write(f"--- {task_id} trial {trial} at {time.ctime()}\n{text}\n")
