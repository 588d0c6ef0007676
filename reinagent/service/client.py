"""HttpEnv: an environment on an env server, behind the same Env API as the in-process ones.

Retries are for failures that cannot have changed the server's state: a connection that was never
made (server down or restarting) and 503 (session cap; honouring Retry-After). A request that
reached the server is never sent twice: a step is not idempotent. Every retry loop is bounded in
total time ($REINAGENT_ENV_RETRY_S, default 30 s), after which the episode fails with a clear
error and the runner records it against that one (task, trial).

Agents step through aiohttp (pooled keep-alive connections; about half httpx's cost per request
on loopback, which is most of a HotpotQA step); the sync API (Gymnasium, scripts) uses httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import httpx
from tenacity import AsyncRetrying, Retrying, retry_if_exception, stop_after_delay, wait_exponential

from reinagent.env import Env, StepResult
from reinagent.text import clipped, valid_data

TOKEN_ENV = "REINAGENT_ENV_TOKEN"
RETRY_ENV = "REINAGENT_ENV_RETRY_S"
DEFAULT_RETRY_S = 30.0
# Reads wait long: loading an ALFWorld game under load, or a planner step, takes minutes.
READ_TIMEOUT_S = 1800.0
CONNECT_TIMEOUT_S = 5.0
# Idle pooled connections are dropped after 5 s, well before the server's 75 s keep-alive ends,
# so a request is never sent on a connection the server is closing.
KEEPALIVE_S = 5.0
MAX_CONNECTIONS = 256
# What the client takes from a server it may not trust: an answer is read up to MAX_ANSWER_BYTES
# (more is an error, and the connection is dropped), an observation or an info text is clipped to
# what a record and a report can hold, and an error's detail to a line. A 200 MB error body or a
# 300 MB observation once became a 629 MB records.jsonl and a 420 MB report.html.
MAX_ANSWER_BYTES = 8 << 20
MAX_OBSERVATION_CHARS = 100_000  # a long search result is ~10 KB; a coder's feedback a few KB
MAX_INFO_CHARS = 20_000  # each text in `info`
MAX_DETAIL_CHARS = 500  # an error answer's detail
# Failures before the request was sent: safe to retry.
CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, aiohttp.ClientConnectorError,
                  aiohttp.ConnectionTimeoutError)
TRANSPORT_ERRORS = (httpx.HTTPError, aiohttp.ClientError, asyncio.TimeoutError)


class EnvServiceError(RuntimeError):
    """The env server answered with an error, or could not be reached within the retry budget."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _Busy(Exception):
    """503 from the server: retried after its Retry-After."""

    def __init__(self, retry_after: float, message: str):
        super().__init__(message)
        self.retry_after = retry_after


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, (*CONNECT_ERRORS, _Busy))


def _wait_within(budget_s: float):
    """Exponential backoff, or the server's Retry-After when longer, but never past the end of
    the retry budget: a `Retry-After: 1e9` must not stall an episode beyond it."""
    def wait(state) -> float:
        exc = state.outcome.exception() if state.outcome else None
        backoff = wait_exponential(multiplier=0.05, max=2.0)(state)
        wanted = max(backoff, exc.retry_after) if isinstance(exc, _Busy) else backoff
        return max(0.0, min(wanted, budget_s - state.seconds_since_start))
    return wait


class EnvClient:
    """One server: pooled connections (async and sync), the auth header, bounded retries.

    `_asend`/`_send` are the only places that touch the network (tests replace them to count)."""

    def __init__(self, url: str, *, token: str | None = None, retry_s: float | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.url = url.rstrip("/")
        token = token or os.environ.get(TOKEN_ENV)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.retry_s = float(os.environ.get(RETRY_ENV, DEFAULT_RETRY_S)) if retry_s is None else retry_s
        self.transport = transport  # for the sync client: tests count requests through an httpx.MockTransport
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sync: httpx.Client | None = None

    # --- the network ----------------------------------------------------------------------------------

    async def _asend(self, method: str, path: str, payload: dict | None) -> tuple[int, Mapping[str, str], bytes]:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # a session's connections belong to one event loop
            connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, keepalive_timeout=KEEPALIVE_S)
            timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S, sock_read=READ_TIMEOUT_S)
            self._session = aiohttp.ClientSession(headers=self.headers, connector=connector, timeout=timeout)
            self._loop = loop
        async with self._session.request(method, self.url + path, json=payload) as response:
            self._check_size(path, response.status, response.content_length)
            body = bytearray()
            async for chunk in response.content.iter_chunked(1 << 16):
                body += chunk
                self._check_size(path, response.status, len(body))
            return response.status, response.headers, bytes(body)

    def _send(self, method: str, path: str, payload: dict | None) -> tuple[int, Mapping[str, str], bytes]:
        if self._sync is None:
            self._sync = httpx.Client(
                headers=self.headers, transport=self.transport,
                timeout=httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S, write=30.0, pool=READ_TIMEOUT_S),
                limits=httpx.Limits(max_connections=MAX_CONNECTIONS, keepalive_expiry=KEEPALIVE_S))
        with self._sync.stream(method, self.url + path, json=payload) as response:
            declared = response.headers.get("content-length", "")
            self._check_size(path, response.status_code, int(declared) if declared.isdigit() else None)
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                self._check_size(path, response.status_code, len(body))
            return response.status_code, response.headers, bytes(body)

    def _check_size(self, path: str, status: int, size: int | None) -> None:
        if size is not None and size > MAX_ANSWER_BYTES:  # not retried: the server did answer
            raise EnvServiceError(f"env server {self.url}{path} answered {status} with more than "
                                  f"{MAX_ANSWER_BYTES >> 20} MiB; refused (answers are read up to that)", status)

    # --- answers and errors ---------------------------------------------------------------------------

    def _check(self, path: str, status: int, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
        if status == 503:
            try:
                retry_after = float(headers.get("retry-after") or 1)
            except ValueError:
                retry_after = 1.0
            if not 0 <= retry_after < math.inf:  # `inf`, `nan`, `-5`: the server's mistake, not ours to wait for
                retry_after = 1.0
            raise _Busy(retry_after, self._error_text(path, status, body))
        if status != 200:
            raise EnvServiceError(self._error_text(path, status, body), status)
        try:
            data = valid_data(json.loads(body))  # a `\\ud83d` escape must not reach the records
        except (ValueError, RecursionError):
            raise EnvServiceError(f"env server {self.url}{path} answered 200 with a body that is not JSON") from None
        if not isinstance(data, dict):
            raise EnvServiceError(f"env server {self.url}{path} answered {type(data).__name__}, not a JSON object")
        return data

    def _error_text(self, path: str, status: int, body: bytes) -> str:
        try:
            detail = str(json.loads(body).get("error") or body.decode(errors="replace"))
        except (ValueError, AttributeError, RecursionError):
            detail = body[:MAX_DETAIL_CHARS].decode(errors="replace")
        return f"env server {self.url}{path} answered {status}: {clipped(detail, MAX_DETAIL_CHARS, 'error')}"

    def _give_up(self, path: str, err: BaseException, attempts: int, started: float) -> EnvServiceError:
        # say what was actually done: a start-up check makes one attempt, an episode retries
        # until retry_s has passed (a "retried for 30 s" after one 2 s attempt was a lie)
        if attempts <= 1:
            tried = "one attempt, not retried"
        else:
            tried = (f"{attempts} attempts in {time.monotonic() - started:.1f} s; retries stop after "
                     f"{self.retry_s:g} s, ${RETRY_ENV}")
        if isinstance(err, _Busy):
            return EnvServiceError(f"{err} (still busy: {tried})", 503)
        if isinstance(err, CONNECT_ERRORS):
            return EnvServiceError(f"env server {self.url} unreachable ({type(err).__name__}: {err}; {tried})")
        return EnvServiceError(f"env server {self.url}{path} failed: {type(err).__name__}: {err} "
                               "(the request may have reached the server; not retried)")

    async def arequest(self, method: str, path: str, payload: dict | None = None, *, retry: bool = True) -> dict:
        started, attempts = time.monotonic(), 0
        try:
            budget = self.retry_s if retry else 0
            async for attempt in AsyncRetrying(stop=stop_after_delay(budget), wait=_wait_within(budget),
                                               retry=retry_if_exception(_retryable), reraise=True):
                attempts += 1
                with attempt:
                    return self._check(path, *await self._asend(method, path, payload))
        except (*TRANSPORT_ERRORS, _Busy) as err:
            raise self._give_up(path, err, attempts, started) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def request(self, method: str, path: str, payload: dict | None = None, *, retry: bool = True) -> dict:
        started, attempts = time.monotonic(), 0
        try:
            budget = self.retry_s if retry else 0
            for attempt in Retrying(stop=stop_after_delay(budget), wait=_wait_within(budget),
                                    retry=retry_if_exception(_retryable), reraise=True):
                attempts += 1
                with attempt:
                    return self._check(path, *self._send(method, path, payload))
        except (*TRANSPORT_ERRORS, _Busy) as err:
            raise self._give_up(path, err, attempts, started) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()

    def close(self) -> None:
        client, self._sync = self._sync, None
        if client is not None:
            client.close()


def finite_reward(value: Any) -> float:
    """A step's reward as a float; NaN or an infinity (JSON `1e999` reads as one) is the server's
    error: a record could not hold it (JSON has no such numbers) and no score can mean it."""
    reward = float(value)
    if not math.isfinite(reward):
        raise EnvServiceError(f"env server answered a non-finite reward ({value!r}); rewards must be finite numbers")
    return reward


def _observation(value: Any) -> str:
    return clipped(str(value), MAX_OBSERVATION_CHARS, "observation")


def _info(value: Any) -> dict[str, Any]:
    """The step's info with every text clipped (the answer an agent gives stays whole below that)."""
    def clip(item: Any) -> Any:
        if isinstance(item, str):
            return clipped(item, MAX_INFO_CHARS, "info text")
        if isinstance(item, list):
            return [clip(x) for x in item]
        if isinstance(item, dict):
            return {clipped(str(k), 200, "key"): clip(v) for k, v in item.items()}
        return item
    return clip(dict(value or {}))


def _step_result(data: dict) -> StepResult:
    try:
        obs = data["observation"] if "observation" in data else data["state"]
        terminated = bool(data.get("terminated", data.get("done", False)))
        return (_observation(obs), finite_reward(data.get("reward", 0.0)), terminated,
                bool(data.get("truncated", False)), _info(data.get("info")))
    except (KeyError, TypeError, ValueError) as err:
        raise EnvServiceError(f"env server step answer is malformed ({type(err).__name__}: {err})") from None


class HttpEnv(Env):
    """One session on the server for one task: made on the first reset or step, closed by close().

    `options` are the environment's own settings (agent, max_steps, ...), sent with /create.
    """

    def __init__(self, client: EnvClient, task_id: str, *, options: dict[str, Any] | None = None):
        self.client, self.task_id = client, task_id
        self.options = {k: v for k, v in (options or {}).items() if v is not None}
        self.session_id: str | None = None
        self._step_options: dict[str, Any] = {}

    def _create_payload(self) -> dict:
        payload: dict[str, Any] = {"task_id": self.task_id}
        if self.options:
            payload["options"] = self.options
        return payload

    def _step_payload(self, action: str) -> dict:
        payload: dict[str, Any] = {"id": self.session_id, "action": action}
        if self._step_options:
            payload["options"], self._step_options = self._step_options, {}
        return payload

    def set_internal_tests(self, tests: list[str]) -> None:
        """The programming environments' hook (the coder agent's tests), sent with the next step."""
        self._step_options["internal_tests"] = list(tests)

    # --- async (what agents use, through reinagent.env.areset/astep/aclose) ----------------------

    async def areset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        if self.session_id is None:
            self.session_id = (await self.client.arequest("POST", "/create", self._create_payload()))["id"]
        data = await self.client.arequest("POST", "/reset", {"id": self.session_id, "seed": seed})
        return _observation(data.get("observation", data.get("state", ""))), _info(data.get("info"))

    async def astep(self, action: str) -> StepResult:
        if self.session_id is None:
            self.session_id = (await self.client.arequest("POST", "/create", self._create_payload()))["id"]
        return _step_result(await self.client.arequest("POST", "/step", self._step_payload(action)))

    async def aclose(self) -> None:
        session, self.session_id = self.session_id, None
        if session is not None:
            # best effort, no retries: a dead server's sessions died with it (or time out there)
            with contextlib.suppress(EnvServiceError):
                await self.client.arequest("POST", "/close", {"id": session}, retry=False)

    # --- sync (Gymnasium, scripts) -----------------------------------------------------------------

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        if self.session_id is None:
            self.session_id = self.client.request("POST", "/create", self._create_payload())["id"]
        data = self.client.request("POST", "/reset", {"id": self.session_id, "seed": seed})
        return _observation(data.get("observation", data.get("state", ""))), _info(data.get("info"))

    def step(self, action: str) -> StepResult:
        if self.session_id is None:
            self.session_id = self.client.request("POST", "/create", self._create_payload())["id"]
        return _step_result(self.client.request("POST", "/step", self._step_payload(action)))

    def close(self) -> None:
        session, self.session_id = self.session_id, None
        if session is not None:
            with contextlib.suppress(EnvServiceError):
                self.client.request("POST", "/close", {"id": session}, retry=False)
