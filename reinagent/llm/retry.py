"""Retries for hosted and served models: exponential backoff with jitter, honouring Retry-After.

Transient failures (HTTP 408/409/429/5xx, timeouts, dropped connections, a body cut short) are
retried; anything else, or a transient failure that outlasts the attempts, becomes a ModelError
that the runner records against that one (task, trial).
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from reinagent.errors import ModelError
from reinagent.redact import redact

T = TypeVar("T")
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529}


def status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def is_transient(exc: BaseException) -> bool:
    import httpx
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, httpx.TransportError, TimeoutError,
                        ConnectionError)):
        return True
    status = status_of(exc)
    if status is not None:
        return status in RETRY_STATUS
    name = type(exc).__name__
    # litellm wraps some transport failures in its own classes without a status code
    return name in {"Timeout", "APIConnectionError", "ServiceUnavailableError", "InternalServerError", "RateLimitError"}


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds the server asked us to wait (Retry-After / retry-after-ms), if it said."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class RetryPolicy:
    """How often and how patiently to retry; the environment can tune it for a whole run."""

    def __init__(self, attempts: int | None = None, initial_s: float | None = None, max_s: float | None = None):
        self.attempts = attempts or int(os.environ.get("REINAGENT_RETRY_ATTEMPTS", "6"))
        self.initial_s = initial_s if initial_s is not None else float(os.environ.get("REINAGENT_RETRY_INITIAL_S", "1"))
        self.max_s = max_s if max_s is not None else float(os.environ.get("REINAGENT_RETRY_MAX_S", "60"))

    def wait(self, state: RetryCallState) -> float:
        backoff = self.initial_s * 2 ** (state.attempt_number - 1)
        backoff = random.uniform(0, min(backoff, self.max_s))  # "full jitter"
        asked = retry_after(state.outcome.exception() if state.outcome else None)
        return min(max(backoff, asked or 0.0), self.max_s)

    async def call(self, fn: Callable[[], Awaitable[T]], *, what: str) -> tuple[T, int]:
        """Run `fn` with retries; returns its result and how many attempts it took."""
        attempts = 0
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self.attempts),
                wait=self.wait,
                retry=retry_if_exception(is_transient),
                reraise=True,
            ):
                with attempt:
                    attempts += 1
                    result = await fn()
            return result, attempts
        except Exception as err:  # noqa: BLE001 - every failure becomes one clear ModelError
            kind = "gave up after retries" if is_transient(err) else "failed"
            # A malformed reply keeps its class: the runner and the tests tell it apart.
            cls = type(err) if isinstance(err, ModelError) else ModelError
            raise cls(redact(f"{what} {kind} ({attempts} attempt(s)): {type(err).__name__}: {err}")) from None
