"""Building an experiment from its plan (reinagent/plan.py): the models, the agent and the
Reflector. runner.py starts and resumes runs with it,
schedule.py runs their trials."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reinagent.agents.base import Activity, Agent
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.config import RunConfig
from reinagent.llm.base import LLM
from reinagent.plan import Plan, resolve
from reinagent.records import RunSpec, TrialRecord
from reinagent.reflector import Reflector

if TYPE_CHECKING:
    from reinagent.store import RunStore


@dataclass
class Experiment:
    """Everything a running experiment holds."""

    plan: Plan
    agent: Agent
    actor_llm: LLM
    reflector: Reflector
    store: RunStore
    llms: list[LLM] = field(default_factory=list)
    warmed: bool = False  # local models loaded (preflight.warm_up)
    activity: Activity = field(default_factory=Activity)  # calls and nodes of episodes in flight (progress)

    @property
    def config(self) -> RunConfig:  # the run layer's view: every setting as the run uses it
        return self.plan.config

    @property
    def benchmark(self) -> Benchmark:
        return self.plan.benchmark

    @property
    def tasks(self) -> list[Task]:
        return list(self.plan.tasks)


def build(plan: Plan, store: RunStore, run_key: str | None = None, adapt_models=None,
          models: tuple[LLM, LLM, list[LLM]] | None = None) -> Experiment:
    """The experiment of a resolved plan: models (cheap: they load on first use), the agent and the
    Reflector. `run_key` (from the run's spec) scopes the response cache to the run (--cache-scope
    run); `adapt_models` may replace the models built (on a Ray worker: the embedded model's actor);
    `models` are used instead of building them (a test's own)."""
    actor, reflector_llm, llms = models or build_models(plan, run_key)
    if adapt_models is not None:
        actor, reflector_llm, llms = adapt_models((actor, reflector_llm, llms))
    config, bench = plan.config, plan.benchmark
    examples = (config.reflection_prompt == "plan" and bench.plan_examples) or bench.reflection_examples_for(config.agent)
    reflector = Reflector(reflector_llm, examples, style=config.reflection_prompt, max_tokens=config.reflection_max_tokens)
    return Experiment(plan, bench.make_agent(config.agent, plan.agent_settings), actor, reflector, store, llms)


def build_models(plan: Plan, run_key: str | None = None) -> tuple[LLM, LLM, list[LLM]]:
    """Actor and reflector models; one shared instance when both roles name the same model."""
    from reinagent.llm.stack import build_llm

    config = plan.config
    actor = build_llm(config.actor_model, plan.models, role="actor", run_key=run_key, grammar=plan.grammar)
    # A constrained actor (reinagent.llm.constrained) must not hold the reflector to its grammar:
    # the reflector then gets its own stack (a local engine is still loaded once and shared).
    if config.reflection_model == config.actor_model and "ConstrainedLLM" not in _layers(actor):
        return actor, actor, [actor]
    reflector = build_llm(config.reflection_model, plan.models, role="reflector", run_key=run_key)
    return actor, reflector, [actor, reflector]


def _layers(llm: LLM) -> list[str]:
    names = []
    while llm is not None and len(names) < 8:
        names.append(type(llm).__name__)
        llm = llm.__dict__.get("inner")
    return names


def rebuild(config_json: str, run_key: str | None, store, adapt_models=None) -> Experiment:
    """The run's experiment built again in another process (a Ray worker) from its settings as
    JSON. Handed to the executors (executors.EpisodeParts), which never import this module."""
    import json

    return build(resolve(RunConfig(**json.loads(config_json)), task_ids=(), new_run=False), store, run_key, adapt_models)


def latest_records(records: list[TrialRecord]) -> dict[tuple[str, int], TrialRecord]:
    """One record per (task, trial): a later record (a retried error) supersedes an earlier one.
    (`read_records` already gives one per (task, trial), with supersede markers applied.)"""
    return {(r.task_id, r.trial): r for r in records}


def cache_key_of(spec: RunSpec) -> str:
    from reinagent.llm.cache import run_cache_key

    return run_cache_key(spec.created_at, spec.hostname)


