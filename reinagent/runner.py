"""Starting, resuming and loading runs: the life of a run around its trial loop.

The store (a run directory by default) is the single source of truth. Memory, progress and results
are rebuilt from its records, so `resume` continues exactly where a killed run stopped and never
repeats a model call for a finished (task, trial). plan.py resolves and builds a run from its config,
schedule.py runs its trials (through an executor, each (task, trial) in episode.py).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from reinagent.config import RunConfig
from reinagent.episode import run_episode  # noqa: F401 - re-exported: reinagent.runner.run_episode
from reinagent.errors import ConfigError, RunInterrupted
from reinagent.plan import Experiment, Plan, build, resolve
from reinagent.preflight import preflight
from reinagent.records import RunSpec, SpecChange, TrialRecord, latest_records
from reinagent.redact import redact_argv, redact_url
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


def _start(plan: Plan, store: RunStore, run_key: str, records, progress: bool, *,
           where: tuple[str, str | None]) -> Path:
    """Build the experiment and run its trials; `where` names the run for `reinagent resume` (its
    directory, or its id and database URL) should Ctrl-C stop it."""
    try:
        exp = build(plan, store, run_key)
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


def make_spec(plan: Plan, settings: dict | None = None) -> RunSpec:
    """What a new run records in spec.json: its settings (no password), its tasks, where it ran."""
    from reinagent import __version__
    from reinagent.llm import model_files
    from reinagent.provenance import git_commit, package_versions, python_version
    from reinagent.seal import SEAL_FIELD, seal

    config = plan.config
    cfg = config.model_dump(mode="json")
    for url in ("base_url", "store", "env_url"):  # a resume is given the store again; a password never lands here
        if cfg.get(url):
            cfg[url] = redact_url(cfg[url])
    sealed = seal(cfg)  # this user chose these endpoints here: a resume may use them (reinagent/seal.py)
    return RunSpec(
        config=cfg,
        task_ids=[t.task_id for t in plan.tasks],
        created_at=time.time(),
        reinagent_version=__version__,
        python_version=python_version(),
        packages=package_versions(),
        git_commit=git_commit(),
        hostname=socket.gethostname(),
        command=redact_argv(sys.argv),
        model_files=model_files(plan.file_models) if plan.file_models else {},
        # what --constrained (None: the default) came to; a resume keeps it (resuming.recorded_settings)
        # deterministic: the local engine decoded one sequence at a time (greedy text independent
        # of batching); sampling_seeds: every sampled call was sent its own seed (llm.base.call_seed)
        settings={**{k: redact_url(v) if isinstance(v, str) and "://" in v else v for k, v in (settings or {}).items()},
                  "constrained": plan.constrained,
                  "deterministic": config.deterministic, "sampling_seeds": "per-call",
                  # config holds what the run used, a part's own defaults included (plan.apply_part_defaults)
                  "defaults_recorded": True,
                  # --local-engine auto: the engine chosen, why, and the measured tok/s (config: the engine)
                  **({"local_engine_choice": plan.engine_choice} if plan.engine_choice else {}),
                  **({SEAL_FIELD: sealed} if sealed else {})},
    )


def default_run_dir(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{config.benchmark}-{config.agent}-{config.strategy.value}-{stamp}"


def run_experiment(config: RunConfig, *, progress: bool = True) -> Path:
    """Start a new run; returns its directory (for a database store: its local errors.log folder)."""
    return start_run(config, progress=progress).run_dir


def start_run(config: RunConfig, *, progress: bool = True) -> RunRef:
    """Start a new run in its store (`config.store`: a directory of runs by default, or a database)."""
    from reinagent.stores import is_directory

    plan = resolve(config)
    config = plan.config
    if config.store is not None and not is_directory(config.store):
        return _start_in_database(plan, progress)
    default = default_run_dir(config)
    run_dir = Path(config.run_dir) if config.run_dir else (
        Path(config.store.removeprefix("file://")) / default.name if config.store else default)
    check_new_run_dir(run_dir)  # an existing run is resumed, not restarted: say so before any work
    plan = _with_config(plan, run_dir=str(run_dir))
    preflight(plan.checks)  # endpoints, a cluster: seconds and one line instead of a run of errors
    spec = make_spec(plan, plan.benchmark.settings())
    made_dir = not run_dir.exists()
    store = RunStore.create(run_dir, spec)
    print(f"run directory: {run_dir}\nrun id: {run_dir.name}", file=sys.stderr, flush=True)
    try:
        _start(plan, store, cache_key_of(spec), [], progress, where=(str(run_dir), None))
    except ConfigError:  # it never started (a model that failed to load, a cluster not joined)
        if store.discard_unstarted(made_dir):
            print(f"removed {run_dir}: the run never started", file=sys.stderr, flush=True)
        raise
    return RunRef(config.store, run_dir.name, run_dir)


def _with_config(plan: Plan, **update) -> Plan:
    """The plan with settings that name where the run lives (its directory, its store's URL)."""
    import dataclasses

    config = plan.config.model_copy(update=update)
    executor = dataclasses.replace(plan.executor, run_settings=config.model_dump_json())
    return dataclasses.replace(plan, config=config, executor=executor)


def _start_in_database(plan: Plan, progress: bool) -> RunRef:
    from reinagent.stores import new_run_id, open_store

    config = plan.config
    db = open_store(config.store)  # connect first: an unreachable database is one line, in seconds
    try:
        run_id = new_run_id(config.benchmark, config.agent, config.strategy.value)
        log_dir = Path(config.run_dir) if config.run_dir else Path("runs") / run_id
        plan = _with_config(plan, store=db.url, run_dir=str(log_dir))  # no password kept
        preflight(plan.checks)
        spec = make_spec(plan, plan.benchmark.settings())
        writer = db.create_run(run_id, spec, log_dir)
        print(f"run id: {run_id} (store {db.url}; tracebacks, if any: {log_dir}/errors.log)", file=sys.stderr, flush=True)
        _start(plan, writer, cache_key_of(spec), [], progress, where=(run_id, db.url))
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
        todo = plan_resume(spec, records, num_trials=num_trials, from_trial=from_trial,
                           retry_errors=retry_errors, overrides=overrides)
        config = RunConfig(**{**spec.config, **recorded_settings(spec, todo), **todo.settings, "num_trials": todo.num_trials})
        plan = resolve(config, task_ids=spec.task_ids, new_run=False)
        preflight(plan.checks, resuming=True)
        # Durable before any model call, in this order: a kill after either step resumes right.
        changed = _with_model_files(with_change(spec, todo), plan)
        if changed != spec:  # a history entry, or the endpoints sealed anew
            writer.update_spec(changed)
        if todo.notice:
            print(todo.notice, file=sys.stderr, flush=True)
        if todo.stale:
            writer.supersede(sorted(todo.stale), todo.reason)
            records = [r for r in records if (r.task_id, r.trial) not in todo.stale]
        print(f"resuming {run_dir}: {len(records)} finished (task, trial) records", file=sys.stderr)
        _start(plan, writer, cache_key_of(spec), records, progress,
               where=(str(run_dir), store) if db is not None else (str(log_dir), None))
    except BaseException:
        writer.close()  # never leave the run locked (closing twice is harmless)
        raise
    finally:
        if db is not None:
            db.close()
    return log_dir


def _with_model_files(spec: RunSpec, plan: Plan) -> RunSpec:
    """The spec with the files the resumed run's local models read now, and a history entry
    naming each one that is not the file the run recorded (a local:PATH file replaced since)."""
    from reinagent.llm import model_files

    now = model_files(plan.file_models) if plan.file_models else {}
    moved = {m: {"from": spec.model_files.get(m), "to": r} for m, r in now.items() if spec.model_files.get(m) != r}
    if not moved:
        return spec
    change = SpecChange(at=time.time(), command=redact_argv(sys.argv), changes={"model_files": moved})
    return spec.model_copy(update={"model_files": {**spec.model_files, **now}, "history": [*spec.history, change]})


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


def cache_key_of(spec: RunSpec) -> str:
    from reinagent.llm.cache import run_cache_key

    return run_cache_key(spec.created_at, spec.hostname)
