"""RLAgentConfig: the seed's RL settings (same names and defaults) plus reinagent's own.

The seed's keys: max_turns, max_prompt_length, max_response_length, max_obs_length, react_format,
env_name, env_port, env_server_base, rollout_strategy, storage_backend, max_workers. Ours follow
them. The token limits mean, in tokens of the policy's tokenizer: the first prompt is cut to
`max_prompt_length` (its beginning is dropped, the question at its end stays), each turn's reply
to `max_response_length`, each observation/feedback to `max_obs_length`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from reinagent.errors import ConfigError, choices

# The seed's rollout names -> reinagent/rollouts' registry names (our own names are accepted too).
ROLLOUT_NAMES = {"StandardReAct": "react", "ToT": "tot", "MCTS": "mcts", "MultiTurn": "multi-turn"}
# "file": run directories only (reinagent/store.py); the others also copy every run directory an RL
# run writes (rl run's, train's rollouts/) into the store at storage_url when it is complete
STORAGE_BACKENDS = ("file", "sqlite", "postgresql", "mongodb")
STORAGE_SCHEMES = {"sqlite": ("sqlite",), "postgresql": ("postgresql", "postgres"), "mongodb": ("mongodb", "mongodb+srv")}
SEED_KEYS = ("max_turns", "max_prompt_length", "max_response_length", "max_obs_length", "react_format",
             "env_name", "env_port", "env_server_base", "rollout_strategy", "storage_backend", "max_workers")


class RLAgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- the seed's fields, with its defaults ---
    max_turns: int = Field(default=10, gt=0)
    max_prompt_length: int = Field(default=2048, gt=0)
    max_response_length: int = Field(default=512, gt=0)
    max_obs_length: int = Field(default=1024, gt=0)
    react_format: bool = True  # Thought/Action replies with the agent's few-shot prompt; False: bare question
    env_name: str | None = None  # a registered benchmark, or the benchmark of the env server below
    env_port: int = Field(default=8000, gt=0, lt=65536)
    env_server_base: str = "http://127.0.0.1"
    rollout_strategy: str = "StandardReAct"
    storage_backend: str = "file"
    storage_url: str | None = None  # ours: sqlite:///PATH.db, postgresql://..., mongodb://... for those backends
    max_workers: int = Field(default=10, gt=0)  # episodes in flight at once (a generation batch for a local policy)

    # --- ours ---
    model: str = "local"  # local, local:PATH, a HF model dir, or any reinagent model string (run/collect)
    base_url: str | None = None
    output_dir: str = "rl_runs"
    split: str | None = None  # run/collect: the benchmark's default split; train: "train" when it has one
    num_tasks: int | None = Field(default=None, gt=0)  # from the start of the split; None: all
    method: Literal["grpo", "sft", "reflect"] = "grpo"
    # method "reflect" (rl/reflect.py): which tokens of a (reflection, retry) pair carry the loss:
    # the reflection only (Reflect, Retry, Reward's choice), the retry only, or both
    reflect_loss: Literal["reflection", "retry", "both"] = "both"
    reflection_max_tokens: int = Field(default=200, gt=0)  # the Reflector's own limit (reflector.py)
    # method "reflect": the first attempt's sampling temperature (None: `temperature`; 0: greedy,
    # the first trial of the paired evaluation `reinagent run --first-trial-temperature 0`)
    first_trial_temperature: float | None = Field(default=None, ge=0)
    group_size: int = Field(default=4, gt=1)  # G episodes per task and step; GRPO's advantages compare them
    batch_size: int = Field(default=4, gt=0)  # tasks per training step (so batch_size * G episodes)
    num_epochs: float = Field(default=1.0, gt=0)  # passes over the training tasks (unless max_steps)
    max_steps: int | None = Field(default=None, gt=0)
    learning_rate: float = Field(default=1e-5, gt=0)
    kl_coef: float = Field(default=0.02, ge=0)  # beta; 0 skips the reference model
    clip_eps: float = Field(default=0.2, gt=0)  # PPO/GRPO ratio clip (TRL's epsilon)
    temperature: float = Field(default=1.0, ge=0)  # sampling while training; run/evaluate use eval_temperature
    eval_temperature: float = Field(default=0.0, ge=0)
    turn_discount: float = Field(default=0.9, gt=0, le=1)  # a right answer on turn t earns d**(t-1)
    micro_batch: int = Field(default=8, gt=0)  # sequences per forward/backward (gradient accumulation)
    trainer: Literal["trl", "reinagent"] = "trl"  # GRPO: TRL's GRPOTrainer, or our own loss (async mode uses ours)
    save_steps: int = Field(default=10, gt=0)  # trl trainer: a resumable checkpoint every N steps (and at the end)
    # trl trainer: "bf16" runs forward/backward under bf16 autocast, fp32 master weights and
    # optimiser state (rollouts stay fp32); the RL demo re-run with it: 49.0% held out, fp32 46.3%
    train_precision: Literal["fp32", "bf16"] = "fp32"
    # trl trainer: "openvino" samples the rollouts with OpenVINO GenAI from the policy's weights,
    # written as GGUF before each step (rl/ov_rollout.py: the embedded model's family only)
    rollout_engine: Literal["torch", "openvino"] = "torch"
    # DAPO's dynamic sampling: up to N rounds of replacing a group whose rewards are all equal (no
    # learning signal) by a fresh group of another training task; 0 keeps every group (sync trainers)
    dynamic_sampling: int = Field(default=0, ge=0)
    async_mode: bool = False  # AReaL-style: rollouts of step k+1 overlap training step k (staleness <= 1)
    seed: int = 0
    threads: int | None = Field(default=None, gt=0)  # torch CPU threads (None: REINAGENT_TORCH_THREADS, else the idle cores)
    overwrite: bool = False  # replace a non-empty output_dir

    @field_validator("rollout_strategy")
    @classmethod
    def _rollout(cls, value: str) -> str:
        from reinagent.rollouts.base import ROLLOUTS

        if value not in ROLLOUT_NAMES and value not in ROLLOUTS:
            raise ValueError(f"unknown rollout_strategy {value!r}; valid: {choices([*ROLLOUT_NAMES, *ROLLOUTS])}")
        return value

    @field_validator("storage_backend")
    @classmethod
    def _storage(cls, value: str) -> str:
        if value not in STORAGE_BACKENDS:
            raise ValueError(f"unknown storage_backend {value!r}; valid: {choices(STORAGE_BACKENDS)}")
        return value

    @model_validator(mode="after")
    def _storage_url(self) -> "RLAgentConfig":
        backend, url = self.storage_backend, self.storage_url
        if backend == "file":
            if url:
                raise ValueError(f"storage_url is for storage_backend {choices(STORAGE_BACKENDS[1:])}; "
                                 "with \"file\" the runs are directories under output_dir")
            return self
        scheme = (url or "").split("://", 1)[0].lower() if url and "://" in url else ""
        if scheme not in STORAGE_SCHEMES[backend]:
            raise ValueError(f"storage_backend {backend!r} needs storage_url = \"{STORAGE_SCHEMES[backend][0]}://...\" "
                             f"(docs/stores.md)")
        return self

    @model_validator(mode="after")
    def _reflect(self) -> "RLAgentConfig":
        if self.method == "reflect" and self.async_mode:
            raise ValueError("method \"reflect\" trains synchronously: set async_mode = false")
        if self.method == "reflect" and not self.react_format:
            raise ValueError("method \"reflect\" retries with the agent's REFLEXION prompt: set react_format = true")
        if self.rollout_engine == "openvino" and (self.trainer != "trl" or self.async_mode or self.method == "sft"):
            raise ValueError("rollout_engine = \"openvino\" samples for TRL's trainer only (it recomputes the "
                             "log-probs): set trainer = \"trl\" with method grpo or reflect and async_mode = false, "
                             "or rollout_engine = \"torch\"")
        return self

    @property
    def rollout(self) -> str:
        """reinagent's name of the rollout strategy (make_rollout's)."""
        return ROLLOUT_NAMES.get(self.rollout_strategy, self.rollout_strategy)

    @property
    def env_server_url(self) -> str:
        return f"{self.env_server_base.rstrip('/')}:{self.env_port}"


def valid_keys() -> list[str]:
    return list(RLAgentConfig.model_fields)


def build_rl_config(values: dict[str, Any], where: str = "[rl]") -> RLAgentConfig:
    """Validated config, or a one-line ConfigError naming the bad key and the valid ones."""
    unknown = [k for k in values if k not in RLAgentConfig.model_fields]
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} in {where}; valid: {', '.join(valid_keys())}")
    try:
        return RLAgentConfig(**values)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{where} {key}: {message}" if key else f"{where}: {message}") from None
