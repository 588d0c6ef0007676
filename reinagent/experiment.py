"""Assembling an experiment: names checked against the registries, tasks selected, models built,
provenance recorded. Everything here can fail on bad input and runs before any run directory or
model exists; runner.py starts and resumes runs with it, schedule.py runs their trials."""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reinagent import benchmarks
from reinagent.agents.base import Activity, Agent
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.config import RunConfig
from reinagent.errors import ConfigError, choices
from reinagent.llm.base import LLM
from reinagent.records import RunSpec, TrialRecord
from reinagent.redact import redact_argv, redact_url
from reinagent.reference import apply_preset
from reinagent.reflector import Reflector

if TYPE_CHECKING:
    from reinagent.llm.constrained import GrammarChoice
    from reinagent.llm.stack import ModelSettings
    from reinagent.preflight import PreflightSettings
    from reinagent.rollouts.base import RolloutSettings
    from reinagent.store import RunStore


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
    activity: Activity = field(default_factory=Activity)  # calls and nodes of episodes in flight (progress)


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
    # --preset paper: the reference's settings where no flag or YAML key set one (a resumed run's
    # config, rebuilt from spec.json, has every setting set: it keeps what its preset set then)
    config = apply_preset(config)
    config = config.model_copy(update={"evaluator": resolve_evaluator(bench, config.evaluator)})
    bench.check_config(config)
    if config.rollout == "multi-turn":  # only agents that can continue an episode retry inside it
        from reinagent.rollouts.multi_turn import check_agent

        check_agent(bench.name, agent)
    if config.rollout in ("tot", "mcts"):  # a search steps the agent: refuse one it cannot, up front
        from reinagent.rollouts.steps import check_searchable

        check_searchable(bench, agent, config, config.rollout)
    if config.env_url:  # environments on an env server (`reinagent serve-env`); tasks and scoring stay here
        from reinagent.service.served import served

        bench = served(bench, config)
    return bench, config


def resolve_evaluator(bench: Benchmark, evaluator: str | None) -> str | None:
    """`--evaluator` as the run uses it: the benchmark's default when none is given; refused for a
    benchmark whose own verdict is its only evaluator (no internal tests to choose)."""
    if bench.default_evaluator is None:
        if evaluator is not None:
            raise ConfigError(f"--evaluator is for benchmarks whose agent writes tests of its own (humaneval, "
                              f"mbpp); {bench.name} is judged by its own verdict only: leave --evaluator out")
        return None
    return evaluator or bench.default_evaluator


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
    from reinagent.llm.constrained import resolved_constrained
    from reinagent.provenance import git_commit, package_versions, python_version
    from reinagent.seal import SEAL_FIELD, seal

    cfg = config.model_dump(mode="json")
    for url in ("base_url", "store", "env_url"):  # a resume is given the store again; a password never lands here
        if cfg.get(url):
            cfg[url] = redact_url(cfg[url])
    sealed = seal(cfg)  # this user chose these endpoints here: a resume may use them (reinagent/seal.py)
    return RunSpec(
        config=cfg,
        task_ids=[t.task_id for t in tasks],
        created_at=time.time(),
        reinagent_version=__version__,
        python_version=python_version(),
        packages=package_versions(),
        git_commit=git_commit(),
        hostname=socket.gethostname(),
        command=redact_argv(sys.argv),
        # what --constrained (None: the default) came to; a resume keeps it (resuming.recorded_settings)
        # deterministic: the local engine decoded one sequence at a time (greedy text independent
        # of batching); sampling_seeds: every sampled call was sent its own seed (llm.base.call_seed)
        settings={**{k: redact_url(v) if isinstance(v, str) and "://" in v else v for k, v in (settings or {}).items()},
                  "constrained": resolved_constrained(grammar_choice(config), config.actor_model, config.base_url, config.precision),
                  "deterministic": config.deterministic, "sampling_seeds": "per-call",
                  **({SEAL_FIELD: sealed} if sealed else {})},
    )


def build_models(config: RunConfig, run_key: str | None = None) -> tuple[LLM, LLM, list[LLM]]:
    """Actor and reflector models; one shared instance when both roles name the same model.
    `run_key` (from the run's spec) scopes the response cache to the run (--cache-scope run)."""
    from reinagent.llm.stack import build_llm

    settings = model_settings(config)
    actor = build_llm(config.actor_model, settings, role="actor", run_key=run_key, grammar=grammar_choice(config))
    # A constrained actor (reinagent.llm.constrained) must not hold the reflector to its grammar:
    # the reflector then gets its own stack (a local engine is still loaded once and shared).
    if config.reflection_model == config.actor_model and "ConstrainedLLM" not in _layers(actor):
        return actor, actor, [actor]
    reflector = build_llm(config.reflection_model, settings, role="reflector", run_key=run_key)
    return actor, reflector, [actor, reflector]


def model_settings(config: RunConfig) -> ModelSettings:
    """What the model stack (llm/stack.py) reads of the run's settings."""
    from reinagent.llm.stack import ModelSettings

    return _picked(ModelSettings, config)


def _picked(settings_class, config: RunConfig):
    """`settings_class` (a dataclass whose fields are RunConfig names) filled from the run's config."""
    import dataclasses

    return settings_class(**{f.name: getattr(config, f.name) for f in dataclasses.fields(settings_class)})


def grammar_choice(config: RunConfig) -> GrammarChoice:
    """The actor's grammar for the run's benchmark, agent and rollout, resolved here so that llm/
    knows no benchmark (llm.constrained is handed it)."""
    from reinagent.llm.constrained import GrammarChoice, grammar_of

    agent, grammar = config.agent, None
    if config.constrained is not False:  # (a run's agent is resolved already: resolve())
        agent = agent or benchmarks.make(config.benchmark).default_agent
        grammar = grammar_of(config.benchmark, agent, config.rollout)
    return GrammarChoice(config.constrained, grammar, f"{config.benchmark} {agent} with rollout {config.rollout}")


def _layers(llm: LLM) -> list[str]:
    names = []
    while llm is not None and len(names) < 8:
        names.append(type(llm).__name__)
        llm = llm.__dict__.get("inner")
    return names


def latest_records(records: list[TrialRecord]) -> dict[tuple[str, int], TrialRecord]:
    """One record per (task, trial): a later record (a retried error) supersedes an earlier one.
    (`read_records` already gives one per (task, trial), with supersede markers applied.)"""
    return {(r.task_id, r.trial): r for r in records}


async def warm_up_if(exp: Experiment, work: list) -> None:
    """Load a local model, on its own lines, before the first progress bar that needs it (never
    for a resume with nothing left to do)."""
    if work and not exp.warmed:
        from reinagent.preflight import warm_up

        await warm_up(exp.llms)
        exp.warmed = True


def make_experiment(config: RunConfig, bench: Benchmark, tasks: list[Task], store: RunStore,
                models: tuple[LLM, LLM, list[LLM]]) -> Experiment:
    actor, reflector_llm, llms = models
    plan = config.reflection_prompt == "plan"
    reflector = Reflector(reflector_llm, (plan and bench.plan_examples) or bench.reflection_examples_for(config.agent),
                          style=config.reflection_prompt, max_tokens=config.reflection_max_tokens)
    agent = bench.make_agent(config.agent, config)
    return Experiment(config, bench, agent, tasks, actor, reflector, store, llms)


def rebuild(config_json: str, run_key: str | None, store, adapt_models=None) -> Experiment:
    """The run's experiment built again in another process (a Ray worker) from its settings as
    JSON; `adapt_models` may replace the models built (an embedded model: its Ray actor). Handed to
    the executors (executors.EpisodeParts), which never import this module."""
    import json

    bench, config = resolve(RunConfig(**json.loads(config_json)))
    models = build_models(config, run_key)
    if adapt_models is not None:
        models = adapt_models(models)
    return make_experiment(config, bench, [], store, models)


def cache_key_of(spec: RunSpec) -> str:
    from reinagent.llm.cache import run_cache_key

    return run_cache_key(spec.created_at, spec.hostname)


def preflight(config: RunConfig, *, resuming: bool = False) -> None:
    from reinagent.preflight import preflight as check

    check(preflight_settings(config), resuming=resuming)


def rollout_settings(config: RunConfig) -> RolloutSettings:
    """What a rollout (rollouts/) reads of the run's settings."""
    from reinagent.rollouts.base import RolloutSettings

    return _picked(RolloutSettings, config)


def preflight_settings(config: RunConfig) -> PreflightSettings:
    """What the checks before the first episode (preflight.py) read of the run's settings."""
    from reinagent.preflight import PreflightSettings

    return _picked(PreflightSettings, config)


def prepare(config: RunConfig) -> tuple[RunConfig, Benchmark, list[Task]]:
    """Everything that can fail on bad input, checked before any directory or model is made."""
    from reinagent.llm import backend_of, check_credentials
    from reinagent.preflight import check_extras

    check_extras(preflight_settings(config))  # a missing extra (alfworld) is named before the benchmark imports it
    bench, config = resolve(config)
    for model in {config.actor_model, config.reflection_model}:
        backend_of(model, config.base_url)
        check_credentials(model, config.base_url, config.api_key_env)
    return config, bench, select_tasks(bench, config)
