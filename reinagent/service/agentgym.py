"""AgentGym's environment protocol, both ways: `serve-env --protocol agentgym` serves our envs to
AgentGym's clients, and `run --benchmark remote --env-protocol agentgym` drives an AgentGym server.

AgentGym (WooooDyy/AgentGym, the `agentenv` clients) serves WebShop, SciWorld, BabyAI, TextCraft,
ALFWorld, ... each as its own FastAPI server. The common shape of its "id" family, which both sides
here speak:

    POST /create                  (no body, or any object)      -> {"id": INT, "observation": ""}
    POST /reset  {"id", "data_idx"}   (ALFWorld's client: "game") -> {"observation", "reward", "score", "done", ...}
    POST /step   {"id", "action"}                                -> {"observation", "reward", "score", "done", ...}
    GET  /observation?id=INT                                     -> {"observation", "reward", "score", "done"}
    POST /close  {"id"}                                          -> {"closed": true}

`data_idx` is the index of a task in our `/tasks` order (the env is made by the first reset, as
BabyAI's server does; a step before any reset plays task 0); `score` is the episode's summed reward
(BabyAI's and SciWorld's clients read it as the reward); `available_actions` is the environment's
admissible commands where it has them (ALFWorld's client reads it), else []. AgentGym servers
answer a failure with 200 and `{"error": ...}`; ours uses real status codes with the same body,
and our client takes either as an error.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.middleware import Middleware
from starlette.routing import Route

from reinagent.env import Env, EpisodeEnded, StepResult, areset, astep
from reinagent.redact import redact
from reinagent.service.client import EnvServiceError, finite_reward
from reinagent.service.guard import Guard, GuardSettings, short
from reinagent.service.sessions import (Ended, Full, Invalid, NotFound, SessionTable, http_answer, plain,
                                        session_lifespan)
from reinagent.service.shutdown import AnswerWhenStopped

# AgentGym's SearchQA-style clients (the "env_idx" family) send {"env_idx": ENV, "id": TASK}: read as
# our "id" family, their reset(i) reset *another client's* env number i and answered 200 (issue 45).
# Any env_idx is refused, naming the clients this server does speak.
OTHER_FAMILY = ("'env_idx' is the field of AgentGym's SearchQA-style clients, which this server does not speak "
                "(there 'id' names a task, here an env); it serves the \"id\" family's clients: WebShop, "
                "SciWorld, BabyAI, TextCraft, ALFWorld ({\"id\": ENV, \"data_idx\": TASK}; docs/env-protocol.md)")
_INT_ID = re.compile(r"-?[0-9]{1,18}")  # an id as a string ("3"): ASCII digits only ("²" is a digit to str.isdigit)


# --- the server side ----------------------------------------------------------------------------------

@dataclass
class _Slot:
    """One AgentGym env id: our session behind it, and what /observation reports."""

    session_id: str | None = None  # None until the first reset makes the env
    observation: str = ""
    reward: float = 0.0
    score: float = 0.0
    done: bool = False


def _actions(info: dict[str, Any]) -> list[str]:
    for key in ("admissible_commands", "available_actions"):
        if isinstance(info.get(key), list):
            return [str(a) for a in info[key]]
    return []


def create_app(table: SessionTable, *, token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> Starlette:
    """Our benchmark's environments behind AgentGym's routes (the same session table and limits)."""
    slots: dict[int, _Slot] = {}
    ids = itertools.count()

    async def body_of(request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            data = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as err:  # bad syntax or UTF-8, a 5,000-digit number, deep nesting
            raise BadJson(f"invalid JSON: {str(err)[:200] or type(err).__name__}") from None
        if not isinstance(data, dict):
            raise Invalid(f"the body must be a JSON object, got {type(data).__name__}")
        if "env_idx" in data:
            raise Invalid(OTHER_FAMILY)
        return data

    def slot_of(raw: Any) -> tuple[int, _Slot]:
        if isinstance(raw, str) and _INT_ID.fullmatch(raw.strip()):
            raw = int(raw)
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise Invalid(f"'id' must be the integer /create answered, got {short(raw)}")
        if raw not in slots:
            raise NotFound(f"unknown env id {short(raw)} (closed, timed out, or never created)")
        return raw, slots[raw]

    def task_at(data: dict[str, Any]) -> str:
        idx = data.get("data_idx", data.get("game", 0))
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise Invalid(f"'data_idx' must be an integer, got {short(idx)}")
        return table.task_at(idx)

    async def play(slot: _Slot, call, env_id: int | None = None) -> tuple:
        """Reset (env_id None) or step (env_id given) the slot's env, one request at a time."""
        if slot.session_id is None:  # a step before any reset: task 0, as data_idx defaults to
            slot.session_id = (await table.create(table.task_at(0))).id
            await open_episode(slot)
        session = table.get(slot.session_id)
        async with session.lock:
            if env_id is not None:  # as AgentGym's own servers: "The task with environment N has finished."
                session.refuse_if_ended(f'POST /reset {{"id": {env_id}, "data_idx": ...}} '
                                        "(or POST /create for a new env)")
            try:
                result = await call(session.env)
            except EpisodeEnded as err:  # the env refused it itself: the session is fine
                raise Ended(f"the episode has ended ({err.how}); POST /reset to start a new one") from None
            except Exception as err:  # noqa: BLE001 - the env's own failure: that session is gone
                with contextlib.suppress(Exception):
                    await table.close(session.id)
                raise EnvFailed(redact(f"the environment failed: {type(err).__name__}: {str(err)[:300]}")) from None
            if env_id is None:
                session.was_reset, session.ended = True, None
            else:
                session.record_end(bool(result[2]), bool(result[3]))
            return result

    async def open_episode(slot: _Slot) -> dict[str, Any]:
        obs, info = await play(slot, lambda env: areset(env))
        slot.observation, slot.reward, slot.score, slot.done = obs, 0.0, 0.0, False
        return {"observation": obs, "reward": 0.0, "score": 0.0, "done": False,
                "available_actions": _actions(info), "info": plain(info)}

    async def create(request: Request) -> dict[str, Any]:
        await body_of(request)  # any object (TextCraft sends its settings), or none
        pending = sum(slot.session_id is None for slot in slots.values())
        if pending >= table.max_sessions:  # ids never reset hold no env, but must not grow forever
            raise Full(f"{pending} envs created and never reset; reset or close them, or retry later")
        env_id = next(ids)
        slots[env_id] = _Slot()
        return {"id": env_id, "observation": ""}  # TextCraft's client reads it; the task comes with reset

    async def reset(request: Request) -> dict[str, Any]:
        data = await body_of(request)
        _, slot = slot_of(data.get("id"))
        task_id = task_at(data)
        old = table.get(slot.session_id) if slot.session_id is not None else None
        if old is not None and old.task_id != task_id:  # another task: a fresh env under the same int id
            async with old.lock:
                await table.close(old.id)
            old = None
        if old is None:
            slot.session_id = (await table.create(task_id)).id
        return await open_episode(slot)

    async def step(request: Request) -> dict[str, Any]:
        data = await body_of(request)
        env_id, slot = slot_of(data.get("id"))
        action = data.get("action")
        if not isinstance(action, str):
            raise Invalid(f"'action' must be a string, got {type(action).__name__}")
        obs, reward, terminated, truncated, info = await play(slot, lambda env: astep(env, action), env_id)
        slot.observation, slot.reward = obs, float(reward)
        slot.score += float(reward)
        slot.done = bool(terminated or truncated)
        return {"observation": obs, "reward": slot.reward, "score": slot.score, "done": slot.done,
                "terminated": bool(terminated), "truncated": bool(truncated),
                "available_actions": _actions(info), "info": plain(info)}

    async def observation(request: Request) -> dict[str, Any]:
        if "env_idx" in request.query_params:
            raise Invalid(OTHER_FAMILY)
        _, slot = slot_of(request.query_params.get("id"))
        return {"observation": slot.observation, "reward": slot.reward, "score": slot.score, "done": slot.done}

    async def close(request: Request) -> dict[str, Any]:
        env_id, slot = slot_of((await body_of(request)).get("id"))
        del slots[env_id]
        if slot.session_id is not None:
            with contextlib.suppress(NotFound):
                session = table.get(slot.session_id)
                async with session.lock:
                    await table.close(session.id)
        return {"closed": True}

    async def hello(request: Request) -> str:
        return f"This is environment {table.bench.name} (reinagent, AgentGym protocol)."

    async def health(request: Request) -> dict[str, Any]:  # ours, for probes; AgentGym has none
        return {"status": "ok", "benchmark": table.bench.name, "sessions": len(table), "protocol": "agentgym"}

    def endpoint(handler):
        async def run(request: Request) -> JSONResponse:
            try:
                return JSONResponse(await handler(request))
            except (NotFound, Invalid, Ended, Full) as err:
                return JSONResponse({"error": str(err)}, *http_answer(err))
            except BadJson as err:
                return JSONResponse({"error": str(err)}, 400)
            except EnvFailed as err:
                return JSONResponse({"error": str(err)}, 500)
            except Exception as err:  # noqa: BLE001 - a bug of ours: still one JSON line, never a traceback
                return JSONResponse({"error": redact(f"internal error: {type(err).__name__}: {str(err)[:200]}")}, 500)
        return run

    return Starlette(routes=[
        Route("/", endpoint(hello), methods=["GET"]),
        Route("/health", endpoint(health), methods=["GET"]),
        Route("/create", endpoint(create), methods=["POST"]),
        Route("/reset", endpoint(reset), methods=["POST"]),
        Route("/step", endpoint(step), methods=["POST"]),
        Route("/observation", endpoint(observation), methods=["GET"]),
        Route("/close", endpoint(close), methods=["POST"]),
    ], lifespan=session_lifespan(table),
       # the token, Host, content type and body size: guard.py, as on our own protocol
       middleware=[Middleware(AnswerWhenStopped),
                   Middleware(Guard, settings=GuardSettings.of(token, allow_hosts, empty_post_ok=True))])


class EnvFailed(Exception):
    """The environment's own code raised: HTTP 500, that env closed."""


class BadJson(Exception):
    """The body is not JSON (bad syntax, a 5,000-digit number, nesting too deep): HTTP 400."""


# --- the client side ----------------------------------------------------------------------------------

class AgentGymEnv(Env):
    """One task (`data_idx`) on an AgentGym-style server: /create on the first reset, /close at the end."""

    blocking = True  # plain HTTP calls: agents step this env off the event loop

    def __init__(self, url: str, data_idx: int, *, token: str | None = None, timeout_s: float = 300.0):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url, self.data_idx = url.rstrip("/"), data_idx
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)
        self.env_id: Any = None

    def _call(self, method: str, path: str, **kw) -> Any:
        try:
            response = self.http.request(method, path, **kw)
            data = response.json()
        except httpx.HTTPError as err:
            raise EnvServiceError(f"AgentGym server {self.url}{path}: {type(err).__name__}: {err}") from None
        except ValueError:
            raise EnvServiceError(f"AgentGym server {self.url}{path} answered {response.status_code}, "
                                  f"not JSON: {response.text[:200]!r}") from None
        if response.status_code != 200 or (isinstance(data, dict) and "error" in data):
            detail = data.get("error") if isinstance(data, dict) else data
            raise EnvServiceError(f"AgentGym server {self.url}{path} answered {response.status_code}: {detail}",
                                  response.status_code)
        return data

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        if self.env_id is None:
            created = self._call("POST", "/create", json={})
            self.env_id = created["id"] if isinstance(created, dict) else created  # the "env_idx" kind answers a bare int
        data = self._call("POST", "/reset", json={"id": self.env_id, "data_idx": self.data_idx})
        return str(data.get("observation", "")), {"env_id": self.env_id}

    def step(self, action: str) -> StepResult:
        if self.env_id is None:
            self.reset()
        data = self._call("POST", "/step", json={"id": self.env_id, "action": action})
        try:
            obs, done = str(data["observation"]), bool(data["done"])
            reward = finite_reward(data.get("reward", 0.0))
        except (KeyError, TypeError, ValueError) as err:
            raise EnvServiceError(f"AgentGym server step answer is malformed ({type(err).__name__}: {err})") from None
        info = dict(data["info"]) if isinstance(data.get("info"), dict) else {}
        if "score" in data and isinstance(data["score"], (int, float)) and math.isfinite(data["score"]):
            info.setdefault("score", float(data["score"]))
        truncated = bool(data.get("truncated", False))
        return obs, reward, done and not truncated, truncated, info

    def close(self) -> None:
        if self.env_id is not None:
            with contextlib.suppress(EnvServiceError):
                self._call("POST", "/close", json={"id": self.env_id})
            self.env_id = None
        self.http.close()
