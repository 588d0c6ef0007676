"""`reinagent serve-env`: one benchmark's environments over HTTP/JSON (Starlette on uvicorn).

Plain Starlette rather than FastAPI: the protocol's error bodies (`{"error": ...}`, 400 for
invalid JSON, 422 for a malformed body) are written here once, and a step costs no more than
parsing one small JSON object. Every step runs in a thread, so one slow game (or a long search)
never holds up another session; guard.py checks Host, token, content type and body size first.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reinagent.env import EpisodeEnded
from reinagent.errors import ConfigError
from reinagent.redact import redact
from reinagent.service import protocol as p
from reinagent.service.connections import hardened_server
from reinagent.service.guard import Guard, GuardSettings, is_loopback
from reinagent.service.shutdown import AnswerWhenStopped
from reinagent.service.sessions import (
    SHUTDOWN_S, Ended, Full, Invalid, NotFound, Session, SessionTable, base_settings, http_answer, load_benchmark,
    plain, session_lifespan, step_option,
)

M = TypeVar("M", bound=BaseModel)
TOKEN_ENV = "REINAGENT_ENV_TOKEN"


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def _json(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json", headers=headers)


async def _parse(request: Request, model: type[M]) -> M:
    body = await request.body()
    try:
        data = json.loads(body) if body.strip() else {}
    except (ValueError, RecursionError) as err:  # bad syntax or UTF-8, a 5,000-digit number, deep nesting
        raise HttpError(400, f"invalid JSON: {str(err)[:200] or type(err).__name__}") from None
    if not isinstance(data, dict):
        raise HttpError(422, f"the body must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except RecursionError:
        raise HttpError(422, "the body is nested too deeply") from None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "body"
        raise HttpError(422, f"{where}: {first['msg']}") from None


def create_app(table: SessionTable, *, token: str | None = None, executor_threads: int = 16,
               allow_hosts: tuple[str, ...] = ()) -> Starlette:
    # the token, the Host header, JSON content types and the body size: checked in guard.py
    guard = GuardSettings.of(token, allow_hosts)

    def endpoint(handler: Callable[[Request], Awaitable[BaseModel]]):
        async def run(request: Request) -> Response:
            try:
                return _json(await handler(request))
            except HttpError as err:
                return _json(p.Error(error=err.message), err.status, err.headers)
            except (NotFound, Invalid, Ended, Full) as err:
                return _json(p.Error(error=str(err)), *http_answer(err))
            except Exception as err:  # noqa: BLE001 - a bug of ours: still one JSON line, never a traceback
                return _json(p.Error(error=redact(f"internal error: {type(err).__name__}: {str(err)[:200]}")), 500)
        return run

    async def guarded(session: Session, what: str, call: Awaitable):
        """Run an env call; an env that raises is closed (its state is unknown) and answers 500."""
        try:
            return await call
        except EpisodeEnded as err:  # the env refused a step after the end: the session is fine
            raise Ended(f"the episode has ended ({err.how}): a step after the end is not played; "
                        "POST /reset to start a new episode") from None
        except Exception as err:  # noqa: BLE001 - any failure of the environment's own code
            with contextlib.suppress(Exception):
                await table.close(session.id)
            raise HttpError(500, redact(f"the environment failed on {what}: {type(err).__name__}: {str(err)[:300]} "
                                        f"(session {session.id} closed)")) from None

    # Resets of blocking envs (an ALFWorld reset spawns a worker and loads a game: seconds of CPU)
    # take turns: 32 at once on 2 cores each took 16x as long and ran past the engine's load
    # timeout (all 32 failed under load); queued, each load is fast and steps go on meanwhile.
    reset_slots = asyncio.Semaphore(max(2, os.cpu_count() or 1))

    async def start_episode(session: Session, seed: int | None):
        if not getattr(session.env, "blocking", False):
            return await guarded(session, "reset", off_loop_reset(session.env, seed))
        async with reset_slots:
            return await guarded(session, "reset", off_loop_reset(session.env, seed))

    async def locked(session: Session) -> contextlib.AbstractAsyncContextManager:
        await session.lock.acquire()
        if table.sessions.get(session.id) is not session:  # closed while we waited
            session.lock.release()
            raise NotFound(f"unknown session id {session.id!r} (closed while the request waited)")
        return session.lock

    async def health(request: Request) -> BaseModel:
        return p.Health(benchmark=table.bench.name, sessions=len(table), split=table.config.split)

    async def tasks(request: Request) -> BaseModel:
        return p.Tasks(tasks=list(table.tasks))

    async def create(request: Request) -> BaseModel:
        req = await _parse(request, p.CreateRequest)
        session = await table.create(req.task_id, req.options)
        return p.Created(id=session.id)

    async def reset(request: Request) -> BaseModel:
        req = await _parse(request, p.ResetRequest)
        session = table.get(req.id) if req.id is not None else await table.default_for_reset(req.task_id, req.idx)
        lock = await locked(session)
        try:
            obs, info = await start_episode(session, req.seed)
            session.was_reset, session.ended = True, None
        finally:
            session.last_used = time.monotonic()  # idle counts from the end of a long request
            lock.release()
        return p.ResetResult(id=session.id, state=obs, observation=obs, info=plain(info))

    async def step(request: Request) -> BaseModel:
        req = await _parse(request, p.StepRequest)
        session = table.get(req.id, req.idx)
        lock = await locked(session)
        try:
            # checked here, whatever the env does: a second Finish is never judged again
            session.refuse_if_ended(_how_to_reset(req))
            for name, value in req.options.items():
                step_option(session.env, name, value)
            if not session.was_reset:  # a step before any reset starts the episode first
                await start_episode(session, None)
                session.was_reset = True
            obs, reward, terminated, truncated, info = await guarded(
                session, "step", asyncio.to_thread(session.env.step, req.action))  # never on the loop
            session.record_end(bool(terminated), bool(truncated))
        finally:
            session.last_used = time.monotonic()
            lock.release()
        return p.StepResult.of(obs, reward, bool(terminated), bool(truncated), plain(info))

    async def close(request: Request) -> BaseModel:
        req = await _parse(request, p.CloseRequest)
        session = table.get(req.id)
        async with session.lock:  # never close an env under a running step
            await table.close(req.id)
        return p.Closed()

    lifespan = session_lifespan(table, executor_threads)

    routes = [
        Route("/health", endpoint(health), methods=["GET"]),
        Route("/tasks", endpoint(tasks), methods=["GET"]),
        Route("/create", endpoint(create), methods=["POST"]),
        Route("/reset", endpoint(reset), methods=["POST"]),
        Route("/step", endpoint(step), methods=["POST"]),
        Route("/close", endpoint(close), methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(AnswerWhenStopped), Middleware(Guard, settings=guard)])

    async def not_found(request, exc):
        status = getattr(exc, "status_code", 500)
        message = "no such endpoint; valid: GET /health, GET /tasks, POST /create, /reset, /step, /close" \
            if status in (404, 405) else str(getattr(exc, "detail", exc))
        return _json(p.Error(error=message), status)

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, not_found)
    return app


def _how_to_reset(req: p.StepRequest) -> str:
    """What a client whose episode has ended sends next, in the form it used."""
    if req.id is not None:
        return 'POST /reset {"id": ...} with this id (or POST /create for another task)'
    return "POST /reset" + ("" if req.idx is None else f' {{"idx": {req.idx}}}')


async def off_loop_reset(env, seed: int | None):
    """A reset off the event loop: the env's own async path where it has one (ALFWorld waits for a
    pooled worker without a thread), else a thread. Steps always run in a thread: a 100 KB search
    through difflib, or a program's syntax check, would otherwise stall every other session."""
    if hasattr(env, "areset"):
        return await env.areset(seed=seed)
    return await asyncio.to_thread(env.reset, seed=seed)


def _bind(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535 (0 picks a free one), got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP; without it
    # every answer (headers, then body) waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is in use; choose another --port (0 picks a free one)") from None
        raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(benchmark: str, *, split: str | None = None, host: str = "127.0.0.1", port: int = 8000,
          max_sessions: int = 64, idle_timeout_s: float = 600.0, token: str | None = None,
          allow_hosts: tuple[str, ...] = (), max_timeout_s: float = 60.0, protocol: str = "reinagent") -> int:
    """Serve until SIGTERM/SIGINT; every session is closed on the way out. Returns the exit code."""
    import uvicorn

    token = token or os.environ.get(TOKEN_ENV) or None
    if max_sessions < 1:
        raise ConfigError(f"--max-sessions must be at least 1, got {max_sessions}")
    if idle_timeout_s <= 0:
        raise ConfigError(f"--idle-timeout-s must be positive, got {idle_timeout_s}")
    if not 0 < max_timeout_s < float("inf"):
        raise ConfigError(f"--max-timeout-s must be a positive number of seconds, got {max_timeout_s}")
    if not is_loopback(host) and not token:
        raise ConfigError(f"serving on {host} (not loopback) needs a token: --token T or ${TOKEN_ENV}")
    bench = load_benchmark(benchmark)
    table = SessionTable(bench, base_settings(bench, split, max_sessions), max_sessions, idle_timeout_s,
                         max_timeout_s=max_timeout_s)
    sock = _bind(host, port)
    if protocol == "agentgym":  # AgentGym's clients: int ids, data_idx (reinagent/service/agentgym.py)
        from reinagent.service import agentgym

        app = agentgym.create_app(table, token=token, allow_hosts=allow_hosts)
    else:
        app = create_app(table, token=token, executor_threads=max(8, min(max_sessions, 64)) + 4,
                         allow_hosts=allow_hosts)
    # Clients drop idle pooled connections after 5 s (see client.py): the server keeps them longer,
    # so a client never sends on a connection the server is closing.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_keep_alive=75, timeout_graceful_shutdown=SHUTDOWN_S)
    server = hardened_server(config)  # slowloris: header timeout, connection cap, bounded log (connections.py)

    def stop(signum, frame) -> None:
        # Before uvicorn installs its handlers this ends the server at start-up; after its graceful
        # shutdown uvicorn re-raises the signal it caught, which lands here: exit 0, not death by signal.
        server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    shown = "" if protocol == "reinagent" else f" ({protocol} protocol)"
    print(f"serving {bench.name}{shown} on {url_of(host, sock.getsockname()[1])}", flush=True)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(server.serve(sockets=[sock]))
    finally:
        loop.close()  # unlike asyncio.run, does not wait for the executor's threads
    _exit_if_threads_linger()
    return 0


def _exit_if_threads_linger() -> None:
    """A step still running in a thread (a sandboxed program looping until its timeout) would keep
    the process alive after SIGTERM, since Python joins executor threads at exit: end it now. Its
    sandboxed children die with it (bubblewrap's --die-with-parent, the harness's PDEATHSIG)."""
    deadline = time.monotonic() + SHUTDOWN_S  # idle executor threads end at once: wait for those
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
