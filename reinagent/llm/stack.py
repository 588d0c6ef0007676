"""The model a run uses: the raw backend wrapped in the run's cross-cutting layers.

    CachedLLM(LimitedLLM(backend))

The cache is outermost so that a hit never waits for a slot under the per-model limit. What the
stack depends on of a run's settings is `ModelSettings`, resolved by the caller
(filled by plan.resolve): this layer never reads a run's whole config.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reinagent.llm import backend_of, make_llm
from reinagent.llm.base import LLM

if TYPE_CHECKING:
    from reinagent.llm.cache import ResponseStore

# Scripted models are not cached: they cost nothing, and their rule files are edited between
# runs, so a cache would replay replies the file no longer gives.
UNCACHED_BACKENDS = frozenset({"scripted"})


@dataclass(frozen=True)
class ModelSettings:
    """The run settings a model stack depends on (the --flags of the same names)."""

    base_url: str | None = None  # an OpenAI-compatible server, or a litellm provider's URL
    api_key_env: str | None = None  # the variable holding base_url's key (its name only)
    precision: str | None = None  # the local engine's fast or exact; None: the engine's default
    local_engine: str = "openvino"  # which engine decodes a `local` model: openvino or llamacpp
    deterministic: bool = False  # the local engine decodes one sequence at a time
    max_model_concurrency: int | None = None  # None: no cap on requests in flight per model
    max_concurrency: int | None = None  # episodes in flight: a local engine runs as many at once (llm.local_batch)
    cache: bool = True  # the response cache
    cache_dir: str | None = None  # None: $REINAGENT_CACHE_DIR/responses or ~/.cache/reinagent/responses
    cache_scope: str = "run"  # run: only the run's own calls are replayed; shared: any run's


def response_cache_dir(cache_dir: str | None) -> Path:
    """--cache-dir, else $REINAGENT_CACHE_DIR/responses, else ~/.cache/reinagent/responses."""
    from reinagent.paths import cache_root

    return Path(cache_dir).expanduser() if cache_dir else cache_root() / "responses"


def build_llm(model: str, settings: ModelSettings, *, role: str = "actor", run_key: str | None = None,
              grammar: str | None = None) -> LLM:
    """Backend for `model` as `settings` configure it. `run_key` names the run for the response
    cache: with cache_scope "run" (the default) only calls of that run are replayed. `grammar`
    (the actor's, chosen by plan.resolve: llm.constrained.choose_grammar) holds the actor to it."""
    kind = backend_of(model, settings.base_url)
    backend = make_llm(model, base_url=settings.base_url, role=role, api_key_env=settings.api_key_env,
                       precision=settings.precision, deterministic=settings.deterministic,
                       local_engine=settings.local_engine, max_concurrency=settings.max_concurrency)
    llm = backend
    grammar = grammar if role == "actor" else None
    if grammar:  # innermost: the cache below keys the grammar through the model identity
        from reinagent.llm.constrained import ConstrainedLLM, grammar_function

        llm = ConstrainedLLM(llm, grammar_function(grammar))
    if settings.max_model_concurrency:
        from reinagent.llm.limit import LimitedLLM

        llm = LimitedLLM(llm, settings.max_model_concurrency)
    if settings.cache and kind not in UNCACHED_BACKENDS:
        from reinagent.llm.cache import CachedLLM, model_identity

        store = open_store(settings.cache_dir)
        if store is not None:
            weights = getattr(backend, "source", None) if kind in ("local", "hf") else None  # the file or folder loaded
            from reinagent.llm.cache import scoped_identity

            identity = model_identity(model, settings.base_url, weights)
            if getattr(backend, "precision", None):  # fast and exact give different text
                identity["precision"] = backend.precision
            if kind == "local" and settings.local_engine == "openvino":
                from reinagent.llm.cpu_precision import plugin_identity

                identity.update(plugin_identity(getattr(backend, "precision", None)))
            if kind == "local" and settings.local_engine != "openvino":  # and so do two engines
                identity["engine"] = settings.local_engine
            elif kind == "local" and getattr(backend, "precision", None) == "fast" and str(weights).endswith(".gguf"):
                from reinagent.llm.gguf_exact import RULE, needs_mending

                if needs_mending(weights):  # the file's Q4 offsets, not the reader's rounded ones
                    identity["offsets"] = RULE
            if grammar:
                identity["grammar"] = grammar
            identity = scoped_identity(identity, settings.cache_scope, run_key)
            llm = CachedLLM(llm, store, identity)
    return llm


def open_store(cache_dir: str | None) -> ResponseStore | None:
    """The run's response store. A --cache-dir that cannot be used is the user's to fix (an
    error); the default one failing (a read-only home) only costs the savings (a warning)."""
    import sqlite3

    from reinagent.errors import ConfigError
    from reinagent.llm.cache import ResponseStore

    directory = response_cache_dir(cache_dir)
    try:
        return ResponseStore(directory)
    except (OSError, sqlite3.Error) as err:
        if cache_dir:
            raise ConfigError(f"cannot use --cache-dir {directory}: {err} (or run with --no-cache)") from None
        print(f"warning: response cache {directory} unusable ({err}); running without it", file=sys.stderr)
        return None
