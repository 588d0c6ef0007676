"""RunConfig: every setting of a run, from a YAML file and command-line flags (flags win)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reinagent.errors import ConfigError, choices
from reinagent.names import rollout_names  # built-in and registered rollouts
from reinagent.strategy import ReflexionStrategy
from reinagent.text import shown

# The longest sandboxed execution anyone may ask for (a day). inf, nan or 1e19 seconds would end
# as an overflowing CPU limit inside the child: every program, the canonical solution too, failed.
MAX_TIMEOUT_S = 86400.0
# Upper bounds of the other numbers (issue 38): far past any sane run, and low enough that a typo
# (an extra digit, 1e20) is one line instead of a loop that never ends or an overflow deep inside.
MAX_TRIALS = 1000  # Reflexion's papers run 3-15 trials
MAX_TOKENS = 1_000_000  # completion tokens per call: more than any model's context window
MAX_TEMPERATURE = 2.0  # the widest range a provider accepts (OpenAI's 0-2)
MAX_COUNT = 1_000_000  # envs, steps, concurrency, search sizes, per-episode budgets
SEED_RANGE = (-(2 ** 63), 2 ** 63 - 1)  # what a database column (BIGINT) and a backend's seed take

DEFAULT_MODEL = "local"
MAX_NUMBER_CHARS = 64  # a YAML number longer than this is not a setting (the seed's 2**63 has 19 digits)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    benchmark: str = "hotpotqa"
    agent: str | None = None  # None: the benchmark's default agent
    strategy: ReflexionStrategy = ReflexionStrategy.REFLEXION
    split: str | None = None  # None: the benchmark's default split
    num_trials: int = Field(default=3, gt=0, le=MAX_TRIALS)
    num_envs: int | None = Field(default=None, gt=0, le=MAX_COUNT)  # None: every task of the split
    model: str = DEFAULT_MODEL
    reflector_model: str | None = None  # None: same as model
    base_url: str | None = None
    api_key_env: str | None = None  # the variable holding base_url's key (the name only is recorded)
    env_url: str | None = None  # environments from this server (`reinagent serve-env`), not in-process
    # --benchmark remote: the server's protocol (docs/env-protocol.md, or AgentGym's "id" family)
    env_protocol: Literal["reinagent", "agentgym"] = "reinagent"
    max_concurrency: int | None = Field(default=None, gt=0, le=MAX_COUNT)  # None: the backend's default
    max_model_concurrency: int | None = Field(default=None, gt=0, le=MAX_COUNT)  # None: no cap beyond max_concurrency
    # pipeline: a task starts trial k+1 once its own trial k is recorded; barrier: every task of
    # trial k first (the paper's loop). Same records either way (reinagent/schedule.py).
    schedule: Literal["pipeline", "barrier"] = "pipeline"
    executor: Literal["local", "ray"] = "local"  # where episodes run (reinagent/executors/)
    ray_address: str | None = None  # --executor ray: a running cluster (HOST:PORT); None: a local one
    run_dir: str | None = None
    # where runs live: a directory of run directories (default runs/), sqlite:///PATH.db,
    # postgresql://... or mongodb://... (reinagent/stores/; docs/stores.md)
    store: str | None = None
    # reflections shown to the actor: the task's most recent N; None (`--memory-size all`): every one
    memory_size: int | None = Field(default=3, ge=0, le=MAX_COUNT)
    max_steps: int | None = Field(default=None, gt=0, le=MAX_COUNT)  # None: the agent's default
    max_prompt_tokens: int | None = Field(default=None, gt=0, le=MAX_COUNT * 100)
    temperature: float = Field(default=0.0, ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    # the actor's temperature in trial 1 only (None: `temperature`): 0 with --temperature > 0 gives
    # every strategy the same greedy first attempts and sampled retries (a paired comparison)
    first_trial_temperature: float | None = Field(default=None, ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    max_tokens: int = Field(default=256, gt=0, le=MAX_TOKENS)  # per model call
    # actor outputs held to the agent's action grammar (reinagent/llm/constrained.py); None: on
    # for engines with structured output (local, ov) where the agent has a grammar, off otherwise
    constrained: bool | None = None
    # the local engine's arithmetic (reinagent/llm/local.py): fast = the GGUF read directly;
    # exact = an f32 OpenVINO IR exported once (optimum-intel): transformers' greedy text
    precision: Literal["fast", "exact"] = "fast"
    # which engine decodes a `local` model: openvino (OpenVINO GenAI in-process) or llamacpp
    # (llama.cpp's server as a child process, the `llamacpp` extra; reinagent/llm/llamacpp_engine.py)
    local_engine: Literal["openvino", "llamacpp", "auto"] = "openvino"
    seed: int = Field(default=0, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    # the local engine decodes one sequence at a time without its prefix cache, so a greedy answer
    # does not depend on what else was batched with it (docs/search.md "Reproducibility")
    deterministic: bool = False
    cache: bool = True
    # run: only this run's own calls are replayed (a resume); shared: every run on the same model
    # and cache directory shares answers (sampled ones included). See docs/cli.md "Response cache".
    cache_scope: Literal["run", "shared"] = "run"
    cache_dir: str | None = None
    # rollout multi-turn: answers per episode, and the discount of a right answer on turn t (d**(t-1))
    max_turns: int = Field(default=5, gt=0, le=MAX_COUNT)
    turn_discount: float = 0.9  # in (0, 1]: see _turn_discount
    # programming benchmarks
    num_internal_tests: int = Field(default=4, ge=1, le=20)  # unit tests the coder is asked to write
    # how many of the tests it wrote are kept, picked at random (seeded by the run's seed and the
    # task): None keeps them all; the reference's reflexion.py keeps 1 (`internal_tests(.., 1)`)
    internal_tests_kept: int | None = Field(default=None, ge=1, le=20)
    # Reflexion's Evaluator: internal (the program's own tests decide whether the task's loop goes
    # on; the hidden tests judge only the program it stopped with, once: pass@1, as the paper) or
    # hidden (the hidden tests judge every trial and decide: an oracle's pass@N). None: the
    # benchmark's default (internal for humaneval and mbpp; benchmarks without internal tests
    # have no choice and keep None)
    evaluator: Literal["internal", "hidden"] | None = None
    timeout_s: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    allow_weak_sandbox: bool = False  # run generated code without bubblewrap (uid/rlimits fallback)
    # the reference code's rules (docs/strategies.md): each default is this project's, and
    # `--preset paper` sets the reference's value where no flag or YAML key set one (reference.py)
    preset: Literal["paper"] | None = None
    # HotpotQA: the previous attempt and the Reflector's input cut to N tokens (the model's
    # tokenizer) by replacing their largest observations; None: never cut (reference: 1600)
    truncate_attempts: int | None = Field(default=None, gt=0, le=MAX_COUNT)
    reflector_memory: int = Field(default=0, ge=0, le=MAX_COUNT)  # earlier reflections the Reflector sees (ALFWorld ref: 3)
    # lesson: a paragraph after "Reflection:"; plan: a new plan after "New plan:" (ALFWorld's reference)
    reflection_prompt: Literal["lesson", "plan"] = "lesson"
    # completion tokens of one reflection (the Reflector's call); a model trained to reflect in N
    # tokens (`[rl] reflection_max_tokens`) is measured with the same N
    reflection_max_tokens: int = Field(default=200, gt=0, le=MAX_TOKENS)
    # alfworld
    alfworld_data: str | None = None
    alfworld_demos: int = Field(default=1, ge=1, le=2)  # demonstrations of the task's type (reference: 2)
    # cycle: the same move, or the same two moves, 3 times in a row ends an episode; repeat: the
    # same action twice in a row (the reference)
    alfworld_loop: Literal["cycle", "repeat"] = "cycle"
    # replies shorter than 5 characters asked again, each time 0.2 warmer (reference: 5)
    short_reply_retries: int = Field(default=0, ge=0, le=10)
    # rollouts: how one episode explores (reinagent/rollouts/; docs/rollouts.md)
    rollout: str = "react"  # react, tot, mcts or multi-turn
    tot_breadth: int = Field(default=5, gt=0, le=MAX_COUNT)  # candidates sampled per step
    tot_keep: int = Field(default=2, gt=0, le=MAX_COUNT)  # best partial paths kept per step
    tot_depth: int | None = Field(default=None, gt=0, le=MAX_COUNT)  # None: the agent's step budget
    value_samples: int = Field(default=3, gt=0, le=MAX_COUNT)  # LLM value prompt samples per node
    mcts_iterations: int | None = Field(default=None, gt=0, le=MAX_COUNT)  # None: 30 HotpotQA, 8 programming, ...
    mcts_children: int = Field(default=5, gt=0, le=MAX_COUNT)  # children sampled per expansion
    mcts_exploration: float = Field(default=1.0, ge=0.0, allow_inf_nan=False)  # UCT exploration constant
    search_temperature: float = Field(default=1.0, ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False)  # sampling temperature of tot/mcts steps
    # how a search judges a terminal node: reward (the environment's, as Reflexion and LATS use)
    # or value (the model's own evaluation, no gold answer); the returned path is always judged
    search_judge: Literal["reward", "value"] = "reward"
    # mcts: self-reflections one search episode writes, one per distinct failed final answer (as
    # LATS), and all of them shown in its later prompts; so no prompt grows with the failed nodes.
    # None: no bound (only runs started before this setting existed, resumed as they began; resuming.py)
    search_reflections: int | None = Field(default=3, ge=0, le=MAX_COUNT)
    # mcts: which failed nodes get a self-reflection. "ended": a path that ended in a failure (a
    # wrong final answer; the coder's program at the depth limit), as LATS's HotpotQA search;
    # "every_failure": also every open node that failed (the coder's program failing its own tests,
    # as LATS's programming search, programming/mcts.py); other agents' open nodes have not failed yet
    search_reflect_on: Literal["ended", "every_failure"] = "ended"
    max_calls_per_episode: int | None = Field(default=None, gt=0, le=MAX_COUNT)  # actor + value calls; None: unlimited
    max_tokens_per_episode: int | None = Field(default=None, gt=0, le=MAX_COUNT * 1000)  # prompt + completion; None: unlimited

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy(cls, value: Any) -> Any:
        if isinstance(value, str):
            key = value.strip().lower()
            valid = [s.value for s in ReflexionStrategy]
            if key not in valid:
                raise ValueError(f"unknown strategy {shown(value)}; valid: {choices(valid)}")
            return key
        return value

    @field_validator("memory_size", mode="before")
    @classmethod
    def _memory_size(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "all":
            return None  # every reflection: the reference's HotpotQA REFLEXION
        return value

    @field_validator("rollout", mode="before")
    @classmethod
    def _rollout(cls, value: Any) -> Any:
        key = value.strip().lower() if isinstance(value, str) else value
        if key not in rollout_names():
            raise ValueError(f"unknown rollout {shown(value)}; valid: {choices(rollout_names())}")
        return key

    @field_validator("turn_discount")
    @classmethod
    def _turn_discount(cls, value: float) -> float:
        if not 0 < value <= 1:  # 0 would zero every retry's reward; above 1 would favour retrying
            raise ValueError("must be in (0, 1]")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env(cls, value: str | None) -> str | None:
        # Only the variable's name is recorded in spec.json; never echo a value pasted here.
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("must name an environment variable (letters, digits and _), not hold the key itself")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        from urllib.parse import urlsplit

        if value is None:
            return value
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL such as http://127.0.0.1:8000/v1")
        return value.strip()

    @property
    def actor_model(self) -> str:
        return self.model

    @property
    def reflection_model(self) -> str:
        return self.reflector_model or self.model


def _problem(err: ValidationError, where_from: dict[str, str] | None = None) -> str:
    """One line about the first invalid setting, named as the user wrote it: `--num-trials` for a
    flag, `num_trials (in FILE)` for a YAML key."""
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "config"
    name = (where_from or {}).get(field, field)
    if first["type"] == "extra_forbidden":
        import difflib

        valid = ", ".join(sorted(RunConfig.model_fields))
        near = difflib.get_close_matches(field, RunConfig.model_fields, n=1)
        guess = f"did you mean {near[0]!r}? " if near else ""
        return f"unknown setting {shown(field)}; {guess}valid settings: {valid}"
    got = first.get("input")
    # bounded before formatting: the value may be an alias bomb or a number of 100,000 digits
    given = "" if isinstance(got, dict) else f", got {shown(got)}"
    if "api_key" in field:
        given = ""  # it may hold a pasted key
    requirement = _requirement(first)
    if requirement.startswith("is invalid: "):  # a validator's own message names the value
        return f"{name}: {requirement.removeprefix('is invalid: ')}"
    return f"{name} {requirement}{given}"


def _requirement(error: dict[str, Any]) -> str:
    """What a number must be, in words ("a positive whole number"), else pydantic's message."""
    kind, ctx = error["type"], error.get("ctx") or {}
    whole = isinstance(error.get("input"), int) or kind.startswith("int")
    noun = "whole number" if whole else "number"
    if kind == "greater_than" and ctx.get("gt") == 0:
        return f"must be a positive {noun}"
    if kind == "greater_than_equal" and ctx.get("ge") == 0:
        return f"must be zero or a positive {noun}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}"
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "literal_error":
        return "must be " + ctx.get("expected", "one of the valid choices")
    if kind in ("bool_parsing", "bool_type"):
        return "must be true or false"
    msg = error["msg"].removeprefix("Value error, ")
    return msg if msg.startswith("must") else f"is invalid: {msg}"


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML config file as a dict; a clear ConfigError when it is missing, unreadable, malformed,
    nested past reason, TOML, or names a setting twice (YAML's last-one-wins hides a typo)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    if path.suffix.lower() == ".toml":
        raise ConfigError(f"{path} is TOML; `reinagent run --config` takes a YAML file of settings "
                          "(e.g. hotpot_runs/configs/react_reflexion.yaml); an [rl] TOML is for "
                          "`reinagent rl run|train|eval --config`")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {err.start}); save it as UTF-8") from None
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror or err}") from None
    try:
        data = yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise ConfigError(f"malformed config {path}: nested too deeply (settings are one mapping of "
                          "names to values)") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "not valid YAML"
        raise ConfigError(f"malformed YAML in {path}{line}: {problem}{_toml_hint(text)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"malformed config {path}: expected a mapping of settings, got "
                          f"{type(data).__name__}{_toml_hint(text)}")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def _toml_hint(text: str) -> str:
    """For a TOML file under another name: say which format `run --config` takes."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    if first.startswith("[") or re.match(r"^[A-Za-z_][\w.-]*\s*=", first):
        return ("; it looks like TOML: `reinagent run --config` takes YAML (`name: value` lines), "
                "and an [rl] TOML is for `reinagent rl run|train|eval --config`")
    return ""


def _strict_loader():
    import yaml

    class StrictLoader(yaml.SafeLoader):
        """yaml.SafeLoader that refuses a key given twice in one mapping (`num_trials: 3` then
        `num_trials: 5`: plain YAML keeps the last without a word)."""

        def construct_mapping(self, node, deep=False):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader's own error says so
                    break
                if first is None:
                    seen[key] = key_node.start_mark.line + 1
                else:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"setting {shown(key)} given twice (lines {first} and "
                        f"{key_node.start_mark.line + 1}); keep one", key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_int(self, node):
            # int() refuses more than 4,300 digits with a ValueError that is no YAMLError (an
            # "internal error"): a setting's number is short, so a long one is a malformed file
            text = self.construct_scalar(node)
            if len(text) > MAX_NUMBER_CHARS:
                raise yaml.constructor.ConstructorError(
                    None, None, f"a number of {len(text):,} characters; a setting's number is at most "
                    f"{MAX_NUMBER_CHARS} characters long", node.start_mark)
            return super().construct_yaml_int(node)

    StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
    return StrictLoader


def build_config(yaml_path: str | Path | None = None, *, check_rollout: bool = False, **flags: Any) -> RunConfig:
    """Settings from the YAML file (if any), overridden by every flag that is not None. An invalid
    setting is a ConfigError naming the flag (`--num-trials must be a positive whole number, got
    -2`) or the YAML key it came from. `check_rollout` (the CLI): a setting given for a rollout other
    than the run's is one too, instead of being ignored."""
    values: dict[str, Any] = load_yaml(yaml_path) if yaml_path else {}
    where_from = {k: f"{k} (in {yaml_path})" for k in values}
    given = {k: v for k, v in flags.items() if v is not None}
    values.update(given)
    where_from.update({k: flag_name(k) for k in given})
    try:
        config = RunConfig(**values)
    except ValidationError as err:
        raise ConfigError(_problem(err, where_from)) from None
    if check_rollout:
        _check_rollout_settings(config, where_from)
    return config


# The settings only some built-in rollouts read: given with another rollout, they would be ignored
# without a word (a registered rollout of one's own may read any of them: not checked).
_SEARCH = ("tot_depth", "value_samples", "search_temperature", "search_judge")
ROLLOUT_SETTINGS: dict[str, tuple[str, ...]] = {
    "react": (),
    "tot": ("tot_breadth", "tot_keep", *_SEARCH),
    "mcts": ("mcts_iterations", "mcts_children", "mcts_exploration", "search_reflections", "search_reflect_on",
             *_SEARCH),
    "multi-turn": ("max_turns", "turn_discount"),
}


def _check_rollout_settings(config: RunConfig, where_from: dict[str, str]) -> None:
    """A search or multi-turn setting given for a rollout that does not read it is a ConfigError."""
    used = ROLLOUT_SETTINGS.get(config.rollout)
    if used is None:
        return
    for setting in where_from:
        readers = [name for name, names in ROLLOUT_SETTINGS.items() if setting in names]
        if readers and setting not in used:
            raise ConfigError(f"{where_from[setting]} is read only by --rollout {choices(readers)}, and this run's "
                              f"rollout is {config.rollout}: add --rollout {readers[0]} or drop it")


def flag_name(setting: str) -> str:
    """The command-line flag of a setting: num_trials -> --num-trials."""
    return "--" + setting.replace("_", "-")
