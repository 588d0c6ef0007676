"""Starting, resuming and loading runs: the life of a run around its trial loop.

The store (a run directory by default) is the single source of truth. Memory, progress and results
are rebuilt from its records, so `resume` continues exactly where a killed run stopped and never
repeats a model call for a finished (task, trial). experiment.py assembles a run from its config,
schedule.py runs its trials (through an executor, each (task, trial) in episode.py).
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from reinagent.benchmarks.base import Benchmark, Task
from reinagent.config import RunConfig
from reinagent.episode import run_episode  # noqa: F401 - re-exported: reinagent.runner.run_episode
from reinagent.errors import ConfigError, RunDirError, RunInterrupted
from reinagent.experiment import (  # noqa: F401 - re-exported for callers of the old runner API
    Experiment, build_models, cache_key_of, default_run_dir, latest_records, make_experiment, make_spec,
    preflight, preflight_settings, prepare, resolve, rollout_settings, select_tasks,
)
from reinagent.records import RunSpec, TrialRecord
from reinagent.schedule import run_trials  # the trial schedule (pipeline or barrier)
from reinagent.store import RunStore, check_new_run_dir, read_records


async def _execute(exp: Experiment, records: list[TrialRecord], progress: bool) -> Path:
    from reinagent.first_programs import judge_first_programs

    try:
        await run_trials(exp, records, progress=progress)
        await judge_first_programs(exp)  # after the loop: its verdicts never reach a prompt
    finally:
        try:
            for llm in exp.llms:
                await _bounded(llm.aclose())
            if hasattr(exp.benchmark, "aclose"):  # an env server's pooled connections live on this loop
                await _bounded(exp.benchmark.aclose())
            exp.benchmark.close()
        finally:
            exp.store.close()  # drops the run lock
    return exp.store.run_dir


async def _bounded(closing, timeout_s: float = 30.0) -> None:
    """Closing a client must never keep an interrupted run from exiting: every record is already
    durable, and a connection a held request keeps open is dropped with the process anyway."""
    try:
        await asyncio.wait_for(closing, timeout_s)
    except asyncio.TimeoutError:
        print(f"closing a model or environment client took over {timeout_s:.0f} s; exiting without it",
              file=sys.stderr, flush=True)


def _start(config, bench, tasks, store: RunStore, models, records, progress: bool, *,
           where: tuple[str, str | None]) -> Path:
    """Run the trials; `where` names the run for `reinagent resume` (its directory, or its id and
    database URL) should Ctrl-C stop it."""
    try:
        exp = make_experiment(config, bench, tasks, store, models)
    except BaseException:
        store.close()  # never leave the run locked by a half-built experiment
        raise
    try:
        return run_sync(_execute(exp, records, progress))
    except KeyboardInterrupt as err:  # Ctrl-C: every finished (task, trial) is durable; say where
        if isinstance(err, RunInterrupted):
            raise
        raise RunInterrupted(*where) from err


def run_sync(coro):
    """asyncio.run, also from inside a running event loop (Jupyter): then in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass(frozen=True)
class RunRef:
    """Where a run lives: its store (URL without password; None for a plain run directory), its id
    (the directory's name in a directory store) and its local directory (the run directory itself,
    or for a database store the folder that holds errors.log)."""

    store: str | None
    run_id: str
    run_dir: Path


def _prepare(config: RunConfig) -> tuple[RunConfig, Benchmark, list[Task]]:
    """experiment.prepare, then the executor's own checks (--executor ray: Ray installed, the
    cluster reachable), here because the executors sit above experiment.py."""
    from reinagent.executors import check_executor

    config, bench, tasks = prepare(config)
    check_executor(config.executor, config.ray_address)
    return config, bench, tasks


def run_experiment(config: RunConfig, *, progress: bool = True) -> Path:
    """Start a new run; returns its directory (for a database store: its local errors.log folder)."""
    return start_run(config, progress=progress).run_dir


def start_run(config: RunConfig, *, progress: bool = True) -> RunRef:
    """Start a new run in its store (`config.store`: a directory of runs by default, or a database)."""
    from reinagent.preflight import check_model_flags
    from reinagent.stores import is_directory

    check_model_flags(preflight_settings(config))  # a new run only: a resumed one keeps what its spec recorded
    config, bench, tasks = _prepare(config)
    if config.store is not None and not is_directory(config.store):
        return _start_in_database(config, bench, tasks, progress)
    default = default_run_dir(config)
    run_dir = Path(config.run_dir) if config.run_dir else (
        Path(config.store.removeprefix("file://")) / default.name if config.store else default)
    check_new_run_dir(run_dir)  # an existing run is resumed, not restarted: say so before any work
    config = config.model_copy(update={"run_dir": str(run_dir)})
    preflight(config)  # endpoints, extras: seconds and one line instead of a run of errors
    spec = make_spec(config, tasks, bench.settings())
    models = build_models(config, cache_key_of(spec))  # cheap (models load on first use)
    made_dir = not run_dir.exists()
    store = RunStore.create(run_dir, spec)
    print(f"run directory: {run_dir}\nrun id: {run_dir.name}", file=sys.stderr, flush=True)
    try:
        _start(config, bench, tasks, store, models, [], progress, where=(str(run_dir), None))
    except ConfigError:  # it never started (a model that failed to load, a cluster not joined)
        if store.discard_unstarted(made_dir):
            print(f"removed {run_dir}: the run never started", file=sys.stderr, flush=True)
        raise
    return RunRef(config.store, run_dir.name, run_dir)


def _start_in_database(config: RunConfig, bench: Benchmark, tasks: list[Task], progress: bool) -> RunRef:
    from reinagent.stores import new_run_id, open_store

    db = open_store(config.store)  # connect first: an unreachable database is one line, in seconds
    try:
        run_id = new_run_id(config.benchmark, config.agent, config.strategy.value)
        log_dir = Path(config.run_dir) if config.run_dir else Path("runs") / run_id
        config = config.model_copy(update={"store": db.url, "run_dir": str(log_dir)})  # no password kept
        preflight(config)
        spec = make_spec(config, tasks, bench.settings())
        models = build_models(config, cache_key_of(spec))
        writer = db.create_run(run_id, spec, log_dir)
        print(f"run id: {run_id} (store {db.url}; tracebacks, if any: {log_dir}/errors.log)", file=sys.stderr, flush=True)
        _start(config, bench, tasks, writer, models, [], progress, where=(run_id, db.url))
    finally:
        db.close()
    return RunRef(db.url, run_id, log_dir)


def resume_experiment(
    run_dir: str | Path, *, retry_errors: bool = False, num_trials: int | None = None,
    from_trial: int | None = None, progress: bool = True, overrides: dict | None = None,
    store: str | None = None,
) -> Path:
    """Continue a run from its records, holding its lock throughout. `num_trials` extends it,
    `retry_errors` redoes errored (task, trial)s (and the later trials of their tasks), `from_trial`
    redoes everything from that trial on (the paper script's start_trial_num); `overrides` move
    the run to another endpoint or model (--base-url, --model, ...; resuming.OVERRIDABLE) and are
    recorded in the spec's history; see resuming.py. With `store` (a URL), `run_dir` is the run's id
    in that store."""
    from reinagent.resuming import plan_resume, recorded_settings, with_change
    from reinagent.stores import is_directory, open_store

    db = None
    if store is not None and not is_directory(store):
        db = open_store(store, create=False)
        try:
            log_dir = Path("runs") / str(run_dir)
            writer, spec, records = db.open_run(str(run_dir), log_dir)  # the run's lock, or one line
        except BaseException:
            db.close()
            raise
    else:
        path = Path(store.removeprefix("file://")) / str(run_dir) if store else Path(run_dir)
        writer, spec, records = RunStore.open(path)  # takes the run lock, or exits: one writer
        log_dir = path
    try:
        plan = plan_resume(spec, records, num_trials=num_trials, from_trial=from_trial,
                           retry_errors=retry_errors, overrides=overrides)
        config = RunConfig(**{**spec.config, **recorded_settings(spec, plan), **plan.settings, "num_trials": plan.num_trials})
        config, bench, _ = _prepare(config)
        preflight(config, resuming=True)
        by_id = {t.task_id: t for t in bench.load_tasks(config.split)}
        missing = [tid for tid in spec.task_ids if tid not in by_id]
        if missing:
            raise RunDirError(f"{run_dir}: tasks {missing[:3]} are no longer in split {config.split!r}")
        tasks = [by_id[tid] for tid in spec.task_ids]
        models = build_models(config, cache_key_of(spec))
        # Durable before any model call, in this order: a kill after either step resumes right.
        changed = with_change(spec, plan)
        if changed != spec:  # a history entry, or the endpoints sealed anew
            writer.update_spec(changed)
        if plan.notice:
            print(plan.notice, file=sys.stderr, flush=True)
        if plan.stale:
            writer.supersede(sorted(plan.stale), plan.reason)
            records = [r for r in records if (r.task_id, r.trial) not in plan.stale]
        print(f"resuming {run_dir}: {len(records)} finished (task, trial) records", file=sys.stderr)
        _start(config, bench, tasks, writer, models, records, progress,
               where=(str(run_dir), store) if db is not None else (str(log_dir), None))
    except BaseException:
        writer.close()  # never leave the run locked (closing twice is harmless)
        raise
    finally:
        if db is not None:
            db.close()
    return log_dir


def load_run(run_dir: str | Path, *, store: str | None = None) -> tuple[RunSpec, list[TrialRecord]]:
    """Spec and live records of a run, one per (task, trial) (for reports and notebooks). With
    `store` (a URL), `run_dir` is the run's id in that store."""
    from reinagent.store import read_spec

    if store is not None:
        from reinagent.stores import open_store

        with open_store(store, create=False) as db:
            return db.read_spec(str(run_dir)), list(latest_records(db.read_records(str(run_dir))).values())
    spec = read_spec(Path(run_dir))
    return spec, list(latest_records(read_records(Path(run_dir))).values())
