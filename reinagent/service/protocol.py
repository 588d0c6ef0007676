"""The environment protocol's messages as typed records (docs/env-protocol.md is the spec).

Requests ignore keys they do not know, so a client written for a later version of the protocol
(or for the seed's `{state, reward, done}` servers) still talks to this one; responses carry
exactly the documented keys. `state` duplicates `observation` for seed-style clients.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

#: an action at most (a coder's program is a few KB; a 50 MB Search[...] is refused with 422)
MAX_ACTION_CHARS = 100_000
Action = Annotated[StrictStr, Field(max_length=MAX_ACTION_CHARS)]
Seed = Annotated[StrictInt, Field(ge=-(2**63), lt=2**64)]  # what numpy and random both take


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CreateRequest(_Request):
    task_id: StrictStr
    #: settings of the environment itself (e.g. agent, max_steps); see ENV_OPTIONS in the server
    options: dict[str, Any] = Field(default_factory=dict)


class ResetRequest(_Request):
    id: StrictStr | None = None  # None: the default session (the seed's id-less form)
    seed: Seed | None = None
    task_id: StrictStr | None = None  # id-less form only: (re)start the default session on this task


class StepRequest(_Request):
    id: StrictStr | None = None  # None: the default session
    action: Action
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
