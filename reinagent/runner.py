"""The trial loop: run every unsolved task of a trial concurrently, reflect on failures, record.

The run directory is the single source of truth. Memory, progress and results are rebuilt from
its records, so `resume` continues exactly where a killed run stopped and never repeats a model
call for a finished (task, trial).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from reinagent import benchmarks
from reinagent.agents.base import Actor, Agent
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.config import RunConfig
from reinagent.env import aclose
from reinagent.errors import ConfigError, InfrastructureError, ModelError, RunDirError, SandboxError, choices
from reinagent.llm.base import LLM
from reinagent.memory import EpisodicMemory, MemoryView, rebuild_memory
from reinagent.records import RunSpec, TrialRecord, Trajectory, Usage
from reinagent.reflector import Reflector
from reinagent.redact import redact
from reinagent.store import RunStore, check_new_run_dir, read_records

log = logging.getLogger("reinagent")


@dataclass
class Experiment:
    """Everything a running experiment holds."""

    config: RunConfig
    benchmark: Benchmark
    agent: Agent
    tasks: list[Task]
    actor_llm: LLM
    reflector: Reflector
    store: RunStore
    llms: list[LLM] = field(default_factory=list)
    warmed: bool = False  # local models loaded (preflight.warm_up)


def resolve(config: RunConfig) -> tuple[Benchmark, RunConfig]:
    """Validate names against the registry and fill the benchmark's defaults into the config."""
    bench = benchmarks.make(config.benchmark)
    agent = config.agent or bench.default_agent
    if agent not in bench.agents:
        raise ConfigError(f"unknown agent {agent!r} for {bench.name}; valid: {choices(bench.agents)}")
    split = config.split or bench.default_split
    if split not in bench.splits:
        raise ConfigError(f"unknown split {split!r} for {bench.name}; valid: {choices(bench.splits)}")
    config = config.model_copy(update={"benchmark": bench.name, "agent": agent, "split": split})
    bench.check_config(config)
    if config.env_url:  # environments on an env server (`reinagent serve-env`); tasks and scoring stay here
        from reinagent.service.served import served

        bench = served(bench, config)
    return bench, config


def select_tasks(bench: Benchmark, config: RunConfig) -> list[Task]:
    tasks = bench.load_tasks(config.split)
    if config.num_envs is not None:
        tasks = tasks[: config.num_envs]
    return tasks


def default_run_dir(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{config.benchmark}-{config.agent}-{config.strategy.value}-{stamp}"


def make_spec(config: RunConfig, tasks: list[Task], settings: dict | None = None) -> RunSpec:
    from reinagent import __version__
    from reinagent.provenance import git_commit, package_versions, python_version

    cfg = config.model_dump(mode="json")
    if cfg.get("base_url"):
        cfg["base_url"] = redact(cfg["base_url"])
    return RunSpec(
        config=cfg,
        task_ids=[t.task_id for t in tasks],
        created_at=time.time(),
        reinagent_version=__version__,
        python_version=python_version(),
        packages=package_versions(),
        git_commit=git_commit(),
        hostname=socket.gethostname(),
        command=[redact(a) for a in sys.argv],
        settings=settings or {},
    )


def build_models(config: RunConfig, run_key: str | None = None) -> tuple[LLM, LLM, list[LLM]]:
    """Actor and reflector models; one shared instance when both roles name the same model.
    `run_key` (from the run's spec) scopes the response cache to the run (--cache-scope run)."""
    from reinagent.llm.stack import build_llm

    actor = build_llm(config.actor_model, config, role="actor", run_key=run_key)
    if config.reflection_model == config.actor_model:
        return actor, actor, [actor]
    reflector = build_llm(config.reflection_model, config, role="reflector", run_key=run_key)
    return actor, reflector, [actor, reflector]


def latest_records(records: list[TrialRecord]) -> dict[tuple[str, int], TrialRecord]:
    """One record per (task, trial): a later record (a retried error) supersedes an earlier one.
    (`read_records` already gives one per (task, trial), with supersede markers applied.)"""
    return {(r.task_id, r.trial): r for r in records}


async def run_trials(exp: Experiment, records: list[TrialRecord], *, progress: bool = True) -> None:
    """Run trials 1..num_trials, skipping every (task, trial) the records already hold."""
    cfg = exp.config
    from reinagent.resuming import missing_reflections, write_missing_reflections

    done = latest_records(records)
    limit = asyncio.Semaphore(cfg.max_concurrency or exp.actor_llm.default_concurrency)
    # A run extended with `resume --num-trials`: its old last trial skipped reflecting; do it first.
    await _warm_up_if(exp, missing_reflections(done, cfg.num_trials, cfg.strategy.uses_reflections))
    await write_missing_reflections(exp, done, limit)
    # An errored (task, trial) was never judged: nothing of it enters memory.
    memories = rebuild_memory((r for r in done.values() if r.error is None), cfg.memory_size)
    solved = {tid for (tid, _), r in done.items() if r.success}
    for trial in range(1, cfg.num_trials + 1):
        pending = [
            t for t in exp.tasks
            if (t.task_id, trial) not in done and not _solved_before(done, t.task_id, trial)
        ]
        await _warm_up_if(exp, pending)
        started = time.perf_counter()
        results = await _run_trial(exp, trial, pending, memories, done, limit, progress)
        for rec in results:
            done[(rec.task_id, rec.trial)] = rec
            memories.setdefault(rec.task_id, EpisodicMemory(window=cfg.memory_size)).add(
                None if rec.error else rec.reflection)
            if rec.success:
                solved.add(rec.task_id)
        _print_summary(exp, trial, done, time.perf_counter() - started, results)
        if results and all(r.error is not None for r in results) and trial < cfg.num_trials:
            # Every episode of this trial failed (a dead server, a broken sandbox): later trials
            # would fail the same way and only bury the cause. Resume once it is fixed.
            from reinagent.outcome import Outcome

            kinds = ", ".join(f"{k} x{n}" for k, n in Outcome.of(results).kinds.most_common())
            print(f"trial {trial}: every episode ended in an error ({kinds}); not starting trial "
                  f"{trial + 1}. Fix the cause, then: reinagent resume {exp.store.run_dir} --retry-errors",
                  file=sys.stderr, flush=True)
            break


async def _warm_up_if(exp: Experiment, work: list) -> None:
    """Load a local model, on its own lines, before the first progress bar that needs it (never
    for a resume with nothing left to do)."""
    if work and not exp.warmed:
        from reinagent.preflight import warm_up

        await warm_up(exp.llms)
        exp.warmed = True


def _solved_before(done: dict[tuple[str, int], TrialRecord], task_id: str, trial: int) -> bool:
    return any(done.get((task_id, t)) and done[(task_id, t)].success for t in range(1, trial))


async def _run_trial(exp, trial, pending, memories, done, limit, progress) -> list[TrialRecord]:
    if not pending:
        return []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(pending), desc=f"trial {trial}", unit="task", file=sys.stderr, leave=False)

    async def one(task: Task) -> TrialRecord:
        async with limit:
            memory = memories.get(task.task_id) or EpisodicMemory(window=exp.config.memory_size)
            rec = await run_episode(exp, task, trial, memory, done.get((task.task_id, trial - 1)))
        await exp.store.append_async(rec)  # durable before the trial counts it done
        if bar is not None:
            bar.update(1)
        return rec

    try:
        return list(await asyncio.gather(*(one(t) for t in pending)))
    finally:
        if bar is not None:
            bar.close()


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
    actor = Actor(exp.actor_llm, Trajectory(), rollout)
    try:
        env = exp.benchmark.make_env(task, cfg)
        try:
            trajectory = await exp.agent.run(task, env, view, actor)
        finally:
            await aclose(env)
        record.trajectory = trajectory
        evaluation = await exp.benchmark.evaluate(task, trajectory, cfg)
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
    with open(run_dir / "errors.log", "a", encoding="utf-8") as fh:
        fh.write(f"--- {task_id} trial {trial} at {time.ctime()}\n{text}\n")


def _print_summary(exp: Experiment, trial: int, done, wall_s: float, this: list[TrialRecord]) -> None:
    """One line per trial about what this invocation attempted (a resume counts only its own)."""
    n = len(exp.tasks)
    attempted = len(this)
    solved_now = sum(r.success for r in this)
    solved_cum = len({tid for (tid, t), r in done.items() if t <= trial and r.success})
    errors = sum(r.error is not None for r in this)
    usage = Usage()
    for r in this:
        for call in r.calls:
            usage.add(call)
    print(
        f"trial {trial}/{exp.config.num_trials}: attempted {attempted}, solved {solved_now}, "
        f"cumulative {solved_cum}/{n} ({100 * solved_cum / max(n, 1):.1f}%), errors {errors}, "
        f"calls {usage.calls} (cache hits {usage.cache_hits}), "
        f"tokens {usage.prompt_tokens}+{usage.completion_tokens}, {wall_s:.1f}s",
        file=sys.stderr,
        flush=True,
    )


async def _execute(exp: Experiment, records: list[TrialRecord], progress: bool) -> Path:
    try:
        await run_trials(exp, records, progress=progress)
    finally:
        try:
            for llm in exp.llms:
                await llm.aclose()
            if hasattr(exp.benchmark, "aclose"):  # an env server's pooled connections live on this loop
                await exp.benchmark.aclose()
            exp.benchmark.close()
        finally:
            exp.store.close()  # drops the run lock
    return exp.store.run_dir


def _experiment(config: RunConfig, bench: Benchmark, tasks: list[Task], store: RunStore,
                models: tuple[LLM, LLM, list[LLM]]) -> Experiment:
    actor, reflector_llm, llms = models
    reflector = Reflector(reflector_llm, bench.reflection_examples)
    agent = bench.make_agent(config.agent, config)
    return Experiment(config, bench, agent, tasks, actor, reflector, store, llms)


def _start(config, bench, tasks, store: RunStore, models, records, progress: bool) -> Path:
    try:
        exp = _experiment(config, bench, tasks, store, models)
    except BaseException:
        store.close()  # never leave the run locked by a half-built experiment
        raise
    return run_sync(_execute(exp, records, progress))


def cache_key_of(spec: RunSpec) -> str:
    from reinagent.llm.cache import run_cache_key

    return run_cache_key(spec.created_at, spec.hostname)


def preflight(config: RunConfig, *, resuming: bool = False) -> None:
    from reinagent.preflight import preflight as check

    check(config, resuming=resuming)


def prepare(config: RunConfig) -> tuple[RunConfig, Benchmark, list[Task]]:
    """Everything that can fail on bad input, checked before any directory or model is made."""
    from reinagent.llm import backend_of, check_credentials
    from reinagent.preflight import check_extras

    check_extras(config)  # a missing extra (alfworld) is named before the benchmark imports it
    bench, config = resolve(config)
    for model in {config.actor_model, config.reflection_model}:
        backend_of(model, config.base_url)
        check_credentials(model, config.base_url, config.api_key_env)
    return config, bench, select_tasks(bench, config)


def run_sync(coro):
    """asyncio.run, also from inside a running event loop (Jupyter): then in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def run_experiment(config: RunConfig, *, progress: bool = True) -> Path:
    """Start a new run; returns its directory."""
    config, bench, tasks = prepare(config)
    run_dir = Path(config.run_dir) if config.run_dir else default_run_dir(config)
    check_new_run_dir(run_dir)  # an existing run is resumed, not restarted: say so before any work
    config = config.model_copy(update={"run_dir": str(run_dir)})
    preflight(config)  # endpoints, extras: seconds and one line instead of a run of errors
    spec = make_spec(config, tasks, bench.settings())
    models = build_models(config, cache_key_of(spec))  # cheap (models load on first use)
    store = RunStore.create(run_dir, spec)
    print(f"run directory: {run_dir}", file=sys.stderr, flush=True)
    return _start(config, bench, tasks, store, models, [], progress)


def resume_experiment(
    run_dir: str | Path, *, retry_errors: bool = False, num_trials: int | None = None,
    from_trial: int | None = None, progress: bool = True, overrides: dict | None = None,
) -> Path:
    """Continue a run from its records, holding its lock throughout. `num_trials` extends it,
    `retry_errors` redoes errored (task, trial)s (and the later trials of their tasks), `from_trial`
    redoes everything from that trial on (the paper script's start_trial_num); `overrides` move
    the run to another endpoint or model (--base-url, --model, ...; resuming.OVERRIDABLE) and are
    recorded in the spec's history; see resuming.py."""
    from reinagent.resuming import plan_resume, with_change

    store, spec, records = RunStore.open(Path(run_dir))  # takes the run lock, or exits: one writer
    try:
        plan = plan_resume(spec, records, num_trials=num_trials, from_trial=from_trial,
                           retry_errors=retry_errors, overrides=overrides)
        config = RunConfig(**{**spec.config, **plan.settings, "num_trials": plan.num_trials})
        config, bench, _ = prepare(config)
        preflight(config, resuming=True)
        by_id = {t.task_id: t for t in bench.load_tasks(config.split)}
        missing = [tid for tid in spec.task_ids if tid not in by_id]
        if missing:
            raise RunDirError(f"{run_dir}: tasks {missing[:3]} are no longer in split {config.split!r}")
        tasks = [by_id[tid] for tid in spec.task_ids]
        models = build_models(config, cache_key_of(spec))
        # Durable before any model call, in this order: a kill after either step resumes right.
        if plan.changes:
            store.update_spec(with_change(spec, plan))
        if plan.stale:
            store.supersede(sorted(plan.stale), plan.reason)
            records = [r for r in records if (r.task_id, r.trial) not in plan.stale]
    except BaseException:
        store.close()
        raise
    print(f"resuming {run_dir}: {len(records)} finished (task, trial) records", file=sys.stderr)
    return _start(config, bench, tasks, store, models, records, progress)


def load_run(run_dir: str | Path) -> tuple[RunSpec, list[TrialRecord]]:
    """Spec and live records of a run, one per (task, trial) (for reports and notebooks)."""
    from reinagent.store import read_spec

    spec = read_spec(Path(run_dir))
    return spec, list(latest_records(read_records(Path(run_dir))).values())
