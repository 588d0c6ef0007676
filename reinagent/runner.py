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
from reinagent.errors import ConfigError, ModelError, RunDirError, choices
from reinagent.llm.base import LLM
from reinagent.memory import EpisodicMemory, MemoryView, rebuild_memory
from reinagent.records import RunSpec, TrialRecord, Trajectory, Usage
from reinagent.reflector import Reflector
from reinagent.redact import redact
from reinagent.store import RunStore, read_records

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


def build_models(config: RunConfig) -> tuple[LLM, LLM, list[LLM]]:
    """Actor and reflector models; one shared instance when both roles name the same model."""
    from reinagent.llm.stack import build_llm

    actor = build_llm(config.actor_model, config, role="actor")
    if config.reflection_model == config.actor_model:
        return actor, actor, [actor]
    reflector = build_llm(config.reflection_model, config, role="reflector")
    return actor, reflector, [actor, reflector]


def latest_records(records: list[TrialRecord]) -> dict[tuple[str, int], TrialRecord]:
    """One record per (task, trial): a later record (a retried error) supersedes an earlier one."""
    return {(r.task_id, r.trial): r for r in records}


async def run_trials(exp: Experiment, records: list[TrialRecord], *, progress: bool = True) -> None:
    """Run trials 1..num_trials, skipping every (task, trial) the records already hold."""
    cfg = exp.config
    done = latest_records(records)
    memories = rebuild_memory(done.values(), cfg.memory_size)
    solved = {tid for (tid, _), r in done.items() if r.success}
    limit = asyncio.Semaphore(cfg.max_concurrency or exp.actor_llm.default_concurrency)
    for trial in range(1, cfg.num_trials + 1):
        pending = [
            t for t in exp.tasks
            if (t.task_id, trial) not in done and not _solved_before(done, t.task_id, trial)
        ]
        started = time.perf_counter()
        results = await _run_trial(exp, trial, pending, memories, done, limit, progress)
        for rec in results:
            done[(rec.task_id, rec.trial)] = rec
            memories.setdefault(rec.task_id, EpisodicMemory(window=cfg.memory_size)).add(rec.reflection)
            if rec.success:
                solved.add(rec.task_id)
        _print_summary(exp, trial, done, time.perf_counter() - started, results)


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
    if previous is not None and cfg.strategy.uses_last_attempt:
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
    except ModelError as err:
        record.trajectory = record.trajectory if record.trajectory.steps else actor.trajectory
        record.error = redact(f"model error: {err}")
    except Exception as err:  # noqa: BLE001 - one broken episode must never kill the run
        record.trajectory = record.trajectory if record.trajectory.steps else actor.trajectory
        record.error = redact(f"{type(err).__name__}: {err}")
        _log_traceback(exp.store.run_dir, task.task_id, trial)
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
        for llm in exp.llms:
            await llm.aclose()
        exp.benchmark.close()
    return exp.store.run_dir


def _experiment(config: RunConfig, bench: Benchmark, tasks: list[Task], store: RunStore,
                models: tuple[LLM, LLM, list[LLM]]) -> Experiment:
    actor, reflector_llm, llms = models
    reflector = Reflector(reflector_llm, bench.reflection_examples)
    agent = bench.make_agent(config.agent, config)
    return Experiment(config, bench, agent, tasks, actor, reflector, store, llms)


def prepare(config: RunConfig) -> tuple[RunConfig, Benchmark, list[Task]]:
    """Everything that can fail on bad input, checked before any directory or model is made."""
    from reinagent.llm import backend_of, check_credentials

    bench, config = resolve(config)
    for model in {config.actor_model, config.reflection_model}:
        backend_of(model, config.base_url)
        check_credentials(model, config.base_url)
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
    config = config.model_copy(update={"run_dir": str(run_dir)})
    models = build_models(config)  # cheap (models load on first use) and fails on bad input
    store = RunStore.create(run_dir, make_spec(config, tasks, bench.settings()))
    print(f"run directory: {run_dir}", file=sys.stderr, flush=True)
    return run_sync(_execute(_experiment(config, bench, tasks, store, models), [], progress))


def resume_experiment(
    run_dir: str | Path, *, retry_errors: bool = False, num_trials: int | None = None,
    from_trial: int | None = None, progress: bool = True,
) -> Path:
    """Continue a run from its records. `retry_errors` redoes (task, trial)s that errored;
    `from_trial` redoes everything from that trial on (the paper script's start_trial_num)."""
    store, spec, records = RunStore.open(Path(run_dir))
    config = RunConfig(**spec.config)
    if num_trials is not None:
        config = config.model_copy(update={"num_trials": num_trials})
    config, bench, _ = prepare(config)
    by_id = {t.task_id: t for t in bench.load_tasks(config.split)}
    missing = [tid for tid in spec.task_ids if tid not in by_id]
    if missing:
        raise RunDirError(f"{run_dir}: tasks {missing[:3]} are no longer in split {config.split!r}")
    tasks = [by_id[tid] for tid in spec.task_ids]
    if retry_errors:
        records = [r for r in records if r.error is None]
    if from_trial is not None:
        records = [r for r in records if r.trial < from_trial]
    print(f"resuming {run_dir}: {len(records)} finished (task, trial) records", file=sys.stderr)
    models = build_models(config)
    return run_sync(_execute(_experiment(config, bench, tasks, store, models), records, progress))


def load_run(run_dir: str | Path) -> tuple[RunSpec, list[TrialRecord]]:
    """Spec and de-duplicated records of a run (for reports and notebooks)."""
    from reinagent.store import read_spec

    spec = read_spec(Path(run_dir))
    return spec, list(latest_records(read_records(Path(run_dir))).values())
