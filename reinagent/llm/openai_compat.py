"""Any OpenAI-compatible server (vLLM, llama.cpp server, a proxy): `--model openai/NAME --base-url URL`."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from reinagent.llm.base import LLM, Completion, GenerationParams, strip_stop
from reinagent.llm.retry import RetryPolicy
from reinagent.records import Message


class OpenAICompatLLM(LLM):
    default_concurrency = 16

    def __init__(self, model: str, *, base_url: str, timeout_s: float = 120.0, retry: RetryPolicy | None = None):
        from openai import AsyncOpenAI

        self.name = model
        self.served_name = model.split("/", 1)[1] if model.startswith("openai/") else model
        self.retry = retry or RetryPolicy()
        # The SDK's own retries are off: tenacity retries, so Retry-After and the count are ours.
        self.client = AsyncOpenAI(
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or "EMPTY",
            max_retries=0,
            timeout=timeout_s,
        )

    async def generate(
        self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None
    ) -> Completion:
        kwargs = {
            "model": self.served_name,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
        }
        if params.stop:
            kwargs["stop"] = list(params.stop[:4])  # the OpenAI API takes at most 4
        if params.top_p is not None:
            kwargs["top_p"] = params.top_p
        if params.seed is not None and not params.greedy:
            kwargs["seed"] = params.seed
        start = time.perf_counter()
        response, attempts = await self.retry.call(
            lambda: self.client.chat.completions.create(**kwargs), what=f"model {self.name}"
        )
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=strip_stop(choice.message.content or "", params.stop),
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            latency_s=time.perf_counter() - start,
            cost_usd=None,  # a self-hosted server has no price list
            model=self.name,
            finish_reason=choice.finish_reason,
            extra={"attempts": attempts} if attempts > 1 else {},
        )

    async def aclose(self) -> None:
        await self.client.close()
