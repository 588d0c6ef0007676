"""Typed records that flow between the parts of a run and into the run directory.

Every record is a pydantic model so that a run directory read back years later is validated
field by field; nothing downstream has to guess a dict's keys.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError

from reinagent.text import valid_data

Role = Literal["actor", "reflector", "value"]  # value: a search's judgements of its states


def record_json(record: BaseModel, *, indent: int | None = None) -> str:
    """A record's JSON, whatever str it holds: text is made valid where it enters the framework
    (reinagent/text.py), and a lone surrogate that slipped past becomes U+FFFD here rather than
    stopping the write (and every resume after it)."""
    try:
        return record.model_dump_json(indent=indent)
    except PydanticSerializationError:
        clean = type(record).model_validate(valid_data(record.model_dump()))
        return clean.model_dump_json(indent=indent)


class Message(BaseModel):
    """One chat message; `role` is system, user, assistant or tool."""

    model_config = ConfigDict(frozen=True)
    role: str
    content: str


class ModelCall(BaseModel):
    """Usage of one model call, as recorded with the trial that made it."""

    role: Role = "actor"
    model: str = ""
    rollout_id: str | None = None  # the call's place: "{task}/trial{k}/..." (a search's tree position)
    seed: int | None = None  # the seed a sampled call was sent (None: greedy)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None
    cached: bool = False


class Usage(BaseModel):
    """Totals over a set of model calls (one role, one trial record, or a whole run)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cache_hits: int = 0

    def add(self, call: ModelCall) -> None:
        self.calls += 1
        if call.cached:
            # A cache hit costs nothing: it is counted as a hit, not as usage.
            self.cache_hits += 1
            return
        self.prompt_tokens += call.prompt_tokens
        self.completion_tokens += call.completion_tokens
        self.cost_usd += call.cost_usd or 0.0
        self.latency_s += call.latency_s

    @classmethod
    def of(cls, calls: list[ModelCall]) -> "Usage":
        usage = cls()
        for call in calls:
            usage.add(call)
        return usage


class Step(BaseModel):
    """One agent step: a model output, the action parsed from it and what the environment said.

    The prompt of the step is `Trajectory.messages[:prompt_len]`: storing the index instead of a
    copy keeps a 50-step ALFWorld record linear in size while every prompt stays recoverable.
    """

    prompt_len: int
    output: str
    thought: str | None = None
    action: str | None = None
    observation: str | None = None
    valid_action: bool = True


class SearchNode(BaseModel):
    """One node of a search rollout's tree (ToT, MCTS): the step that led to it and what the search
    learnt about it. Node 0 is the root (the task's first observation; no action). `value` is the
    LLM value estimate (the mean of `value_samples`, the judgements' texts; or the fraction of
    internal tests passed), `q` MCTS's backed-up value (it starts at `value` and averages in the
    return of every simulation through the node), `visits` how many simulations passed through it,
    `reward` the search's judge's verdict on a terminal node (the benchmark's reward, the model's
    own value under `--search-judge value`, or the internal tests' pass rate for programming;
    `success`: reward 1), `reflection` the self-reflection written on a failed terminal node."""

    id: int
    parent: int | None = None
    depth: int = 0
    output: str | None = None  # the model text the step was parsed from
    thought: str | None = None
    action: str | None = None
    observation: str | None = None
    value: float | None = None
    value_samples: list[str] = Field(default_factory=list)
    q: float | None = None
    visits: int = 0
    reward: float | None = None
    terminal: bool = False
    success: bool | None = None
    reflection: str | None = None


class Trajectory(BaseModel):
    """Everything one agent did in one trial of one task. A search rollout keeps the chosen path
    in `steps`/`messages` (what the Reflector and LAST_ATTEMPT see) and the whole tree in `tree`."""

    messages: list[Message] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    answer: str | None = None
    end_reason: str = "unfinished"  # finished, step_budget, prompt_budget, turn_budget (multi-turn), loop, error, ...
    calls: list[ModelCall] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)
    rollout: str = "react"  # the rollout strategy that produced it (react, tot, mcts, multi-turn)
    tree: list[SearchNode] = Field(default_factory=list)  # search rollouts only; node i has id i

    def prompt_of(self, step: Step) -> list[Message]:
        return self.messages[: step.prompt_len]


class Evaluation(BaseModel):
    """What the benchmark's evaluator decided about a trajectory."""

    success: bool
    reward: float = 0.0
    f1: float | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    # the program passed its own (internal) tests: what ends the task's trial loop under
    # `--evaluator internal`; None where the benchmark has no internal tests
    internal_passed: bool | None = None


class TrialRecord(BaseModel):
    """The durable record of one (task, trial): appended to records.jsonl as soon as it ends."""

    task_id: str
    trial: int
    success: bool = False
    reward: float = 0.0
    f1: float | None = None
    answer: str | None = None
    trajectory: Trajectory = Field(default_factory=Trajectory)
    reflection: str | None = None  # what memory keeps: the Reflector's reply cleaned (reflector.clean_reflection)
    reflection_raw: str | None = None  # the reply as the model wrote it (None in records made before it was kept)
    reflection_calls: list[ModelCall] = Field(default_factory=list)
    memory: list[str] = Field(default_factory=list)  # reflections shown to the actor this trial
    evaluation: dict[str, Any] = Field(default_factory=dict)
    # the program passed its own tests (programming only; None elsewhere). Under `--evaluator
    # internal` this, not `success`, decides whether the task's loop goes on (`stops_loop`)
    internal_passed: bool | None = None
    error: str | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    # `reinagent branch`: the run this record was copied from, and how many of its calls (the first
    # of `calls`) that run made; a reflection the branch wrote later is appended after them. The
    # branch's report counts only its own calls and time (issue 45).
    copied_from: str | None = None
    copied_calls: int = 0

    @property
    def calls(self) -> list[ModelCall]:
        return [*self.trajectory.calls, *self.reflection_calls]

    @property
    def own_calls(self) -> list[ModelCall]:
        """The calls this run made for this record (all of them unless it was copied)."""
        return self.calls[self.copied_calls:]

    @property
    def wall_s(self) -> float:
        return max(0.0, self.finished_at - self.started_at)


def recorded_evaluator(config: dict[str, Any]) -> str | None:
    """A run's Evaluator (`--evaluator`) as its spec's config records it. A programming run (the
    coder, the one agent with tests of its own) recorded before the setting existed has no such key:
    it was judged by the hidden tests every trial, and is read (and resumed) as `hidden`."""
    if "evaluator" in config:
        return config["evaluator"]
    return "hidden" if config.get("agent") == "coder" else None


def stops_loop(record: TrialRecord, evaluator: str | None) -> bool:
    """Whether a task's trial loop ends with this record: Reflexion's Evaluator passed it. Under
    `--evaluator internal` that is the program's own tests (the hidden verdict, `success`, is only
    the score); otherwise the benchmark's verdict. An errored record never ends it."""
    if record.error is not None:
        return False
    return bool(record.internal_passed) if evaluator == "internal" else record.success


def final_record(records: list[TrialRecord], evaluator: str | None) -> TrialRecord | None:
    """The record one task's loop stopped with (of that task's records): the first that ends the
    loop, else the last one. Its `success` is the task's score: under `--evaluator internal` the
    hidden verdict on the program the loop stopped with (pass@1, as the reference scores it),
    otherwise the first success (solved at any trial). A task's earlier hidden verdicts (a run
    extended with `resume --num-trials` after its old last trial) never count."""
    ordered = sorted(records, key=lambda r: r.trial)
    return next((r for r in ordered if stops_loop(r, evaluator)), ordered[-1] if ordered else None)


def solved_at(records: list[TrialRecord], evaluator: str | None) -> int | None:
    """The trial at which one task's loop stopped with a success (its score), else None."""
    final = final_record(records, evaluator)
    return final.trial if final is not None and final.success else None


class Supersede(BaseModel):
    """A marker line in records.jsonl: the listed (task, trial) records written *before* it no longer
    count (`resume --from-trial` / `--retry-errors`). Appended and fsynced before any redo starts, so
    a resume killed right after it still leaves no stale trial for reports or the next resume.
    Records of the same (task, trial) appended after the marker count as usual."""

    kind: Literal["supersede"] = "supersede"  # first key on purpose: readers tell markers by it
    keys: list[tuple[str, int]]
    reason: str
    at: float = 0.0


class SpecChange(BaseModel):
    """One change made to a run after it started (e.g. `resume --num-trials 5`), kept in the spec."""

    at: float
    command: list[str] = Field(default_factory=list)
    changes: dict[str, Any] = Field(default_factory=dict)


class RunSpec(BaseModel):
    """Provenance of a run, written when it starts: enough to reproduce or resume it. A resume that
    changes the run (more trials, redone trials) rewrites it atomically and adds to `history`."""

    config: dict[str, Any]
    task_ids: list[str]
    created_at: float
    reinagent_version: str
    python_version: str
    packages: dict[str, str] = Field(default_factory=dict)
    git_commit: str | None = None
    hostname: str | None = None
    command: list[str] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)  # the benchmark's setting, e.g. docstore kind
    # each local model's file as it ran: path, sha256 (a folder: contents_sha256), packaged model
    model_files: dict[str, dict[str, Any]] = Field(default_factory=dict)
    format_version: int = 1
    history: list[SpecChange] = Field(default_factory=list)  # changes since the run started, oldest first


def first_non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    """(where, value) of the first NaN or infinity in plain data (a model_dump()), else None.
    JSON has no such numbers (pydantic writes them as null), so a record holding one would not
    read back as it was written."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "(top)", value)
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = first_non_finite(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def finite_or_none(value: Any) -> Any:
    """Plain data with every NaN or infinity replaced by None (JSON's null), for JSON output that
    must parse everywhere: a figure computed from absurd timestamps can overflow to inf."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(item) for item in value]
    return value


def latest_records(records: list[TrialRecord]) -> dict[tuple[str, int], TrialRecord]:
    """One record per (task, trial): a later record (a retried error) supersedes an earlier one.
    (`read_records` already gives one per (task, trial), with supersede markers applied.)"""
    return {(r.task_id, r.trial): r for r in records}
