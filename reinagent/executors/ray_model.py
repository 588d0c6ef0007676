"""The embedded model on Ray (`--executor ray --model local|ov`): one actor holds the engine.

Loading the embedded model in every Ray worker would make N copies of the weights and N engines
that each batch only their own episode's calls. Instead the driver starts one Ray actor per
embedded model string (`ModelServer`, holding `reinagent.llm.make_llm(model)`, the same raw
backend the local executor uses) and ships its handle with every episode. On the worker, the
run's usual model stack (cache -> limit -> constrained) is built as on the driver and only its
innermost layer, the backend, is swapped for `RemoteModel`, whose `generate` awaits the actor.
So the cache identity, the cache scope and the calls are the local executor's, and every episode
of the run shares one model and its batching (the actor is async: its calls overlap in its event
loop, where the engine gathers them).

The actor asks Ray for no CPU by default (the engine's own threads do the work; episodes keep
the CPUs they ask for); REINAGENT_RAY_MODEL_CPUS / REINAGENT_RAY_MODEL_GPUS reserve some, which
also puts the actor on a node that has them (a GPU node).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError, ModelError
from reinagent.llm.base import LLM, Completion, GenerationParams
from reinagent.records import Message

EMBEDDED = ("local", "ov", "hf")  # backend_of kinds that run in this process
MAX_CALLS_IN_FLIGHT = 1000  # the actor's concurrency: the engine's batch limit is what caps work


@dataclass(frozen=True)
class ModelRef:
    """One model actor as shipped to the workers (pickled by Ray with the episode's job)."""

    model: str  # the model string (`local`, `ov:PATH`)
    actor_name: str  # unique per run: keys the worker's cached experiment
    handle: Any  # ray.actor.ActorHandle
    info: dict  # name, source, supports_regex, default_concurrency of the backend the actor holds


def embedded_models(models: Sequence[str], base_url: str | None) -> list[str]:
    """Those of the run's model strings that run in-process (one Ray actor each)."""
    from reinagent.llm import backend_of

    return sorted({m for m in models if backend_of(m, base_url) in EMBEDDED})


class ModelServer:
    """The Ray actor (made remote in `start_models`): the raw backend, shared by all episodes."""

    def __init__(self, model: str, base_url: str | None, engine: dict | None = None):
        from reinagent.llm import make_llm

        # engine: precision, deterministic, local_engine, max_concurrency, as the local stack passes them
        self.llm = make_llm(model, base_url=base_url, **(engine or {}))

    async def load(self) -> dict:
        """Load the weights now (one 1-token call, as preflight.warm_up) and describe the backend."""
        import ray

        await self.llm.generate([Message(role="user", content="Hi")], GenerationParams(max_tokens=1))
        llm = self.llm
        return {"name": llm.name, "source": str(getattr(llm, "source", "") or ""),
                "supports_regex": bool(getattr(llm, "supports_regex", False)),
                "default_concurrency": int(getattr(llm, "default_concurrency", 8)),
                "deterministic": bool(getattr(llm, "deterministic", False)),
                "load_info": dict(getattr(llm, "load_info", {}) or {}),
                "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    async def generate(self, messages: list[Message], params: GenerationParams, rollout_id: str | None) -> Completion:
        return await self.llm.generate(messages, params, rollout_id=rollout_id)

    async def close(self) -> None:
        await self.llm.aclose()


async def start_models(models: Sequence[str], base_url: str | None, engine: dict | None = None) -> list[ModelRef]:
    """One loaded actor per embedded model of the run, with the local executor's loading lines.
    `engine`: make_llm's engine keywords (ExecutorSettings.engine), so the actor's engine is the
    one the local executor would build (precision, --deterministic, --local-engine, batch size)."""
    import ray

    refs = []
    for model in embedded_models(models, base_url):
        name = f"reinagent-model-{uuid.uuid4().hex[:12]}"
        cpus = float(os.environ.get("REINAGENT_RAY_MODEL_CPUS", "0") or 0)
        gpus = float(os.environ.get("REINAGENT_RAY_MODEL_GPUS", "0") or 0)
        actor_class = ray.remote(num_cpus=cpus, num_gpus=gpus, max_concurrency=MAX_CALLS_IN_FLIGHT,
                                 max_restarts=0)(ModelServer)
        handle = actor_class.options(name=name).remote(model, base_url, engine)
        print(f"loading model {model} in a Ray actor ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            info = await handle.load.remote()
        except Exception as err:  # noqa: BLE001 - a model that cannot load: one line, exit 2
            ray.kill(handle)
            cause = getattr(err, "cause", None) or err
            first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
            raise ConfigError(f"model {model}: failed to load in its Ray actor ({type(cause).__name__}: {first}); "
                              "check the model path and the local extra on the cluster's nodes") from None
        source = info["load_info"].get("source")
        one = ", one sequence at a time" if info["deterministic"] else ""
        print(f"model {model} ready ({time.perf_counter() - started:.1f} s{', ' + source if source else ''}{one}, "
              f"Ray node {info['node_id'][:12]})", file=sys.stderr, flush=True)
        refs.append(ModelRef(model, name, handle, info))
    return refs


async def stop_models(refs: Sequence[ModelRef]) -> None:
    import ray

    for ref in refs:
        with contextlib.suppress(Exception):  # a dead actor holds nothing any more
            await ref.handle.close.remote()
        ray.kill(ref.handle)


class RemoteModel(LLM):
    """A worker's backend: the model actor, called through its handle."""

    def __init__(self, ref: ModelRef):
        self.ref = ref
        self.name = ref.info["name"]
        self.source = Path(ref.info["source"]) if ref.info["source"] else None
        self.supports_regex = ref.info["supports_regex"]
        self.default_concurrency = ref.info["default_concurrency"]

    async def generate(self, messages: Sequence[Message], params: GenerationParams, *,
                       rollout_id: str | None = None) -> Completion:
        import ray.exceptions

        try:
            return await self.ref.handle.generate.remote(list(messages), params, rollout_id)
        except ray.exceptions.RayTaskError as err:  # the backend raised: the episode sees that error
            cause = err.cause
            raise (cause if isinstance(cause, Exception) else ModelError(str(err).splitlines()[0])) from None
        except ray.exceptions.RayError as err:  # the actor or its node is gone
            raise ModelError(f"model {self.name}: its Ray actor is gone ({type(err).__name__})") from None


def attach(models: tuple[LLM, LLM, list[LLM]], refs: Sequence[ModelRef]) -> tuple[LLM, LLM, list[LLM]]:
    """Swap each stack's innermost backend of an embedded model for its actor (in place)."""
    by_model = {ref.model: RemoteModel(ref) for ref in refs}
    actor, reflector, llms = models
    swapped = [_swap(llm, by_model) for llm in llms]
    mapping = {id(old): new for old, new in zip(llms, swapped)}
    return mapping.get(id(actor), actor), mapping.get(id(reflector), reflector), swapped


def _swap(llm: LLM, by_model: dict[str, RemoteModel]) -> LLM:
    parent, layer = None, llm
    for _ in range(8):
        inner = layer.__dict__.get("inner")
        if inner is None:
            break
        parent, layer = layer, inner
    from reinagent.llm import backend_of

    try:
        embedded = backend_of(layer.name) in EMBEDDED
    except ConfigError:
        embedded = False
    # by model string; a backend that names itself otherwise (`ov` as `local`) is the only one
    remote = by_model.get(layer.name) or (next(iter(by_model.values())) if embedded and len(by_model) == 1 else None)
    if remote is None or not embedded:
        return llm
    if parent is None:
        return remote
    parent.inner = remote  # the layers above (cache, limit, grammar) stay as built
    return llm
