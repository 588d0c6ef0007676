"""The response cache: a model call made once is never paid for again.

A request's key is the SHA-256 of its canonical form: the model's identity (model string,
endpoint, and for local models a fingerprint of the weights), the messages, the sampling
parameters that can change the answer, and, only when sampling is not greedy, the rollout id
(task/trial/call), so repeated sampling stays replayable.

Scope (`--cache-scope`, `scoped_identity`): with `run`, the default, the run's identity is part
of the key, so a run is only ever answered from its own earlier calls (a resume, a retried error)
and its tokens, cost and time are what it paid itself; a cost comparison between runs is honest,
and sampled calls never reuse another run's samples. With `shared`, greedy calls are shared by
every run that makes them (an identical re-run, or trial 1 of another strategy on the same tasks)
and sampled calls by every run that replays the same rollout ids and seed: savings you ask for.

What is *not* in the key: API keys (they never enter the canonical request), and the user,
password and query string of the endpoint URL (where credentials hide). The endpoint's scheme,
host, port and path *are* in it: a self-hosted server names its model whatever it was told to,
so `openai/default` on two servers may be two different models, and a wrong answer served from
the cache is worse than a repeated call.

Entries live in one SQLite file in WAL mode (`<cache dir>/responses.sqlite3`): many readers and
one writer at a time across processes, each write a tiny transaction, the first answer for a key
kept. Within a process, identical requests in flight at once are coalesced into one model call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from reinagent.llm.base import LLM, Completion, GenerationParams, Layer
from reinagent.records import Message
from reinagent.text import valid_data

log = logging.getLogger("reinagent")

CACHE_VERSION = 1  # bump when the canonical request or the stored response changes shape
DB_NAME = "responses.sqlite3"


def endpoint_of(base_url: str | None) -> str | None:
    """The endpoint as it goes into the key: scheme://host:port/path, with no user, password,
    query or fragment (an API key sometimes rides in `?key=` or `user:key@`)."""
    if not base_url:
        return None
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def weights_fingerprint(path: str) -> list[list[Any]]:
    """Name, size and modification time of a local model's files: a model retrained into the
    same directory (distillation does that) must not be answered from the old model's entries."""
    root = Path(path).expanduser().resolve()
    files = [root] if root.is_file() else sorted(p for p in root.iterdir() if p.is_file()) if root.is_dir() else []
    return [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]


def model_identity(model: str, base_url: str | None = None, weights: str | Path | None = None) -> dict[str, Any]:
    """Everything besides the request that decides which model answers it. `weights` is the
    file or directory a local model loads (the embedded model's GGUF for `local`)."""
    identity: dict[str, Any] = {"model": model.strip(), "endpoint": endpoint_of(base_url)}
    if weights is None and model.startswith("local:"):
        weights = model.split(":", 1)[1]
    if weights is not None:
        identity["weights"] = weights_fingerprint(str(weights))
    return identity


CACHE_SCOPES = ("run", "shared")


def run_cache_key(created_at: float, hostname: str | None) -> str:
    """A run's identity for the cache: from its spec, so it survives moving the run directory
    and is the same for every resume of the run."""
    return f"{created_at:.6f}@{hostname or ''}"


def scoped_identity(identity: dict[str, Any], scope: str, run_key: str | None) -> dict[str, Any]:
    """The model identity of the key, narrowed to one run when the scope is `run`. A run-scoped
    call without a run key (an LLM built outside a run) is given none: it shares nothing."""
    if scope not in CACHE_SCOPES:
        raise ValueError(f"unknown cache scope {scope!r}; valid: run or shared")
    if scope == "shared":
        return identity
    return {**identity, "run": run_key or f"unnamed-{id(identity)}-{time.time_ns()}"}


def canonical_request(
    identity: dict[str, Any], messages: Sequence[Message], params: GenerationParams, rollout_id: str | None
) -> dict[str, Any]:
    """The request as the key sees it. Greedy decoding leaves out what cannot change its answer
    (seed, top_p) and the rollout id, so equal prompts share one entry wherever they come from."""
    sampling: dict[str, Any] = {
        "max_tokens": params.max_tokens, "temperature": params.temperature, "stop": list(params.stop),
    }
    if not params.greedy:
        sampling.update(top_p=params.top_p, seed=params.seed, rollout_id=rollout_id)
    regex = getattr(params, "regex", None)  # a constrained call (reinagent.llm.constrained): another answer
    if regex:
        sampling["regex"] = regex
    return {
        "v": CACHE_VERSION,
        **identity,
        "messages": [[m.role, m.content] for m in messages],
        "params": sampling,
    }


def request_key(
    identity: dict[str, Any], messages: Sequence[Message], params: GenerationParams, rollout_id: str | None = None
) -> str:
    canonical = canonical_request(identity, messages, params, rollout_id)
    data = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate in a prompt still gives a key (valid text's key is unchanged)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseStore:
    """Key -> stored completion, in one SQLite file shared by every process that opens it."""

    def __init__(self, directory: Path):
        self.path = Path(directory).expanduser() / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection per store, used from the event loop thread; the lock covers the odd
        # caller from another thread. WAL lets other processes read while one writes.
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._execute("PRAGMA journal_mode=WAL")
        # NORMAL: no fsync per commit. A power cut may lose the last few entries (they are
        # recomputed), never corrupt the file; a killed process loses nothing.
        self._execute("PRAGMA synchronous=NORMAL")
        self._execute(
            "CREATE TABLE IF NOT EXISTS responses ("
            "key TEXT PRIMARY KEY, model TEXT NOT NULL, created REAL NOT NULL, response TEXT NOT NULL)"
        )

    def _execute(self, sql: str, args: tuple = ()) -> list[tuple]:
        """Run one statement. SQLite answers "database is locked" at once, without waiting out
        the busy timeout, in a few races between processes (two of them creating the file or
        switching it to WAL together), so those are retried here for up to ~10 s."""
        for attempt in range(200):
            try:
                with self._lock:
                    return self._db.execute(sql, args).fetchall()
            except sqlite3.OperationalError as err:
                if attempt == 199 or not any(w in str(err).lower() for w in ("locked", "busy")):
                    raise
                time.sleep(0.05)
        return []

    def get(self, key: str) -> dict[str, Any] | None:
        rows = self._execute("SELECT response FROM responses WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def put(self, key: str, model: str, response: dict[str, Any]) -> None:
        # OR IGNORE: when two processes race on one key, the first answer stays, so every later
        # replay sees the same text.
        self._execute(
            "INSERT OR IGNORE INTO responses (key, model, created, response) VALUES (?, ?, ?, ?)",
            (key, model, time.time(), json.dumps(valid_data(response), ensure_ascii=False)),
        )

    def __len__(self) -> int:
        return self._execute("SELECT COUNT(*) FROM responses")[0][0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


@dataclass
class CacheStats:
    hits: int = 0  # answered from disk
    coalesced: int = 0  # answered by an identical request already in flight
    misses: int = 0  # answered by the model


class CachedLLM(Layer):
    """Wraps a backend: answers from the store when it can, else asks the backend and stores."""

    def __init__(self, inner: LLM, store: ResponseStore, identity: dict[str, Any]):
        super().__init__(inner)
        self.store = store
        self.identity = identity
        self.stats = CacheStats()
        self._inflight: dict[str, asyncio.Future[Completion]] = {}
        self._broken = False  # a store that failed once is bypassed: the cache never ends a run

    async def generate(
        self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None
    ) -> Completion:
        if self._broken or (not params.greedy and rollout_id is None):
            # A sampled call with no rollout id has no replayable identity: never cache it.
            return await self.inner.generate(messages, params, rollout_id=rollout_id)
        start = time.perf_counter()
        key = request_key(self.identity, messages, params, rollout_id)
        while True:
            stored = self._get(key)
            if stored is not None:
                self.stats.hits += 1
                return _hit(stored, time.perf_counter() - start)
            pending = self._inflight.get(key)
            if pending is None:
                break
            try:
                completion = await asyncio.shield(pending)
            except asyncio.CancelledError:
                if pending.cancelled():
                    continue  # the call we waited on was cancelled, not us: make it ourselves
                raise
            self.stats.coalesced += 1
            return _hit(_stored_form(completion), time.perf_counter() - start)
        return await self._call(key, messages, params, rollout_id)

    async def _call(
        self, key: str, messages: Sequence[Message], params: GenerationParams, rollout_id: str | None
    ) -> Completion:
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            completion = await self.inner.generate(messages, params, rollout_id=rollout_id)
        except Exception as err:  # followers waiting on this call fail the same way
            future.set_exception(err)
            future.exception()  # mark retrieved: nobody may be waiting, and that is fine
            raise
        except BaseException:  # cancelled (or interrupted): followers make the call themselves
            future.cancel()
            raise
        finally:
            self._inflight.pop(key, None)
        self.stats.misses += 1
        self._put(key, completion)
        future.set_result(completion)
        return completion

    def _get(self, key: str) -> dict[str, Any] | None:
        try:
            return self.store.get(key)
        except (sqlite3.Error, ValueError) as err:
            self._disable(err)
            return None

    def _put(self, key: str, completion: Completion) -> None:
        if self._broken:
            return
        try:
            self.store.put(key, completion.model or self.name, _stored_form(completion))
        except sqlite3.Error as err:
            self._disable(err)

    def _disable(self, err: Exception) -> None:
        log.warning("response cache %s disabled for this run: %s", self.store.path, err)
        self._broken = True

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.store.close()


def _stored_form(c: Completion) -> dict[str, Any]:
    return {
        "text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
        "latency_s": c.latency_s, "cost_usd": c.cost_usd, "model": c.model, "finish_reason": c.finish_reason,
    }


def _hit(stored: dict[str, Any], waited_s: float) -> Completion:
    """A hit keeps the original token counts for reference; `cached=True` makes usage count it
    as a hit costing nothing, and its latency is the time this caller actually waited."""
    return Completion(text=stored["text"], prompt_tokens=stored.get("prompt_tokens", 0),
                      completion_tokens=stored.get("completion_tokens", 0), latency_s=waited_s,
                      cost_usd=stored.get("cost_usd"), cached=True, model=stored.get("model", ""),
                      finish_reason=stored.get("finish_reason"), extra={"original_latency_s": stored.get("latency_s")})
