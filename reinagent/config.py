"""RunConfig: every setting of a run, from a YAML file and command-line flags (flags win)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reinagent.errors import ConfigError, choices
from reinagent.strategy import ReflexionStrategy

DEFAULT_MODEL = "local"


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    benchmark: str = "hotpotqa"
    agent: str | None = None  # None: the benchmark's default agent
    strategy: ReflexionStrategy = ReflexionStrategy.REFLEXION
    split: str | None = None  # None: the benchmark's default split
    num_trials: int = Field(default=3, gt=0)
    num_envs: int | None = Field(default=None, gt=0)  # None: every task of the split
    model: str = DEFAULT_MODEL
    reflector_model: str | None = None  # None: same as model
    base_url: str | None = None
    max_concurrency: int | None = Field(default=None, gt=0)  # None: the backend's default
    max_model_concurrency: int | None = Field(default=None, gt=0)  # None: no cap beyond max_concurrency
    run_dir: str | None = None
    memory_size: int = Field(default=3, ge=0)  # reflections shown to the actor
    max_steps: int | None = Field(default=None, gt=0)  # None: the agent's default
    max_prompt_tokens: int | None = Field(default=None, gt=0)
    temperature: float = Field(default=0.0, ge=0.0)
    max_tokens: int = Field(default=256, gt=0)  # per model call
    seed: int = 0
    cache: bool = True
    cache_dir: str | None = None
    # programming benchmarks
    num_internal_tests: int = Field(default=4, ge=1, le=20)
    timeout_s: float = Field(default=10.0, gt=0)
    # alfworld
    alfworld_data: str | None = None

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy(cls, value: Any) -> Any:
        if isinstance(value, str):
            key = value.strip().lower()
            valid = [s.value for s in ReflexionStrategy]
            if key not in valid:
                raise ValueError(f"unknown strategy {value!r}; valid: {choices(valid)}")
            return key
        return value

    @property
    def actor_model(self) -> str:
        return self.model

    @property
    def reflection_model(self) -> str:
        return self.reflector_model or self.model


def _problem(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "config"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        valid = ", ".join(sorted(RunConfig.model_fields))
        return f"unknown setting {where!r}; valid settings: {valid}"
    return f"{where}: {msg}"


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML config file as a dict; a clear ConfigError when it is missing or malformed."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "not valid YAML"
        raise ConfigError(f"malformed YAML in {path}{line}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"malformed config {path}: expected a mapping of settings, got {type(data).__name__}")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def build_config(yaml_path: str | Path | None = None, **flags: Any) -> RunConfig:
    """Settings from the YAML file (if any), overridden by every flag that is not None."""
    values: dict[str, Any] = load_yaml(yaml_path) if yaml_path else {}
    values.update({k: v for k, v in flags.items() if v is not None})
    try:
        return RunConfig(**values)
    except ValidationError as err:
        raise ConfigError(_problem(err)) from None
