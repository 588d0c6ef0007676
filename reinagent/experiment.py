"""Building an experiment from its plan (reinagent/plan.py): the models, the agent and the
Reflector, and the spec a new run records. runner.py starts and resumes runs with it,
schedule.py runs their trials."""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reinagent.agents.base import Activity, Agent
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.config import RunConfig
from reinagent.llm.base import LLM
from reinagent.plan import Plan, resolve
from reinagent.records import RunSpec, TrialRecord
from reinagent.redact import redact_argv, redact_url
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


def make_spec(plan: Plan, settings: dict | None = None) -> RunSpec:
    """What a new run records in spec.json: its settings (no password), its tasks, where it ran."""
    from reinagent import __version__
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
        # what --constrained (None: the default) came to; a resume keeps it (resuming.recorded_settings)
        # deterministic: the local engine decoded one sequence at a time (greedy text independent
        # of batching); sampling_seeds: every sampled call was sent its own seed (llm.base.call_seed)
        settings={**{k: redact_url(v) if isinstance(v, str) and "://" in v else v for k, v in (settings or {}).items()},
                  "constrained": plan.constrained,
                  "deterministic": config.deterministic, "sampling_seeds": "per-call",
                  **({SEAL_FIELD: sealed} if sealed else {})},
    )


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


def cache_key_of(spec: RunSpec) -> str:
    from reinagent.llm.cache import run_cache_key

    return run_cache_key(spec.created_at, spec.hostname)


