"""Checks before the first episode that need something running: can this run work at all?

`run` and `resume` call `preflight(plan.checks)` after the settings are resolved and before a
run directory is made or an episode starts, so a dead endpoint or an unknown provider costs
seconds and one line (exit 2), not a run of errored trials. A plan whose models and executor ask
nothing running (scripted, embedded, local, hf models on the local executor) has no checks here:

- every model endpoint gets one cheap request: `GET {base_url}/models` for an OpenAI-compatible
  server (any HTTP answer but 401/403 means it is there: some servers have no /models), a
  connection check for a litellm provider on this machine (ollama, LM Studio, a --base-url);
  hosted providers are checked for a known provider name (their keys by `check_credentials`);
- a `--executor ray` cluster is joined.

What needs nothing running is checked while resolving (plan.resolve): the models' flags, keys and
extras (`llm.check_models`), the benchmark's extra, its sandbox and its env server
(`Benchmark.check_config`, `service.served`).

The embedded model loads in `warm_up`, inside the run's event loop, before trial 1's progress bar
exists: loading is printed on its own lines, never under a "trial 1 0/5" bar.

What the checks read of a run's settings is `PreflightSettings` (the models, where they are
served, the executor), filled by `plan.resolve`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from reinagent.errors import ConfigError, PreflightError

CONNECT_TIMEOUT_S = 5.0  # a server that has not accepted a connection by then is not up
READ_TIMEOUT_S = 15.0  # a busy server may be slow to answer /models, but not this slow

# litellm providers that run on this machine by default: (default URL, environment override)
LOCAL_PROVIDERS: dict[str, tuple[str, str]] = {
    "ollama": ("http://localhost:11434", "OLLAMA_API_BASE"),
    "ollama_chat": ("http://localhost:11434", "OLLAMA_API_BASE"),
    "lm_studio": ("http://localhost:1234/v1", "LM_STUDIO_API_BASE"),
}


@dataclass(frozen=True)
class Failure:
    what: str  # "model server http://127.0.0.1:1/v1"
    cause: str  # "connection refused"
    fix: str  # "start it, or pass --base-url with a running server's URL"

    def line(self) -> str:
        return f"{self.what}: {self.cause}; {self.fix}"


@dataclass(frozen=True)
class PreflightSettings:
    """The run settings the checks read (the --flags of the same names)."""

    actor_model: str
    reflection_model: str
    base_url: str | None = None
    api_key_env: str | None = None
    backends: tuple[str, ...] = ()  # the actor's and the reflector's backend (plan.resolve); () to look them up
    executor: str = "local"  # --executor ray: Ray installed, its cluster reachable
    ray_address: str | None = None


def backends(settings: PreflightSettings) -> tuple[str, str]:
    """The actor's and the reflector's backends, as the plan resolved them (or looked up now)."""
    if len(settings.backends) == 2:
        return settings.backends[0], settings.backends[1]
    from reinagent.llm import backend_of

    return backend_of(settings.actor_model, settings.base_url), backend_of(settings.reflection_model, settings.base_url)


def preflight(settings: PreflightSettings | None, *, resuming: bool = False) -> None:
    """Raise PreflightError for the first check that fails (settings of a resolved config): the
    executor (Ray installed, its cluster reachable), then every model endpoint. None (a plan with
    nothing running to ask): nothing to do."""
    if settings is None:
        return
    if settings.executor != "local":  # the local executor needs nothing
        from reinagent.executors import check_executor

        check_executor(settings.executor, settings.ray_address)
    checked: set[tuple[str, str | None]] = set()
    for model, kind in zip((settings.actor_model, settings.reflection_model), backends(settings)):
        if (model, settings.base_url) in checked:
            continue
        checked.add((model, settings.base_url))
        if kind == "openai-compatible":
            check_openai_server(settings.base_url, model, settings.api_key_env, resuming=resuming)
        elif kind == "litellm":
            check_litellm(model, settings.base_url, resuming=resuming)


# ----- model endpoints -------------------------------------------------------------------------


def check_openai_server(base_url: str | None, model: str, api_key_env: str | None, *, resuming: bool) -> None:
    """One GET {base_url}/models. Reachable and not refusing the key is what must hold; a model
    name missing from the server's list is a warning (llama.cpp answers to any name)."""
    from reinagent.llm.wire import endpoint_key
    from reinagent.redact import redact

    url = str(base_url).rstrip("/")
    shown = redact(url)
    key = endpoint_key(url, api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = _get(f"{url}/models", shown, headers, resuming=resuming)
    if response.status_code in (401, 403):
        variable = api_key_env or "REINAGENT_SERVER_API_KEY"
        raise PreflightError(Failure(
            f"model server {shown}", f"refused the request (HTTP {response.status_code}: missing or wrong API key)",
            f"set {variable} to the server's key" + ("" if api_key_env else " or name another variable with --api-key-env"),
        ).line())
    if response.status_code == 404 and not url.endswith("/v1"):
        _suggest_v1(url, shown, headers, resuming=resuming)
    served = _model_ids(response)
    name = model.split("/", 1)[1] if model.startswith("openai/") else model
    if served and name not in served:
        print(f"warning: model server {shown} lists {', '.join(served[:5])}, not {name!r}; "
              "its calls may fail (some servers answer to any name)", file=sys.stderr)


def _suggest_v1(url: str, shown: str, headers: dict[str, str], *, resuming: bool) -> None:
    """`--base-url http://host:port` for a server that serves under /v1 (vLLM, llama.cpp, ollama,
    LM Studio): /models is 404 there, and so was every episode's call, naming neither the URL
    nor the fix (issue 45). When {url}/v1/models answers, that is the URL meant: one line. When it
    is 404 too, the server may simply have no /models: a warning, and the run goes on."""
    again = _get(f"{url}/v1/models", shown, headers, resuming=resuming)
    if again.status_code != 404:
        raise PreflightError(Failure(
            f"model server {shown}", "answered HTTP 404 on /models, and its /v1/models is there",
            f"pass --base-url {shown}/v1 (OpenAI-compatible servers serve under /v1)",
        ).line())
    print(f"warning: model server {shown} answered HTTP 404 on /models; if its calls fail with 404, "
          f"give the URL its API lives under (most servers: {shown}/v1)", file=sys.stderr)


def check_litellm(model: str, base_url: str | None, *, resuming: bool) -> None:
    """A known provider; a connection check where it runs on this machine (or at --base-url)."""
    from reinagent.llm import import_litellm

    provider = model.split("/", 1)[0]
    litellm = import_litellm()
    known = sorted({getattr(p, "value", str(p)) for p in litellm.provider_list})
    if provider not in known:
        examples = ", ".join(p for p in ("openai", "anthropic", "gemini", "mistral", "groq", "ollama") if p in known)
        raise PreflightError(Failure(
            f"--model {model}", f"unknown provider {provider!r}",
            f"name one litellm knows ({examples}, ... {len(known)} in all: "
            "https://docs.litellm.ai/docs/providers), or use openai/NAME with --base-url for your own server",
        ).line())
    url = base_url
    if url is None and provider in LOCAL_PROVIDERS:
        import os

        default, variable = LOCAL_PROVIDERS[provider]
        url = os.environ.get(variable) or default
    if url is not None:
        from reinagent.redact import redact

        _get(url.rstrip("/"), redact(url.rstrip("/")), {}, resuming=resuming)


def _get(url: str, shown: str, headers: dict[str, str], *, resuming: bool):
    """GET url; an unreachable server is a PreflightError naming `shown` (the redacted URL)."""
    import httpx

    move = ("`reinagent resume RUN_DIR --base-url URL`" if resuming
            else "pass --base-url with the URL of a running server")
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    try:
        return httpx.get(url, headers=headers, timeout=timeout, follow_redirects=True)
    except httpx.ConnectError as err:
        cause = _connect_cause(err)
    except httpx.TimeoutException:
        cause = f"no answer within {READ_TIMEOUT_S:.0f} s"
    except httpx.HTTPError as err:
        cause = f"{type(err).__name__}: {err}"
    host = urlsplit(url).hostname or url
    raise PreflightError(Failure(
        f"model server {shown}", cause, f"start the server on {host} (check the port), or {move}",
    ).line())


def _connect_cause(err: Exception) -> str:
    text = str(err).lower()
    if "refused" in text:
        return "connection refused (nothing listening there)"
    if "name or service" in text or "nodename" in text or "getaddrinfo" in text or "resolve" in text:
        return "unknown host name"
    return f"cannot connect ({err})" if str(err) else "cannot connect"


def _model_ids(response) -> list[str]:
    if response.status_code != 200:
        return []
    try:
        data = response.json().get("data")
        return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
    except (ValueError, AttributeError, TypeError):
        return []


# ----- the embedded model ----------------------------------------------------------------------


async def warm_up(llms) -> None:
    """Load local models now, with their own lines, before any progress bar. One 1-token call
    to the raw backend (not the response cache, which must not learn this prompt)."""
    from reinagent.llm.base import GenerationParams, innermost
    from reinagent.llm.hf import HFLLM  # light: torch loads with the model, not here
    from reinagent.llm.openvino import OpenVINOLLM  # light too: openvino_genai loads in its worker
    from reinagent.llm.llamacpp_engine import LlamaCppLLM  # a child process, started by its first call
    from reinagent.records import Message

    announced = set()
    for llm in llms:
        backend = innermost(llm)
        if not isinstance(backend, (HFLLM, OpenVINOLLM, LlamaCppLLM)):
            continue
        # A constrained actor and its reflector are two stacks over one engine: the second call
        # only finds it loaded, so it gets no second "loading model" line.
        key = (type(backend).__name__, backend.name)
        if key in announced:
            await backend.generate([Message(role="user", content="Hi")], GenerationParams(max_tokens=1))
            continue
        announced.add(key)
        print(f"loading model {backend.name} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            await backend.generate([Message(role="user", content="Hi")], GenerationParams(max_tokens=1))
        except ConfigError:
            raise
        except Exception as err:  # noqa: BLE001 - a model that cannot load: one line, exit 2
            raise PreflightError(Failure(f"model {backend.name}", f"failed to load ({type(err).__name__}: {err})",
                                         "check the model path and the local extra (`pip install -e '.[local]'`; hf models: '.[hf]')").line()) from None
        info = getattr(backend, "load_info", {}) or {}
        source = f", {info['source']}" if info.get("source") else ""
        print(f"model {backend.name} ready ({time.perf_counter() - started:.1f} s{source})", file=sys.stderr, flush=True)
