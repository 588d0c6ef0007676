"""Episodes as Ray tasks (`--executor ray [--ray-address HOST:PORT]`).

Each (task, trial) is one Ray task. Inside the worker run the environment, the agent, the sandbox
and the model calls (to the model endpoint, e.g. `--base-url` of a served model): `run_episode`,
the same code the local executor runs, so the records are the same for the same seed and cache.
The record comes back to the driver, which alone appends it to the run's store.

A worker process killed mid-episode (kill -9, a node lost) makes Ray run the task again, up to
MAX_RETRIES times; past that the (task, trial) is recorded with an `infrastructure error` (no
verdict, no reflection; `resume --retry-errors` redoes it). Either way the driver appends exactly
one record per (task, trial): a retried attempt never wrote anything.

Each worker process keeps one event loop (in a thread) and one built experiment (benchmark,
agent, model clients) per run, so connection pools and parsed task files live across episodes.
API keys are never shipped through Ray: each node reads them from its own environment.
`--model local` / `ov` / `hf` (the embedded model): one Ray actor holds the engine and every episode
calls it (ray_model.py), so the run loads the weights once and keeps its batching.

REINAGENT_RAY_TRACE=FILE in a node's environment (before `ray start`) makes each episode append
one JSON line there: task, trial, the Ray node id and the worker's pid (where did episodes run?).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from reinagent.benchmarks.base import Task
from reinagent.errors import ConfigError
from reinagent.executors import EpisodeParts, Executor, ExecutorSettings
from reinagent.memory import EpisodicMemory
from reinagent.records import TrialRecord

MAX_RETRIES = 2  # Ray re-runs an episode whose worker died this many times, then records an error
CONNECT_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class EpisodeJob:
    """Everything a worker needs for one (task, trial); pickled by Ray."""

    config: str  # the run's settings as JSON (no keys: those are read on the worker)
    run_key: str | None  # scopes the response cache to the run, as on the driver
    run_name: str
    task: Task
    trial: int
    reflections: tuple[str, ...]
    window: int
    previous: TrialRecord | None
    parts: EpisodeParts  # the episode function and the experiment factory (shipped by name)
    models: tuple = ()  # ray_model.ModelRef of each embedded model: the actors the episode calls


def check_ray(address: str | None) -> None:
    """Bad input in seconds, before a run directory exists: no Ray installed, an address (--ray-address)
    nobody answers on."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'reinagent[ray]'") from None
    if address:
        _check_reachable(address)


def _check_reachable(address: str) -> None:
    """ray.init on a dead address retries for a minute or more; a TCP connect says it in seconds."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray-address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379), ray://HOST:PORT or auto")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(f"cannot reach the Ray cluster at {address}: {reason}; start one with "
                          "`ray start --head` or leave out --ray-address for a local one") from None
    with sock:
        if not _speaks_grpc(sock):
            raise ConfigError(f"{address} answers, but not as a Ray cluster (no gRPC there in {CONNECT_TIMEOUT_S:.0f} s);"
                              " give the head's GCS port (`ray start --head --port`, 6379 by default)")


# An HTTP/2 client preface and an empty SETTINGS frame. Ray's GCS (and the Ray client server) is a
# gRPC server, which answers with its own SETTINGS frame before any authentication. Something else
# on the port (or a process that accepts and never answers) would make ray.init retry for minutes.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _speaks_grpc(sock: socket.socket) -> bool:
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.sendall(_H2_PREFACE)
        header = b""
        while len(header) < 9:
            chunk = sock.recv(9 - len(header))
            if not chunk:
                return False
            header += chunk
    except OSError:
        return False
    return header[3] == 0x04  # the first frame's type: SETTINGS


class RayExecutor(Executor):
    def __init__(self, exp, parts: EpisodeParts, settings: ExecutorSettings):
        super().__init__(exp, parts, settings)
        self._owns_ray = False
        self._remote = None
        self._models: list = []  # ray_model.ModelRef: the embedded model's actors, started here
        self._config = settings.run_settings
        self._run_key = _run_key(exp)
        run_dir = getattr(exp.store, "run_dir", None)  # a database store may have none
        self._run_name = Path(run_dir).name if run_dir else "run"

    async def start(self) -> None:
        import ray

        check_ray(self.settings.ray_address)
        if not ray.is_initialized():
            address = self.settings.ray_address
            try:
                # Workers log to their own files; the driver's stderr keeps the one line per trial.
                ray.init(address=address, log_to_driver=False, include_dashboard=False, configure_logging=False)
            except Exception as err:  # noqa: BLE001 - Ray's many start/connect failures: one line
                if address:  # someone else's cluster: it may want a token
                    where, hint = (f"join the Ray cluster at {address}", "a cluster with token auth needs "
                                   "RAY_AUTH_MODE=token and its token here: see docs/multi-machine.md")
                else:  # the private cluster started here has no token to give
                    where, hint = ("start a local Ray cluster", "on a loaded machine its start can time out: "
                                   "run the command again, or start one with `ray start --head` and pass "
                                   "--ray-address (docs/multi-machine.md)")
                raise ConfigError(f"cannot {where}: {_first_line(err)} ({hint})") from None
            self._owns_ray = True
        # An episode mostly waits on the model server: REINAGENT_RAY_EPISODE_CPUS=0.25 runs four per CPU.
        cpus = float(os.environ.get("REINAGENT_RAY_EPISODE_CPUS", "1") or 1)
        self._remote = ray.remote(num_cpus=cpus, max_retries=MAX_RETRIES, retry_exceptions=False)(run_job)
        from reinagent.executors.ray_model import embedded_models, start_models

        if embedded_models(self.settings.models, self.settings.base_url):
            self._models = await start_models(self.settings.models, self.settings.base_url, self.settings.engine())

    async def episode(self, task: Task, trial: int, memory: EpisodicMemory,
                      previous: TrialRecord | None) -> TrialRecord:
        import ray.exceptions

        job = EpisodeJob(self._config, self._run_key, self._run_name, task, trial,
                         tuple(memory.reflections), memory.window, previous, self.parts, tuple(self._models))
        started = time.time()
        try:
            return await self._remote.remote(job)
        except ray.exceptions.RayError as err:  # the worker died past its retries, a node was lost
            from reinagent.redact import redact

            return TrialRecord(task_id=task.task_id, trial=trial, started_at=started, finished_at=time.time(),
                               error=redact(f"infrastructure error: ray: {_first_line(err)}"))

    async def aclose(self) -> None:
        if self._models:
            from reinagent.executors.ray_model import stop_models

            models, self._models = self._models, []
            await stop_models(models)
        if self._owns_ray:
            import ray

            await asyncio.to_thread(ray.shutdown)


def _run_key(exp) -> str | None:
    """The driver's cache scope (cache_scope run), so a worker's cached answers are this run's:
    read off the driver's cache layer, whatever store holds the run."""
    llm = exp.actor_llm
    while llm is not None:
        identity = getattr(llm, "identity", None)
        if isinstance(identity, dict) and identity.get("run"):
            return str(identity["run"])
        llm = getattr(llm, "inner", None)
    return None  # no cache, or a shared one: nothing to scope


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


# --- the worker side -------------------------------------------------------------------------

_loop: asyncio.AbstractEventLoop | None = None
_experiments: dict[tuple, object] = {}
_guard = threading.Lock()


def run_job(job: EpisodeJob) -> TrialRecord:
    """The Ray task: one episode on this worker's event loop."""
    future = asyncio.run_coroutine_threadsafe(_episode(job), _worker_loop())
    record = future.result()
    if os.environ.get("REINAGENT_RAY_TRACE"):
        _trace(job, os.environ["REINAGENT_RAY_TRACE"])
    return record


def _trace(job: EpisodeJob, path: str) -> None:
    import ray

    line = json.dumps({"task_id": job.task.task_id, "trial": job.trial, "pid": os.getpid(),
                       "node_id": ray.get_runtime_context().get_node_id(),
                       "torch_loaded": "torch" in sys.modules})  # the embedded model stays in its actor
    with open(path, "a", encoding="utf-8") as out:  # one short O_APPEND write: lines never interleave
        out.write(line + "\n")


def _worker_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _guard:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="reinagent-episodes", daemon=True).start()
        return _loop


async def _episode(job: EpisodeJob) -> TrialRecord:
    exp = _experiment_for(job)
    memory = EpisodicMemory(window=job.window, reflections=list(job.reflections))
    return await job.parts.run_episode(exp, job.task, job.trial, memory, job.previous)


@dataclass
class _WorkerLog:
    """Stands in for the run's store on a worker: run_episode only writes errors.log there."""

    run_dir: Path


def _experiment_for(job: EpisodeJob):
    key = (job.config, job.run_key, tuple(ref.actor_name for ref in job.models))
    if key not in _experiments:
        log_dir = Path(tempfile.gettempdir()) / "reinagent-ray" / job.run_name
        log_dir.mkdir(parents=True, exist_ok=True)
        adapt = None  # an embedded model's backend is only loaded on first call...
        if job.models:
            from reinagent.executors.ray_model import attach

            def adapt(models, refs=job.models):
                return attach(models, refs)  # ...which goes to the run's model actor instead
        _experiments[key] = job.parts.rebuild(job.config, job.run_key, _WorkerLog(log_dir), adapt)
    return _experiments[key]
