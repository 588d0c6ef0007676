"""Any OpenAI-compatible server (vLLM, llama.cpp server, a proxy): `--model openai/NAME --base-url URL`.

Requests go out over aiohttp rather than the openai SDK. The SDK's httpx/httpcore stack spends
about 7 ms of CPU per request with 100 requests in flight (its connection pool rescans every
connection for every request event), which at 100 episodes made the framework, not the model,
the bottleneck; aiohttp spends about 0.2 ms. The wire format used is the stable core of
`POST /chat/completions`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from reinagent.llm.base import LLM, Completion, GenerationParams, sampling_seed, strip_stop
from reinagent.llm.retry import RetryPolicy
from reinagent.llm.wire import ChatCompletion, endpoint_key, parse_body, validate_completion
from reinagent.records import Message


class HTTPStatusError(Exception):
    """A non-2xx answer. `status_code` and `response.headers` are what retry.py reads to decide
    whether to retry and how long the server asked us to wait (Retry-After)."""

    def __init__(self, status_code: int, message: str, headers: Mapping[str, str]):
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.response = _Response(headers)


class _Response:
    def __init__(self, headers: Mapping[str, str]):
        self.headers = headers
        self.status_code: int | None = None


class ServerConnectionError(ConnectionError):
    """The connection failed or dropped mid-request (transient: retried)."""


class OpenAICompatLLM(LLM):
    default_concurrency = 16

    def __init__(self, model: str, *, base_url: str, timeout_s: float = 120.0, retry: RetryPolicy | None = None,
                 api_key_env: str | None = None):
        self.name = model
        self.served_name = model.split("/", 1)[1] if model.startswith("openai/") else model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        # OPENAI_API_KEY only for OpenAI's own endpoint; any other server gets
        # REINAGENT_SERVER_API_KEY or the variable --api-key-env names (see wire.endpoint_key).
        key = endpoint_key(base_url, api_key_env)
        self._headers = {"Content-Type": "application/json"}
        if key and not urlsplit(base_url).username:  # user:password@ in the URL is aiohttp's basic auth
            self._headers["Authorization"] = f"Bearer {key}"
        # A session belongs to the event loop it was made in, so it is made on first use.
        self._session: Any = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def _payload(self, messages: Sequence[Message], params: GenerationParams,
                 rollout_id: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.served_name,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
        }
        if params.stop:
            payload["stop"] = list(params.stop[:4])  # the OpenAI API takes at most 4
        if params.top_p is not None:
            payload["top_p"] = params.top_p
        seed = sampling_seed(params, rollout_id)  # one per sampled call (its place in the run)
        if seed is not None:
            payload["seed"] = seed
        return payload

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        from reinagent.llm.tokens import openai_prompt_tokens

        return openai_prompt_tokens(self.served_name, messages)

    async def generate(
        self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None
    ) -> Completion:
        payload = self._payload(messages, params, rollout_id)
        start = time.perf_counter()
        reply, attempts = await self.retry.call(lambda: self._post(payload), what=f"model {self.name}")
        usage = reply.usage
        return Completion(
            text=strip_stop(reply.text, params.stop),
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_s=time.perf_counter() - start,
            cost_usd=None,  # a self-hosted server has no price list
            model=self.name,
            finish_reason=reply.choices[0].finish_reason,
            extra={"attempts": attempts} if attempts > 1 else {},
        )

    async def _post(self, payload: dict[str, Any]) -> ChatCompletion:
        """One attempt. Validated here, inside the retry: a cut body is retried like a dropped
        connection, a malformed one (MalformedResponseError) is not."""
        import aiohttp

        session = self._client()
        what = f"the server of model {self.name}"
        try:
            async with session.post(self.url, json=payload, headers=self._headers) as response:
                if response.status >= 400:
                    text = await response.text()
                    raise HTTPStatusError(response.status, _error_message(text), response.headers)
                # not .json(): it sniffs the charset per call
                data = parse_body(await response.read(), response.headers.get("Content-Type", ""), what)
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as err:
            raise ServerConnectionError(f"{type(err).__name__}: {err}") from None
        error = data.get("error")
        if not data.get("choices") and isinstance(error, dict) and isinstance(error.get("code"), int):
            # a 200 that carries an error status (some gateways): retried when that status is
            raise HTTPStatusError(error["code"], str(error.get("message", ""))[:500], {})
        return validate_completion(data, what)

    def _client(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._session_loop is not loop or self._session.closed:
            # limit=0: no cap on connections here; --max-model-concurrency is the cap.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            )
            self._session_loop = loop
        return self._session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._session_loop is asyncio.get_running_loop():
            await session.close()


def _error_message(text: str) -> str:
    """The server's own error message when it sent the OpenAI error shape, else the body's start."""
    try:
        data = json.loads(text)
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if isinstance(error, str):
            return error[:500]
    except ValueError:
        pass
    return text[:500]
