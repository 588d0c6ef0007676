"""The model a run uses: the raw backend wrapped in the run's cross-cutting layers.

    CachedLLM(LimitedLLM(backend))

The cache is outermost so that a hit never waits for a slot under the per-model limit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reinagent.llm import backend_of, make_llm
from reinagent.llm.base import LLM

if TYPE_CHECKING:
    from reinagent.config import RunConfig
    from reinagent.llm.cache import ResponseStore
    from reinagent.llm.constrained import GrammarChoice

# Scripted models are not cached: they cost nothing, and their rule files are edited between
# runs, so a cache would replay replies the file no longer gives.
UNCACHED_BACKENDS = frozenset({"scripted"})


def response_cache_dir(config: RunConfig) -> Path:
    """--cache-dir, else $REINAGENT_CACHE_DIR/responses, else ~/.cache/reinagent/responses."""
    from reinagent.paths import cache_root

    return Path(config.cache_dir).expanduser() if config.cache_dir else cache_root() / "responses"


def build_llm(model: str, config: RunConfig, *, role: str = "actor", run_key: str | None = None,
              grammar: GrammarChoice | None = None) -> LLM:
    """Backend for `model` as configured for this run. `run_key` names the run for the response
    cache: with cache_scope "run" (the default) only calls of that run are replayed. `grammar`
    (the actor's, resolved by experiment.grammar_choice) holds the actor to it where it applies."""
    kind = backend_of(model, config.base_url)
    precision = getattr(config, "precision", None)  # None until config.py has the key: the engine's default
    backend = make_llm(model, base_url=config.base_url, role=role, api_key_env=config.api_key_env, precision=precision,
                       deterministic=getattr(config, "deterministic", False))
    llm = backend
    choice, grammar = grammar, None
    if role == "actor" and choice is not None:
        from reinagent.llm.constrained import ConstrainedLLM, actor_grammar, grammar_function

        grammar = actor_grammar(choice, backend)  # a regex, or the name of a per-step grammar
        if grammar:  # innermost: the cache below keys the grammar through the model identity
            llm = ConstrainedLLM(llm, grammar_function(grammar))
    if config.max_model_concurrency:
        from reinagent.llm.limit import LimitedLLM

        llm = LimitedLLM(llm, config.max_model_concurrency)
    if config.cache and kind not in UNCACHED_BACKENDS:
        from reinagent.llm.cache import CachedLLM, model_identity

        store = open_store(config)
        if store is not None:
            weights = getattr(backend, "source", None) if kind in ("local", "hf") else None  # the file or folder loaded
            from reinagent.llm.cache import scoped_identity

            identity = model_identity(model, config.base_url, weights)
            if getattr(backend, "precision", None):  # fast and exact give different text
                identity["precision"] = backend.precision
            if grammar:
                identity["grammar"] = grammar
            identity = scoped_identity(identity, config.cache_scope, run_key)
            llm = CachedLLM(llm, store, identity)
    return llm


def open_store(config: RunConfig) -> ResponseStore | None:
    """The run's response store. A --cache-dir that cannot be used is the user's to fix (an
    error); the default one failing (a read-only home) only costs the savings (a warning)."""
    import sqlite3

    from reinagent.errors import ConfigError
    from reinagent.llm.cache import ResponseStore

    directory = response_cache_dir(config)
    try:
        return ResponseStore(directory)
    except (OSError, sqlite3.Error) as err:
        if config.cache_dir:
            raise ConfigError(f"cannot use --cache-dir {directory}: {err} (or run with --no-cache)") from None
        print(f"warning: response cache {directory} unusable ({err}); running without it", file=sys.stderr)
        return None
