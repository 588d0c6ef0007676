"""The local engine in a child process of its own, so that its steps never stop the run's event loop.

OpenVINO GenAI's Python binding of `ContinuousBatchingPipeline.step()` holds the GIL for the whole
step (its pybind definition has no `gil_scoped_release`; openvino-genai 2026.4). In the run's own
process every step therefore stopped every other thread, the event loop included: the agents'
sandbox I/O, the next request of an episode, a Reflector's prompt all waited for the step to end,
and a step is 0.3 s for 8 sequences of the 1.5B and seconds when it carries a 1024-token prefill
chunk. Measured (perf/event_loop.py): an `asyncio.sleep(0.001)` loop beside 8 requests of the
embedded model ticked every ~250 ms in-process; and in a HumanEval pair at 32 in flight the
episodes spent more wall time between their model calls than in them. llama.cpp's server, a
process of its own, never had this. Here the child runs `OVEngine` (openvino.py) unchanged and
this side mirrors its interface (submit, count, close, info, kv_cache, ready); only the child's
own threads wait for its steps.

The wire is a multiprocessing pipe of picklable tuples; a sender thread writes it (a full pipe
never blocks the event loop) and a reader thread settles each request's future on its caller's
loop. Errors cross as their kind and text (ConfigError or ModelError), never as a traceback. The
child loads the model at once (the parent starts it on the first request or count, as the
in-process engine loaded on first use) and ends when told to or when the parent's end of the pipe
closes (a killed run takes it along). Prompt tokens are counted in the parent with the tokenizer of
the folder the child loaded (the mended IR and the f32 IR carry theirs), else by asking the child.
REINAGENT_OV_IN_PROCESS=1 keeps the engine in the run's process (for measuring the difference).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import itertools
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError, ModelError


class ProcessEngine:
    """`engine_class`'s interface (OVEngine), the engine itself in a spawned child process;
    `encode(tokenizer, messages)` renders a prompt as the engine does (openvino._encode)."""

    def __init__(self, engine_class: type, encode: Callable, source: Path, precision: str, max_batch: int,
                 cache_root: str | None = None, deterministic: bool = False):
        self.source = Path(source)
        self._encode = encode
        self._args = (engine_class, str(source), precision, max_batch, cache_root, deterministic)
        self.info: dict[str, Any] = {}
        self._lock = threading.Lock()  # starting and closing
        self._outbox: queue.Queue = queue.Queue()
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._calls: dict[int, concurrent.futures.Future] = {}
        self._ids = itertools.count(1)
        self._loaded = threading.Event()
        self._proc: Any = None
        self._conn: Any = None
        self._tokenizer: Any = None
        self._tokenizer_lock = threading.Lock()
        self._closed = False
        self._ok = False  # the child loaded the model
        self._dead: str | None = None

    @property
    def ready(self) -> bool:
        """The child has loaded the model (or failed to: its requests then fail with the reason)."""
        return self._loaded.is_set()

    def _start(self) -> None:
        """Spawn the child and its two threads, once (under self._lock)."""
        if self._proc is not None:
            return
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # never fork a process that holds threads
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child_main, args=(child, *self._args), name=f"ov-{self.source.name}", daemon=True)
        self._proc.start()
        child.close()
        threading.Thread(target=self._write, name=f"ov-send-{self.source.name}", daemon=True).start()
        threading.Thread(target=self._read, name=f"ov-recv-{self.source.name}", daemon=True).start()

    def _write(self) -> None:
        while (msg := self._outbox.get()) is not None:
            try:
                self._conn.send(msg)
            except (OSError, ValueError):  # the child is gone: the reader fails what waits
                return

    def _read(self) -> None:
        while True:
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                break
            kind = msg[0]
            if kind == "loaded":
                self.info, self._ok = msg[1], msg[2]
                self._tokenizer = _folder_tokenizer(msg[1].get("path")) if msg[2] else None
                self._loaded.set()
            elif kind in ("done", "error"):
                entry = self._pending.pop(msg[1], None)
                if entry is not None:
                    _settle(*entry, msg[2] if kind == "done" else _error(msg[2], msg[3]))
            elif kind == "reply":
                call = self._calls.pop(msg[1], None)
                if call is not None:
                    call.set_result(msg[2])
        self._proc.join(5)
        self._dead = f"the engine's process for {self.source.name} ended (exit code {self._proc.exitcode})"
        self._loaded.set()
        for rid in list(self._pending):
            entry = self._pending.pop(rid, None)
            if entry is not None:
                _settle(*entry, ModelError("model closed while the request ran" if self._closed else self._dead))
        for cid in list(self._calls):
            call = self._calls.pop(cid, None)
            if call is not None:
                call.set_result(None)

    async def submit(self, messages, params, rollout_id: str | None):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._closed:
                raise ModelError(f"model {self.source.name} was closed")
            self._start()
            rid = next(self._ids)
            self._pending[rid] = (loop, future)
            if self._dead:  # checked after the entry is in: the reader's last sweep cannot miss it
                self._pending.pop(rid, None)
                raise ModelError(self._dead)
        self._outbox.put(("generate", rid, list(messages), params, rollout_id))
        try:
            return await future
        except asyncio.CancelledError:
            if self._pending.pop(rid, None) is not None:
                self._outbox.put(("cancel", rid))  # the child frees its sequence at its next step
            raise

    def _call(self, kind: str, *args) -> Any:
        """A synchronous question to the child (None when it is gone)."""
        call: concurrent.futures.Future = concurrent.futures.Future()
        cid = next(self._ids)
        self._calls[cid] = call
        if self._dead:
            return None
        self._outbox.put((kind, cid, *args))
        return call.result()

    def count(self, messages) -> int | None:
        """The prompt's tokens as the engine encodes it, loading the model first (blocking, once),
        as OVEngine.count; None when the model cannot load."""
        with self._lock:
            if self._closed:
                return None
            self._start()
        self._loaded.wait()
        if self._dead or not self._ok:
            return None
        if self._tokenizer is not None:
            with self._tokenizer_lock:
                return int(self._encode(self._tokenizer, list(messages)).get_shape()[-1])
        return self._call("count", list(messages))

    def kv_cache(self) -> dict[str, float]:
        return (self._call("kv") or {}) if self._loaded.is_set() and not self._dead else {}

    def close(self, timeout: float | None = None) -> None:
        with self._lock:
            self._closed = True
            proc = self._proc
        if proc is None:
            return
        self._outbox.put(("close",))
        proc.join(30 if timeout is None else timeout)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
        self._outbox.put(None)
        with contextlib.suppress(OSError):
            self._conn.close()


def _settle(loop: asyncio.AbstractEventLoop, future: asyncio.Future, outcome: Any) -> None:
    def settle() -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody is waiting
        loop.call_soon_threadsafe(settle)


def _error(kind: str, text: str) -> Exception:
    return ConfigError(text) if kind == "config" else ModelError(text)


def _folder_tokenizer(path: str | None):
    """The tokenizer of an IR folder the child loaded, for counting here; None otherwise (a GGUF
    file read as it is: the child counts)."""
    folder = Path(path) if path else None
    if folder is None or not (folder / "openvino_tokenizer.xml").is_file():
        return None
    try:
        import openvino_genai as og

        return og.Tokenizer(str(folder))
    except Exception:  # noqa: BLE001 - counting falls back to the child's own tokenizer
        return None


# ----- one engine per (model, precision, batch), shared by actor and reflector ---------------

_ENGINES: dict[tuple, list] = {}
_ENGINES_LOCK = threading.Lock()


def acquire(llm: Any, engine_class: type, encode: Callable) -> Any:
    """The engine of an OpenVINOLLM, shared by every user of the same model and settings: a
    ProcessEngine, or `engine_class` itself in this process under REINAGENT_OV_IN_PROCESS=1."""
    # The cache root is part of the identity: a test with a private cache prepares its own copy.
    root = os.environ.get("REINAGENT_CACHE_DIR")
    key = (str(llm.source.resolve()), llm.precision, llm.max_batch, root, llm.deterministic)
    with _ENGINES_LOCK:
        entry = _ENGINES.get(key)
        if entry is None:
            args = (llm.source, llm.precision, llm.max_batch, root, llm.deterministic)
            in_process = os.environ.get("REINAGENT_OV_IN_PROCESS") == "1"
            entry = _ENGINES[key] = [engine_class(*args) if in_process else ProcessEngine(engine_class, encode, *args), 0]
        entry[1] += 1
        return entry[0]


def release(engine: Any) -> bool:
    """One user fewer; True when it was the last (the caller then closes the engine)."""
    with _ENGINES_LOCK:
        for key, entry in list(_ENGINES.items()):
            if entry[0] is engine:
                entry[1] -= 1
                if entry[1] > 0:
                    return False
                del _ENGINES[key]
        return True


@atexit.register
def _close_all() -> None:
    # Stop each engine between steps rather than let the interpreter end it inside a native call.
    with _ENGINES_LOCK:
        engines = [entry[0] for entry in _ENGINES.values()]
        _ENGINES.clear()
    for engine in engines:
        engine.close(timeout=5.0)


# ----- the child -----------------------------------------------------------------------------

def _child_main(conn, engine_class: type, source: str, precision: str, max_batch: int, cache_root: str | None,
                deterministic: bool) -> None:
    import signal

    # Ctrl-C reaches the whole process group: the run handles it (and closes this engine on its
    # way out); here it would only print a traceback over the run's own message
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    engine = engine_class(Path(source), precision, max_batch, cache_root, deterministic)
    try:
        asyncio.run(_serve(conn, engine))
    finally:
        engine.close(10)
        with contextlib.suppress(OSError):
            conn.close()


async def _serve(conn, engine) -> None:
    from reinagent.records import Message

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue = asyncio.Queue()
    send_lock = threading.Lock()

    def send(msg) -> None:
        with send_lock, contextlib.suppress(OSError, ValueError):
            conn.send(msg)

    def read() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                msg = ("close",)
            loop.call_soon_threadsafe(inbox.put_nowait, msg)
            if msg[0] == "close":
                return

    threading.Thread(target=read, name="ov-child-recv", daemon=True).start()
    counted = await asyncio.to_thread(engine.count, [Message(role="user", content="")])  # loads the model now
    send(("loaded", {**engine.info, "pid": os.getpid()}, counted is not None))
    tasks: dict[int, asyncio.Task] = {}

    async def generate(rid: int, messages, params, rollout_id) -> None:
        try:
            send(("done", rid, await engine.submit(messages, params, rollout_id)))
        except asyncio.CancelledError:
            pass
        except ConfigError as err:
            send(("error", rid, "config", str(err)))
        except Exception as err:  # noqa: BLE001 - every failure reaches its caller as a ModelError
            send(("error", rid, "model", str(err) if isinstance(err, ModelError) else f"{type(err).__name__}: {err}"))
        finally:
            tasks.pop(rid, None)

    while True:
        msg = await inbox.get()
        kind = msg[0]
        if kind == "generate":
            tasks[msg[1]] = asyncio.create_task(generate(*msg[1:]))
        elif kind == "cancel" and msg[1] in tasks:
            tasks[msg[1]].cancel()
        elif kind == "count":
            send(("reply", msg[1], await asyncio.to_thread(engine.count, msg[2])))
        elif kind == "kv":
            send(("reply", msg[1], engine.kv_cache()))
        elif kind == "close":
            break
    for task in list(tasks.values()):
        task.cancel()
