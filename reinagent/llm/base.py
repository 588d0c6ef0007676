"""The one async interface every model backend implements."""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from reinagent.records import Message, ModelCall, Role
from reinagent.text import valid_text


@dataclass(frozen=True)
class GenerationParams:
    """Sampling parameters of one request; part of the response-cache key."""

    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    top_p: float | None = None
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Completion:
    """A model's answer to one request, with what it cost."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None
    cached: bool = False
    model: str = ""
    finish_reason: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A server may send half an emoji ('\\ud83d'): made valid here, for every backend, so
        # that records, the cache and the stores can write it.
        self.text = valid_text(self.text)

    def to_call(self, role: Role, params: GenerationParams | None = None, rollout_id: str | None = None) -> ModelCall:
        """The call's record; with `params` and `rollout_id` it names the call's place and the
        seed a sampling backend was sent (see `sampling_seed`)."""
        seed = sampling_seed(params, rollout_id) if params is not None else None
        return ModelCall(role=role, rollout_id=rollout_id, seed=seed, model=self.model,
                         prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
                         latency_s=self.latency_s, cost_usd=self.cost_usd, cached=self.cached)


class LLM(abc.ABC):
    """A chat model. `name` is the model string as the user gave it (never a key)."""

    name: str = ""
    #: how many requests it makes sense to have in flight at once (the runner's default)
    default_concurrency: int = 8

    @abc.abstractmethod
    async def generate(self, messages: Sequence[Message], params: GenerationParams, *,
                       rollout_id: str | None = None) -> Completion:
        """Complete the conversation. Raises ModelError when the call failed for good.

        `rollout_id` names the (task, trial, attempt) that asks; only sampling backends and the
        cache use it, so that repeated sampling stays replayable.
        """

    async def aclose(self) -> None:  # noqa: B027 - most backends hold nothing
        """Release connections, processes or model memory."""

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        """The prompt's tokens as this model counts them (its own tokenizer and chat template),
        or None when this backend cannot tell (the token budget then reserves conservatively)."""
        return None


class Layer(LLM):
    """A layer of the model stack over `inner` (the grammar, the per-model limit, the cache): named
    as it, as concurrent as it, counting and closing through it. `forwards`: a backend's extras
    (e.g. LocalLLM.load_info) read through the layer."""

    forwards: bool = True

    def __init__(self, inner: LLM):
        self.inner = inner
        self.name = inner.name
        self.default_concurrency = inner.default_concurrency

    def __getattr__(self, attr: str):
        inner = self.__dict__.get("inner")
        if inner is None or not type(self).forwards:
            raise AttributeError(attr)
        return getattr(inner, attr)

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        return self.inner.count_prompt_tokens(messages)

    async def aclose(self) -> None:
        await self.inner.aclose()


def innermost(llm: LLM) -> LLM:
    """The backend under a model stack's layers (each holds the next as `inner`; at most 8)."""
    for _ in range(8):
        if llm.__dict__.get("inner") is None:
            break
        llm = llm.__dict__["inner"]
    return llm


def call_seed(seed: int | None, rollout_id: str | None) -> int:
    """The seed of one sampled call: the run's seed and the call's place (task, trial, role, step,
    rollout id: all in `rollout_id`), so every sampled call draws its own stream and a rerun
    draws the same ones. A server that honours `seed` (vLLM) would otherwise give trial 2 the
    very answer of trial 1. The local engines use it too (the formula predates this module)."""
    return int(hashlib.sha256(f"{seed}:{rollout_id}".encode()).hexdigest()[:8], 16)


def sampling_seed(params: GenerationParams, rollout_id: str | None) -> int | None:
    """What a backend sends as `seed`: None for a greedy call (nothing to seed)."""
    return None if params.greedy else call_seed(params.seed, rollout_id)


def strip_stop(text: str, stop: Sequence[str]) -> str:
    """Cut `text` at the first stop string (servers that ignore `stop` still get cut here)."""
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s)
            if i != -1:
                cut = min(cut, i)
    return text[:cut]
