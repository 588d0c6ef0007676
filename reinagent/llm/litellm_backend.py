"""Any litellm model string: openai/gpt-4o-mini, anthropic/claude-..., gemini/..., ollama/...."""

from __future__ import annotations

import time
from collections.abc import Sequence

from reinagent.llm.base import LLM, Completion, GenerationParams, sampling_seed, strip_stop
from reinagent.llm.retry import RetryPolicy
from reinagent.llm.wire import ChatCompletion, endpoint_key, is_provider_endpoint, validate_completion
from reinagent.records import Message

NO_KEY = "no-key"  # sent to a keyless server instead of letting litellm find a provider's key


class LiteLLM(LLM):
    default_concurrency = 16

    def __init__(self, model: str, *, api_base: str | None = None, timeout_s: float = 120.0,
                 retry: RetryPolicy | None = None, api_key_env: str | None = None):
        self.name = model
        self.api_base = api_base
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        # Without an explicit key litellm reads the provider's variable (OPENAI_API_KEY,
        # ANTHROPIC_API_KEY, ...) and sends it wherever api_base points. A server the user
        # named gets REINAGENT_SERVER_API_KEY / --api-key-env, or a placeholder that is no secret.
        self._api_key: str | None = None
        own_endpoint = is_provider_endpoint(api_base) and model.startswith("openai/")
        if api_key_env or (api_base and not own_endpoint):
            self._api_key = endpoint_key(api_base, api_key_env) or NO_KEY

    async def generate(
        self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None
    ) -> Completion:
        from reinagent.llm import import_litellm

        litellm = import_litellm()
        kwargs = {
            "model": self.name,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "timeout": self.timeout_s,
            "num_retries": 0,  # tenacity retries, honouring Retry-After
        }
        if params.stop:
            kwargs["stop"] = list(params.stop[:4])
        if params.top_p is not None:
            kwargs["top_p"] = params.top_p
        seed = sampling_seed(params, rollout_id)  # one per sampled call (its place in the run)
        if seed is not None and _takes_seed(litellm, self.name):
            kwargs["seed"] = seed
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        start = time.perf_counter()
        response, attempts = await self.retry.call(lambda: litellm.acompletion(**kwargs), what=f"model {self.name}")
        reply = _validated(response, self.name)
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        try:
            cost = float(litellm.completion_cost(completion_response=response))
        except Exception:  # noqa: BLE001 - models without a price entry
            cost = None
        return Completion(
            text=strip_stop(reply.text, params.stop),
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            latency_s=time.perf_counter() - start,
            cost_usd=cost,
            model=self.name,
            finish_reason=getattr(choice, "finish_reason", None),
            extra={"attempts": attempts} if attempts > 1 else {},
        )


    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        from reinagent.llm.tokens import openai_prompt_tokens

        if not self.name.startswith("openai/"):
            return None  # another provider's tokenizer: the budget reserves conservatively
        return openai_prompt_tokens(self.name.split("/", 1)[1], messages)


def _takes_seed(litellm, model: str) -> bool:
    """Whether the provider accepts `seed` (litellm refuses a parameter a provider lacks)."""
    try:
        return "seed" in (litellm.get_supported_openai_params(model=model) or ())
    except Exception:  # noqa: BLE001 - a model litellm does not know: do not risk the call
        return False


def _validated(response, model: str) -> ChatCompletion:
    """litellm's response checked like a raw server's (no choices, `message: null`)."""
    data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
    return validate_completion(data, f"the server of model {model}")
