"""The environment protocol's messages as typed records (docs/env-protocol.md is the spec).

Requests ignore keys they do not know, so a client written for a later version of the protocol
(or for the seed's `{state, reward, done}` servers) still talks to this one; responses carry
exactly the documented keys. `state` duplicates `observation` for seed-style clients. The one
exception: a key another protocol uses to name an environment or a task (AgentGym's `env_idx`,
`data_idx`) is refused (422), since ignoring it would silently play the default session's task.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

#: keys with which other protocols name an environment or a task (AgentGym's "id" family)
FOREIGN_KEYS = ("env_idx", "data_idx")

#: an action at most (a coder's program is a few KB; a 50 MB Search[...] is refused with 422)
MAX_ACTION_CHARS = 100_000
Action = Annotated[StrictStr, Field(max_length=MAX_ACTION_CHARS)]
Seed = Annotated[StrictInt, Field(ge=-(2**63), lt=2**64)]  # what numpy and random both take


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _no_foreign_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and (foreign := [k for k in FOREIGN_KEYS if k in data]):
            raise ValueError(f"key {foreign[0]!r} is another protocol's (AgentGym's); this one names a task "
                             "by 'task_id' or 'idx' (`serve-env --protocol agentgym` speaks AgentGym's)")
        return data


class CreateRequest(_Request):
    task_id: StrictStr
    #: settings of the environment itself (e.g. agent, max_steps); see ENV_OPTIONS in the server
    options: dict[str, Any] = Field(default_factory=dict)


class ResetRequest(_Request):
    id: StrictStr | None = None  # None: the default session (the seed's id-less form)
    seed: Seed | None = None
    task_id: StrictStr | None = None  # id-less form only: (re)start the default session on this task
    # id-less form only, the seed's WebEnvClient: the idx-th task of /tasks, in a default session of
    # its own per idx (two clients with different idx never share one)
    idx: StrictInt | None = None


class StepRequest(_Request):
    id: StrictStr | None = None  # None: the default session (of `idx` when given)
    action: Action
    idx: StrictInt | None = None
    #: per-step settings an environment accepts (e.g. internal_tests for the programming envs)
    options: dict[str, Any] = Field(default_factory=dict)


class CloseRequest(_Request):
    id: StrictStr


class Health(BaseModel):
    status: str = "ok"
    benchmark: str
    sessions: int
    split: str | None = None


class Tasks(BaseModel):
    tasks: list[str]


class Created(BaseModel):
    id: str


class ResetResult(BaseModel):
    id: str
    state: str
    observation: str
    info: dict[str, Any]


class StepResult(BaseModel):
    state: str
    observation: str
    reward: float
    done: bool
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @classmethod
    def of(cls, observation: str, reward: float, terminated: bool, truncated: bool, info: dict) -> StepResult:
        return cls(state=observation, observation=observation, reward=float(reward), done=terminated or truncated,
                   terminated=terminated, truncated=truncated, info=info)


class Closed(BaseModel):
    closed: bool = True


class Error(BaseModel):
    error: str
