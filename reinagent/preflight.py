"""Checks before the first episode: can this run work at all?

`run` and `resume` call `preflight(settings)` after the settings are validated and before a run
directory is made or an episode starts, so a dead endpoint, an unknown provider or a missing
extra costs seconds and one line (exit 2), not a run of errored trials:

- every model endpoint gets one cheap request: `GET {base_url}/models` for an OpenAI-compatible
  server (any HTTP answer but 401/403 means it is there: some servers have no /models), a
  connection check for a litellm provider on this machine (ollama, LM Studio, a --base-url);
  hosted providers are checked for a known provider name (their keys by `check_credentials`);
- the optional extras the run needs are importable (alfworld, the embedded model's packages);
- the sandbox and the environment server are checked by the benchmark itself while resolving
  the config (`Benchmark.check_config`, `service.served`), before this runs.

The embedded model loads in `warm_up`, inside the run's event loop, before trial 1's progress bar
exists: loading is printed on its own lines, never under a "trial 1 0/5" bar.

What the checks read of a run's settings is `PreflightSettings` (the models, where they are served,
the benchmark and its environment server), filled by `plan.resolve`; `plan.check` runs the checks.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from reinagent.errors import ConfigError

CONNECT_TIMEOUT_S = 5.0  # a server that has not accepted a connection by then is not up
READ_TIMEOUT_S = 15.0  # a busy server may be slow to answer /models, but not this slow

# extra -> modules it installs that a run imports; the install hint names the extra
EXTRAS: dict[str, tuple[str, ...]] = {
    "alfworld": ("alfworld", "textworld"),
    "local": ("openvino_genai",),  # the OpenVINO engine (reinagent.llm.openvino)
    "hf": ("torch", "transformers", "safetensors"),  # transformers: hf:PATH, and local:HF_DIR checkpoints
}
# litellm providers that run on this machine by default: (default URL, environment override)
LOCAL_PROVIDERS: dict[str, tuple[str, str]] = {
    "ollama": ("http://localhost:11434", "OLLAMA_API_BASE"),
    "ollama_chat": ("http://localhost:11434", "OLLAMA_API_BASE"),
    "lm_studio": ("http://localhost:1234/v1", "LM_STUDIO_API_BASE"),
}


class PreflightError(ConfigError):
    """A check failed: one line naming what, why and the fix (the CLI exits 2)."""


class MissingExtra(PreflightError):
    """An optional extra the run needs is not installed."""


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

    benchmark: str  # a registry id (alfworld, alfworld-v1): which extras it needs
    actor_model: str
    reflection_model: str
    base_url: str | None = None
    api_key_env: str | None = None
    env_url: str | None = None  # environments on an env server: the benchmark's extras are its
    backends: tuple[str, ...] = ()  # the actor's and the reflector's backend (plan.resolve); () to look them up
    executor: str = "local"  # --executor ray: Ray installed, its cluster reachable
    ray_address: str | None = None


def backends(settings: PreflightSettings) -> tuple[str, str]:
    """The actor's and the reflector's backends, as the plan resolved them (or looked up now)."""
    if len(settings.backends) == 2:
        return settings.backends[0], settings.backends[1]
    from reinagent.llm import backend_of

    return backend_of(settings.actor_model, settings.base_url), backend_of(settings.reflection_model, settings.base_url)


def preflight(settings: PreflightSettings, *, resuming: bool = False) -> None:
    """Raise PreflightError for the first check that fails (settings of a resolved config): the
    executor (Ray installed, its cluster reachable), then every model endpoint."""
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


def settings_problems(settings: PreflightSettings, *, new_run: bool = True) -> list[PreflightError]:
    """What can be found wrong before anything runs: model flags no model uses (a new run only: a
    resumed one keeps what its spec recorded) and missing extras (MissingExtra)."""
    found = []
    for check in ((check_model_flags,) if new_run else ()) + (check_extras,):
        try:
            check(settings)
        except PreflightError as err:
            found.append(err)
    return found


def check_model_flags(settings: PreflightSettings) -> None:
    """A model flag that neither model uses is refused: `--model local --base-url URL` once ran
    the embedded model for minutes and recorded a server it never asked."""
    kinds = set(backends(settings))
    served = {"openai-compatible", "litellm"}  # the backends that send requests to a URL
    models = " and ".join(dict.fromkeys((settings.actor_model, settings.reflection_model)))
    for flag, value in (("--base-url", settings.base_url), ("--api-key-env", settings.api_key_env)):
        if value is not None and not kinds & served:
            raise PreflightError(f"{flag} is not used by model {models}: only openai/NAME (an OpenAI-compatible "
                                 f"server) and PROVIDER/NAME models send requests to a URL; drop {flag}, or pass "
                                 "--model openai/NAME to use the server")


# ----- optional extras -------------------------------------------------------------------------


def needed_extras(settings: PreflightSettings) -> list[str]:
    benchmark = settings.benchmark.lower().removesuffix("-v1")  # registry ids: alfworld, alfworld-v1
    extras = ["alfworld"] if benchmark == "alfworld" and not settings.env_url else []
    models = tuple(zip((settings.actor_model, settings.reflection_model), backends(settings)))
    if any(kind == "local" and _on_openvino(m) for m, kind in models):
        extras.append("local")
    # a HF directory needs transformers' stack either way: to run on it, or (torch, safetensors,
    # gguf) to be written as GGUF for OpenVINO
    if any(kind == "hf" or _hf_dir(m) for m, kind in models):
        extras.append("hf")
    return extras


def _hf_dir(model: str) -> bool:
    """local:PATH naming a Hugging Face directory (reinagent.llm.local.kind_of)."""
    from pathlib import Path

    if not model.startswith(("local:", "ov:")):
        return False
    path = Path(model.split(":", 1)[1]).expanduser()
    return path.is_dir() and (path / "config.json").is_file() and not (path / "openvino_model.xml").is_file()


def _on_openvino(model: str) -> bool:
    """A local model the OpenVINO engine serves (reinagent.llm.on_openvino); a path that does not
    exist is reported by the model's own check, not here."""
    from reinagent.llm import on_openvino

    try:
        return on_openvino(model)
    except ConfigError:
        return not _hf_dir(model)


def check_extras(settings: PreflightSettings) -> None:
    for extra in needed_extras(settings):
        missing = [m for m in EXTRAS[extra] if not importable(m)]
        if missing:
            what = f"benchmark {settings.benchmark}" if extra == "alfworld" else f"model {settings.actor_model!r}"
            raise MissingExtra(Failure(
                what, f"needs the {extra} extra (module {missing[0]} is not installed)",
                f"install it with `.venv/bin/pip install -e '.[{extra}]'` (or ./run_tests.sh, which installs every extra)",
            ).line())


def importable(module: str) -> bool:
    """Whether `import module` can work, without importing it (alfworld takes seconds)."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: an import that is known to fail
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


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
    from reinagent.llm.base import GenerationParams
    from reinagent.llm.hf import HFLLM  # light: torch loads with the model, not here
    from reinagent.llm.openvino import OpenVINOLLM  # light too: openvino_genai loads in its worker
    from reinagent.records import Message

    announced = set()
    for llm in llms:
        backend = _innermost(llm)
        if not isinstance(backend, (HFLLM, OpenVINOLLM)):
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


def _innermost(llm):
    seen = 0
    while seen < 8 and ("inner" in getattr(llm, "__dict__", {})):
        llm = llm.__dict__["inner"]
        seen += 1
    return llm
