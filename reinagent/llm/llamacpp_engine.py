"""`--local-engine llamacpp`: a `local` model (the embedded SmolLM2, the packaged Qwen models, a
GGUF path) decoded by llama.cpp's server, started by the run as a child on a free loopback port
and stopped with it. The requests are the openai-compatible backend's (openai_compat.py).

Why a second engine. perf/engines.py (docs/engines_output.txt, Intel with AMX, 2 cores) measured
on Qwen2.5-Coder-1.5B: llama.cpp decodes one stream 1.75x faster than OpenVINO GenAI (13.8 vs
7.9 tok/s) and is behind at 8 in flight (21.7 vs 25.0); and its first greedy token is that of the
file's own weights (transformers f32 on the de-quantised GGUF) on 9 of 10 HumanEval prompts,
OpenVINO's on 2 of 10 (perf/engine_reference.py). Reading the file as it is written matters more
to a result than a 15% throughput gain at full batch, so the Qwen runs' scripts can choose it; the
default stays OpenVINO, whose batch figures, prefix cache and constrained decoding the rest of the
project relies on. `--local-engine auto` measures both on the CPU at hand and picks the faster
(reinagent/llm/engine_choice.py): on an AMD Zen 4 it was llama.cpp until the engine's Q4 matrices
were split (reinagent/llm/gguf_exact.py), OpenVINO at 8 in flight since.

What differs from the OpenVINO engine: no constrained decoding (llama.cpp takes GBNF grammars,
not the regular expressions reinagent.llm.constrained writes), the chat template is the GGUF's own
as llama.cpp renders it, and sampling follows llama.cpp's sampler chain (same seed, other draws).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Sequence
from typing import Any

from reinagent.llm.base import LLM, Completion, GenerationParams
from reinagent.llm.llamacpp import LlamaServer, ServedModel, ServerDied, resolve
from reinagent.records import Message

ENGINE = "llamacpp"
# a local server's queue is the run's own: a request may wait for all the slots ahead of it
REQUEST_TIMEOUT_S = 3600.0

_servers: dict[tuple[str, int], list[Any]] = {}  # (file, slots) -> [LlamaServer, users]
_servers_lock = threading.Lock()


def _acquire(served: ServedModel, parallel: int) -> LlamaServer:
    """The running server for this file (one per process, shared by the actor and the
    reflector), started on first use; `_release` stops it after its last user."""
    key = (str(served.path), parallel)
    with _servers_lock:
        entry = _servers.get(key)
        if entry is None or not entry[0].alive():
            print(f"starting llama.cpp's server for {served.path.name} ({served.checked}; {parallel} slots)",
                  file=sys.stderr, flush=True)
            # llama.cpp splits its context among the slots: past 8, give each the 4096 tokens 8 get
            # of the model's 32768 (a REFLEXION retry's prompt carries the last program and its feedback)
            ctx = parallel * 4096 if parallel > 8 else None
            entry = _servers[key] = [LlamaServer(served, parallel=parallel, ctx_size=ctx).start(), 0]
        entry[1] += 1
        return entry[0]


def _release(server: LlamaServer, parallel: int) -> None:
    key = (str(server.model.path), parallel)
    with _servers_lock:
        entry = _servers.get(key)
        if entry is None or entry[0] is not server:
            server.stop()
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _servers[key]
            server.stop()


class LlamaCppLLM(LLM):
    """A `local` model string served by llama.cpp (see the module's doc)."""

    supports_regex = False  # reinagent.llm.constrained writes regular expressions; llama.cpp reads GBNF
    precision = None  # the file as it is: there is no fast/exact choice to make

    def __init__(self, model: str, *, parallel: int | None = None):
        from reinagent.errors import env_count

        self.name = model
        self.served = resolve(model)  # checks the file now: a bad path or hash is one line before the run
        self.source = self.served.path
        self.parallel = parallel or env_count("REINAGENT_LOCAL_BATCH", 8)
        self.default_concurrency = self.parallel
        self._server: LlamaServer | None = None
        self._client: Any = None
        self._start_lock = threading.Lock()
        self.info: dict[str, Any] = {}

    @property
    def load_info(self) -> dict[str, Any]:
        return dict(self.info)

    def _start(self) -> None:
        with self._start_lock:
            if self._server is not None:
                return
            from reinagent.llm.openai_compat import OpenAICompatLLM

            server = _acquire(self.served, self.parallel)
            self._client = OpenAICompatLLM(f"openai/{self.served.name}", base_url=server.base_url,
                                           timeout_s=REQUEST_TIMEOUT_S, api_key_env=None)
            self.info = {"source": str(self.served.path), "engine": ENGINE, "slots": self.parallel,
                         "checked": self.served.checked}
            self._server = server

    async def generate(self, messages: Sequence[Message], params: GenerationParams, *,
                       rollout_id: str | None = None) -> Completion:
        if self._server is None:
            await asyncio.to_thread(self._start)
        try:
            completion = await self._client.generate(messages, params, rollout_id=rollout_id)
        except Exception:
            if self._server is not None and not self._server.alive():  # the child died: say so, with its log
                raise ServerDied(self._server.death("while serving")) from None
            raise
        completion.model = self.name
        return completion

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int | None:
        """The prompt's tokens as the server renders and tokenizes it (its own chat template)."""
        import httpx

        self._start()
        root = self._server.base_url.removesuffix("/v1")
        try:
            rendered = httpx.post(f"{root}/apply-template", timeout=60.0,
                                  json={"messages": [{"role": m.role, "content": m.content} for m in messages]})
            tokens = httpx.post(f"{root}/tokenize", timeout=60.0,
                                json={"content": rendered.json()["prompt"], "add_special": True, "parse_special": True})
            return len(tokens.json()["tokens"])
        except (httpx.HTTPError, KeyError, ValueError):
            return None  # the caller falls back to its conservative estimate

    async def aclose(self) -> None:
        client, server = self._client, self._server
        self._client = self._server = None
        if client is not None:
            await client.aclose()
        if server is not None:
            await asyncio.to_thread(_release, server, self.parallel)


def engine_available() -> str | None:
    """None when llama.cpp's server can be started here, else the one-line reason and fix."""
    from reinagent.errors import ReinagentError
    from reinagent.llm.llamacpp import server_binary

    try:
        server_binary()
    except ReinagentError as err:
        return str(err)
    return None

