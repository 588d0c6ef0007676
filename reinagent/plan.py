"""Resolving a run, once, and building it: its raw settings (flags > YAML > `--preset` > defaults,
a `RunConfig`) become a frozen, typed `Plan` that everything after reads, and the plan becomes the
`Experiment` that runs. The route of a run:

    resolve(config) -> plan      here: names, preset, Evaluator, tasks, models, each part's settings
    preflight(plan.checks)       preflight.py: what needs something running (model servers, a Ray cluster)
    build(plan) -> experiment    here: models, agent, Reflector
    run                          runner.py / schedule.py: the trials

Every check that needs nothing running happens in `resolve`, and every problem it finds is
reported at once, one line each (a ConfigError; a single problem keeps its own error class). The
parts below are handed their own records from here (reinagent/settings.py, llm/stack.py's
ModelSettings, preflight.py's PreflightSettings, the executor's ExecutorSettings): none of them
reads the RunConfig.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reinagent import benchmarks
from reinagent.agents.base import Activity, Agent
from reinagent.config import RunConfig
from reinagent.errors import ConfigError, MissingExtra, RunDirError, choices, collect, raise_all, require_extra
from reinagent.executors import ExecutorSettings
from reinagent.llm.base import LLM
from reinagent.llm.stack import ModelSettings
from reinagent.preflight import PreflightSettings
from reinagent.reference import BENCHMARKS as PRESET_BENCHMARKS
from reinagent.reference import references
from reinagent.reflector import Reflector
from reinagent.settings import AgentSettings, BenchmarkSettings, RolloutSettings

if TYPE_CHECKING:
    from reinagent.benchmarks.base import Benchmark, Task
    from reinagent.store import RunStore


@dataclass(frozen=True)
class Plan:
    """A run, resolved: what each part is handed, and the settings spec.json records."""

    config: RunConfig  # every setting as the run uses it (recorded in spec.json; the trial loop reads it)
    benchmark: Benchmark  # wrapped for an env server under --env-url
    tasks: tuple[Task, ...]
    task_settings: BenchmarkSettings  # the benchmark's environments and judge
    agent_settings: AgentSettings
    rollout: RolloutSettings
    models: ModelSettings  # the model stack's
    grammar: str | None  # the actor's action grammar (llm.constrained.choose_grammar), for the model stack
    checks: PreflightSettings | None  # what preflight.preflight asks of running things; None: nothing to ask
    reflection_examples: str  # the Reflector's examples for this agent and --reflection-prompt
    executor: ExecutorSettings
    file_models: tuple[str, ...] = ()  # the models read from a local file (spec.json records its sha256)
    engine_choice: dict | None = None  # what --local-engine auto came to (llm/engine_choice.py), for spec.json

    @property
    def constrained(self) -> bool:
        """What --constrained came to for the actor (recorded in the spec)."""
        return self.grammar is not None


def resolve(config: RunConfig, *, task_ids: Sequence[str] | None = None, new_run: bool = True,
            check_models: bool = True) -> Plan:
    """The run's plan; a ConfigError listing every problem found. `task_ids` (a resumed run's
    spec) names the tasks; otherwise the split's first `num_envs`. `new_run` False: a resumed
    run, which keeps the model flags its spec recorded. `check_models` False: the model is a policy the RL
    side loads itself (a checkpoint directory too), or a test's: the model checks are left out."""
    problems: list[ConfigError] = []
    kinds: tuple[str, ...] = ()
    if check_models:
        from reinagent.llm import check_models

        kinds = collect(problems, check_models, (config.actor_model, config.reflection_model),
                         config.base_url, config.api_key_env, new_run=new_run) or ()
    engine_choice = None  # what --local-engine auto came to, for spec.json
    if config.local_engine == "auto":  # OpenVINO here where only it can do what the run asks
        config, engine_choice = _auto_without_measuring(config, kinds, check_models)
    if config.local_engine == "llamacpp" and check_models:
        collect(problems, _check_local_engine, config, kinds)
    if config.benchmark.lower().removesuffix("-v1") == "alfworld" and not config.env_url:
        collect(problems, require_extra, "alfworld", f"benchmark {config.benchmark}")
    grammar = None
    # a missing extra (alfworld) is named before the benchmark imports it
    if not any(isinstance(p, MissingExtra) for p in problems):
        try:
            bench, config = _resolve_benchmark(config)
            tasks = _select_tasks(bench, config, task_ids)
            if _may_constrain(config.constrained, kinds) and config.local_engine in ("openvino", "auto"):
                from reinagent.llm.constrained import choose_grammar

                grammar = choose_grammar(config.constrained, config.benchmark, config.agent, config.rollout,
                                         config.actor_model, config.base_url, config.precision)
        except ConfigError as err:
            problems.append(err)
        except ImportError as err:  # an extra not checked (the models' own problems hid it)
            problems.append(ConfigError(f"benchmark {config.benchmark} cannot be imported ({err}); "
                                        "install its extra (./run_tests.sh installs every extra)"))
    raise_all(problems)
    if config.local_engine == "auto":  # measured last: nothing else may fail after a minute of measuring
        from reinagent.llm import local_batch
        from reinagent.llm.engine_choice import choose

        choice = choose(config.actor_model, local_batch(config.max_concurrency))
        config, engine_choice = config.model_copy(update={"local_engine": choice.engine}), choice.record()
        if choice.engine == "llamacpp":
            grammar = None if not config.constrained else grammar  # --constrained kept OpenVINO above
            _check_local_engine(config, kinds)
    return Plan(
        config=config, benchmark=bench, tasks=tuple(tasks), task_settings=picked(BenchmarkSettings, config),
        agent_settings=agent_settings(config),
        rollout=picked(RolloutSettings, config), models=picked(ModelSettings, config),
        grammar=grammar,
        checks=picked(PreflightSettings, config, backends=kinds) if _asks_running(kinds, config.executor) else None,
        reflection_examples=reflection_examples(bench, config.agent, config.reflection_prompt),
        executor=ExecutorSettings(name=config.executor, ray_address=config.ray_address,
                                  models=(config.actor_model, config.reflection_model), base_url=config.base_url,
                                  precision=config.precision, deterministic=config.deterministic,
                                  local_engine=config.local_engine, max_concurrency=config.max_concurrency,
                                  run_settings=config.model_dump_json()),
        file_models=tuple(m for m, kind in zip((config.actor_model, config.reflection_model), kinds)
                          if kind in ("local", "hf")),
        engine_choice=engine_choice,
    )


def _auto_without_measuring(config: RunConfig, kinds: tuple[str, ...],
                            check_models: bool) -> tuple[RunConfig, dict | None]:
    """--local-engine auto: OpenVINO, said and recorded, where only it can run what is asked;
    else still auto, measured at the end of `resolve` (reinagent.llm.engine_choice)."""
    from reinagent.llm.engine_choice import EngineChoice, without_measuring

    if not check_models or "local" not in kinds:  # no local model: the flag has nothing to choose
        return config.model_copy(update={"local_engine": "openvino"}), None
    choice = without_measuring(constrained=config.constrained, deterministic=config.deterministic,
                               precision=config.precision, executor=config.executor,
                               llamacpp_missing=_llamacpp_missing(config, kinds))
    if choice is None:
        return config, None
    print(f"local engine: {choice.reason}", file=sys.stderr, flush=True)
    return config.model_copy(update={"local_engine": "openvino"}), choice.record()


def _llamacpp_missing(config: RunConfig, kinds: tuple[str, ...]) -> str | None:
    """Why llama.cpp cannot serve the run's local models here, or None."""
    from reinagent.llm.llamacpp import resolve as resolve_gguf
    from reinagent.llm.llamacpp_engine import engine_available

    reason = engine_available()
    if reason:
        return reason
    for model, kind in dict(zip((config.actor_model, config.reflection_model), kinds)).items():
        if kind == "local":
            try:
                resolve_gguf(model)
            except ConfigError as err:  # an OpenVINO IR or a HF folder: llama.cpp reads GGUF files
                return str(err).splitlines()[0]
    return None


def _check_local_engine(config: RunConfig, kinds: tuple[str, ...]) -> None:
    """--local-engine llamacpp: what it cannot do, and its server, named before anything runs."""
    from reinagent.llm.llamacpp import resolve as resolve_gguf
    from reinagent.llm.llamacpp_engine import engine_available

    if "local" not in kinds:
        raise ConfigError(f"--local-engine {config.local_engine} is for a local model (local, local:PATH); "
                          f"model {config.actor_model!r} does not use it: drop the flag")
    if config.constrained:
        raise ConfigError("--constrained needs --local-engine openvino: llama.cpp takes GBNF grammars, not the "
                          "regular expressions of reinagent's action grammars; drop --constrained")
    if config.precision != "fast":
        raise ConfigError(f"--precision {config.precision} is the OpenVINO engine's; llama.cpp reads the GGUF file "
                          "as it is: drop --precision or use --local-engine openvino")
    if config.deterministic:
        raise ConfigError("--deterministic is the OpenVINO engine's (one sequence at a time); with llama.cpp "
                          "drop it, or use --local-engine openvino")
    if config.executor != "local":
        raise ConfigError(f"--local-engine llamacpp runs with --executor local only, not {config.executor}")
    reason = engine_available()
    if reason:
        raise MissingExtra(reason)
    for model, kind in dict(zip((config.actor_model, config.reflection_model), kinds)).items():
        if kind == "local":
            resolve_gguf(model)  # a GGUF file (or a packaged name) llama.cpp can serve, hash-checked


def _may_constrain(wanted: bool | None, kinds: tuple[str, ...]) -> bool:
    """Whether the actor's grammar is worth looking up: --constrained asked for it, or by default
    an actor the local engine may serve (the only one that constrains; its backend `kinds[0]`,
    or not looked up)."""
    return bool(wanted) or (wanted is None and kinds[:1] in ((), ("local",)))


def _asks_running(kinds: tuple[str, ...], executor: str) -> bool:
    """Whether the run needs something running checked (preflight.py): a model server, a Ray
    cluster; or backends not looked up here (`check_models` False)."""
    return not kinds or executor != "local" or bool({"openai-compatible", "litellm"} & set(kinds))


def _resolve_benchmark(config: RunConfig) -> tuple[Benchmark, RunConfig]:
    """The benchmark, its agent and split checked against its names, the preset and the Evaluator
    filled in, the benchmark's and the rollout's own checks; under --env-url the benchmark with
    its environments on the server."""
    bench = benchmarks.make(config.benchmark)
    agent = config.agent or bench.default_agent
    if agent not in bench.agents:
        raise ConfigError(f"unknown agent {agent!r} for {bench.name}; valid: {choices(bench.agents)}")
    split = config.split or bench.default_split
    if split not in bench.splits:
        raise ConfigError(f"unknown split {split!r} for {bench.name}; valid: {choices(bench.splits)}")
    config = apply_preset(config.model_copy(update={"benchmark": bench.name, "agent": agent, "split": split}))
    config = apply_part_defaults(config, bench.agent_defaults.get(agent, {}))
    config = config.model_copy(update={"evaluator": _evaluator(bench, config.evaluator)})
    if config.rollout == "multi-turn":  # only agents that can continue an episode retry inside it
        from reinagent.rollouts.multi_turn import check_agent

        check_agent(bench.name, agent)
    if config.rollout in ("tot", "mcts"):  # a search steps the agent: refuse one it cannot, up front
        from reinagent.rollouts.steps import check_searchable

        check_searchable(bench, agent, agent_settings(config), config.rollout)
    if config.env_url:  # environments on an env server (`reinagent serve-env`); tasks and scoring stay here
        from reinagent.service.served import served

        bench = served(bench, picked(BenchmarkSettings, config))
    return bench, config


def apply_preset(config: RunConfig) -> RunConfig:
    """`--preset paper`: every reference setting of the run's benchmark (reinagent/reference.py)
    that no flag or YAML key set (pydantic's `model_fields_set`: what the config was built with).
    A resumed run's config, rebuilt from spec.json, has every setting set: it keeps what its
    preset set then."""
    if config.preset is None:
        return config
    if config.benchmark not in PRESET_BENCHMARKS:
        raise ConfigError(f"--preset {config.preset}: the reference code has no {config.benchmark} run; "
                          f"valid benchmarks: {choices(PRESET_BENCHMARKS)}")
    explicit = {name: getattr(config, name) for name in config.model_fields_set}
    update = {r.setting: r.value for r in references(config.model_dump(mode="json")) if r.setting not in explicit}
    return RunConfig(**explicit, **update)  # validated: a wrong table entry is a clear error here


def apply_part_defaults(config: RunConfig, defaults: Mapping[str, Any]) -> RunConfig:
    """A part's own default (the coder's 768 max_tokens) for each setting no flag, YAML key or
    preset set, written into the config: spec.json then records what the run used, and a value
    the user gave is kept even when it equals the framework's default (`--max-tokens 256`)."""
    update = {name: value for name, value in defaults.items() if name not in config.model_fields_set}
    return RunConfig(**config.model_dump(exclude_unset=True), **update) if update else config


def _evaluator(bench: Benchmark, evaluator: str | None) -> str | None:
    """`--evaluator` as the run uses it: the benchmark's default when none is given; refused for a
    benchmark whose own verdict is its only evaluator (no internal tests to choose)."""
    if bench.default_evaluator is None:
        if evaluator is not None:
            raise ConfigError(f"--evaluator is for benchmarks whose agent writes tests of its own (humaneval, "
                              f"mbpp); {bench.name} is judged by its own verdict only: leave --evaluator out")
        return None
    return evaluator or bench.default_evaluator


def reflection_examples(bench: Benchmark, agent: str | None, style: str = "lesson") -> str:
    """The Reflector's examples for a failed attempt of `agent`: the benchmark's set for that agent
    (HotpotQA keeps one per agent) or its one set; under `--reflection-prompt plan` its plans."""
    if style == "plan" and bench.plan_examples:
        return bench.plan_examples
    return bench.reflection_examples_by_agent.get(agent or "", bench.reflection_examples)


def _select_tasks(bench: Benchmark, config: RunConfig, task_ids: Sequence[str] | None) -> list[Task]:
    """The run's tasks: those `task_ids` names (a resumed run's), else the split's first `num_envs`;
    the benchmark checks its settings first (its sandbox, its data, its env server)."""
    tasks = bench.checked_tasks(picked(BenchmarkSettings, config))
    if task_ids is None:
        return tasks[: config.num_envs] if config.num_envs is not None else tasks
    by_id = {t.task_id: t for t in tasks}
    missing = [tid for tid in task_ids if tid not in by_id]
    if missing:
        raise RunDirError(f"tasks {missing[:3]} are no longer in split {config.split!r}")
    return [by_id[tid] for tid in task_ids]


def agent_settings(config: RunConfig | Mapping[str, Any]) -> AgentSettings:
    """The agent's settings of a run's config, or of a recorded run's (spec.json's config)."""
    config = config if isinstance(config, RunConfig) else RunConfig(**config)
    return picked(AgentSettings, config, max_tokens_given=_given(config, "max_tokens"))


def picked(settings_class: type, config: RunConfig, **given: Any):
    """`settings_class` (a dataclass whose fields are RunConfig names) filled from the config."""
    import dataclasses

    fields = [f.name for f in dataclasses.fields(settings_class)]
    return settings_class(**{name: given[name] if name in given else getattr(config, name)
                             for name in fields if name in given or hasattr(config, name)})


def _given(config: RunConfig, name: str) -> bool:
    """Set by a flag, a YAML key, the preset or a part's default (`apply_part_defaults`), whatever
    its value; a config rebuilt from spec.json has every field set: what the run used."""
    return name in config.model_fields_set


# ----- building the run ----------------------------------------------------------------------


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
    config = plan.config
    reflector = Reflector(reflector_llm, plan.reflection_examples, style=config.reflection_prompt,
                          max_tokens=config.reflection_max_tokens)
    return Experiment(plan, plan.benchmark.make_agent(config.agent, plan.agent_settings), actor, reflector, store, llms)


def build_models(plan: Plan, run_key: str | None = None) -> tuple[LLM, LLM, list[LLM]]:
    """Actor and reflector models; one shared instance when both roles name the same model."""
    from reinagent.llm.stack import build_llm

    config = plan.config
    actor = build_llm(config.actor_model, plan.models, role="actor", run_key=run_key, grammar=plan.grammar)
    # A constrained actor (reinagent.llm.constrained) must not hold the reflector to its grammar:
    # the reflector then gets its own stack (a local engine is still loaded once and shared).
    if config.reflection_model == config.actor_model and plan.grammar is None:
        return actor, actor, [actor]
    reflector = build_llm(config.reflection_model, plan.models, role="reflector", run_key=run_key)
    return actor, reflector, [actor, reflector]


def rebuild(config_json: str, run_key: str | None, store, adapt_models=None) -> Experiment:
    """The run's experiment built again in another process (a Ray worker) from its settings as
    JSON. Handed to the executors (executors.EpisodeParts), which never import this module."""
    import json

    return build(resolve(RunConfig(**json.loads(config_json)), task_ids=(), new_run=False), store, run_key, adapt_models)
