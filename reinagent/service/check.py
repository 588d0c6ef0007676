"""`reinagent check-env URL`: does a server speak docs/env-protocol.md? (like Gymnasium's checker)

Each check prints one line, `PASS name` or `FAIL name: why`; the exit code is 1 when any check
failed, 2 when the server cannot be reached at all. The checks are safe against a server in use:
they touch only the sessions they open (never the id-less default session a live seed-style
client may be playing), and close every session they open, whatever the server answers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from reinagent.service.client import TOKEN_ENV

STEP_KEYS = ("state", "observation", "reward", "done", "terminated", "truncated", "info")
RESET_KEYS = ("id", "state", "observation", "info")


class Violation(Exception):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Violation(message)


@dataclass
class Checker:
    url: str
    token: str | None = None
    action: str = "look"
    out: Callable[[str], None] = print
    failures: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    opened: set[str] = field(default_factory=set)  # session ids this checker opened and has not closed

    def __post_init__(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.http = httpx.Client(base_url=self.url.rstrip("/"), headers=headers, timeout=600.0)

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
             status: int | tuple[int, ...] = 200) -> dict[str, Any]:
        """The JSON object the server answered, after checking the status and the error shape."""
        if raw is not None:
            response = self.http.request(method, path, content=raw, headers={"Content-Type": "application/json"})
        else:
            response = self.http.request(method, path, json=body)
        return self._checked(method, path, response, status)

    def _checked(self, method: str, path: str, response: httpx.Response,
                 status: int | tuple[int, ...]) -> dict[str, Any]:
        wanted = (status,) if isinstance(status, int) else status
        expect(response.status_code in wanted,
               f"{method} {path} answered {response.status_code}, expected {' or '.join(map(str, wanted))}: "
               f"{response.text[:200]}")
        try:
            data = response.json()
        except ValueError:
            raise Violation(f"{method} {path} answered a body that is not JSON: {response.text[:200]!r}") from None
        expect(isinstance(data, dict), f"{method} {path} answered {type(data).__name__}, not a JSON object")
        if response.status_code >= 400:
            expect(isinstance(data.get("error"), str) and data["error"],
                   f"{method} {path} error body lacks a non-empty string 'error': {data}")
        return data

    def check(self, name: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Violation as err:
            self.failures.append(name)
            self.out(f"FAIL {name}: {err}")
        except httpx.HTTPError as err:
            self.failures.append(name)
            self.out(f"FAIL {name}: {type(err).__name__}: {err}")
        else:
            self.out(f"PASS {name}")

    # --- the checks, in order; later ones use what earlier ones found ------------------------------

    def health(self) -> None:
        data = self.call("GET", "/health")
        expect(data.get("status") == "ok", f"/health status is {data.get('status')!r}, not 'ok'")
        expect(isinstance(data.get("benchmark"), str), "/health lacks a string 'benchmark'")
        expect(type(data.get("sessions")) is int and data["sessions"] >= 0, "/health lacks an int 'sessions' >= 0")
        self.state["sessions"] = data["sessions"]

    def tasks(self) -> None:
        data = self.call("GET", "/tasks")
        tasks = data.get("tasks")
        expect(isinstance(tasks, list) and tasks, "/tasks lacks a non-empty list 'tasks'")
        expect(all(isinstance(t, str) for t in tasks), "/tasks has task ids that are not strings")
        expect(len(set(tasks)) == len(tasks), "/tasks lists a task id twice")
        self.state["task"] = tasks[0]

    def create(self) -> None:
        data = self._create({"task_id": self._task()}, 200)
        expect(isinstance(data.get("id"), str) and data["id"], "/create lacks a non-empty string 'id'")
        self.state["id"] = data["id"]

    def reset(self) -> None:
        data = self.call("POST", "/reset", {"id": self._id(), "seed": 0})
        self._keys("/reset", data, RESET_KEYS)
        expect(data["id"] == self._id(), "/reset answered another session's id")
        self._observation("/reset", data)

    def step(self) -> None:
        data = self.call("POST", "/step", {"id": self._id(), "action": self.action})
        self._step_shape("/step", data)
        if data["done"]:  # that action ended the episode: a step after the end is refused, not played
            self.call("POST", "/step", {"id": self._id(), "action": self.action}, status=409)

    def unknown_id(self) -> None:
        self.call("POST", "/step", {"id": "no-such-session-0000", "action": self.action}, status=404)
        self.call("POST", "/reset", {"id": "no-such-session-0000"}, status=404)

    def unknown_task(self) -> None:
        data = self._create({"task_id": "no such task \u2603"}, (404, 200))
        expect("error" in data, f"/create of an unknown task answered 200 (a session, {data.get('id')!r}, "
               "now closed again), expected 404")

    def malformed(self) -> None:
        self.call("POST", "/step", {"id": self._id()}, status=422)  # no action
        self.call("POST", "/step", {"id": self._id(), "action": 3}, status=422)  # not a string
        self._create({}, 422)  # no task_id
        self.call("POST", "/step", raw=b"{not json", status=(400, 422))

    def close(self) -> None:
        data = self.call("POST", "/close", {"id": self._id()})
        self.opened.discard(self._id())
        expect(data.get("closed") is True, f"/close answered {data}, not {{'closed': true}}")
        self.call("POST", "/step", {"id": self._id(), "action": self.action}, status=404)
        self.call("POST", "/close", {"id": self._id()}, status=404)

    # (No id-less check: the id-less form plays the server's default session, which a live
    # seed-style client may be using; /health's session count moves with other clients too.)

    def release(self, *only: str) -> None:
        """Close the sessions the checks opened and did not close (`only` these, else all)."""
        for sid in sorted(only or self.opened):
            with contextlib.suppress(httpx.HTTPError):
                self.http.post("/close", json={"id": sid})
            self.opened.discard(sid)

    def auth(self) -> None:
        response = httpx.get(self.url.rstrip("/") + "/health", timeout=30.0)
        expect(response.status_code == 401, f"/health without the bearer token answered {response.status_code}, not 401")

    # --- helpers ------------------------------------------------------------------------------------

    def _create(self, body: dict, status: int | tuple[int, ...]) -> dict[str, Any]:
        """POST /create, remembering any session it opened (even one it should not have)."""
        response = self.http.post("/create", json=body)
        if response.status_code == 200:
            try:
                sid = response.json().get("id")
            except (ValueError, AttributeError):
                sid = None
            if isinstance(sid, str) and sid:
                self.opened.add(sid)
                if status != 200:  # a session where none was due: close it before judging
                    self.release(sid)
        return self._checked("POST", "/create", response, status)

    def _task(self) -> str:
        expect("task" in self.state, "no task id to use (the /tasks check failed)")
        return self.state["task"]

    def _id(self) -> str:
        expect("id" in self.state, "no session to use (the /create check failed)")
        return self.state["id"]

    @staticmethod
    def _keys(where: str, data: dict, keys: tuple[str, ...]) -> None:
        missing = [k for k in keys if k not in data]
        expect(not missing, f"{where} lacks {', '.join(missing)}")

    @staticmethod
    def _observation(where: str, data: dict) -> None:
        expect(isinstance(data["observation"], str), f"{where} observation is not a string")
        expect(data["state"] == data["observation"], f"{where} state differs from observation")
        expect(isinstance(data["info"], dict), f"{where} info is not an object")

    def _step_shape(self, where: str, data: dict) -> None:
        self._keys(where, data, STEP_KEYS)
        self._observation(where, data)
        expect(isinstance(data["reward"], (int, float)) and not isinstance(data["reward"], bool),
               f"{where} reward is not a number")
        for key in ("done", "terminated", "truncated"):
            expect(isinstance(data[key], bool), f"{where} {key} is not a boolean")
        expect(data["done"] == (data["terminated"] or data["truncated"]),
               f"{where} done={data['done']} but terminated={data['terminated']}, truncated={data['truncated']}")

    def run(self) -> int:
        try:
            self.http.get("/health")
        except httpx.HTTPError as err:
            # exit 2, as for any check that fails before work (README "Exit codes"); 1 is a violation
            self.out(f"FAIL reachable: nothing answers at {self.url} ({type(err).__name__}: {err}); "
                     "no protocol check ran (exit 2)")
            return 2
        checks = [
            ("health", self.health), ("tasks", self.tasks), ("create", self.create), ("reset", self.reset),
            ("step", self.step), ("unknown session id -> 404", self.unknown_id),
            ("unknown task -> 404", self.unknown_task), ("malformed body -> 422/400", self.malformed),
            ("close", self.close),
        ]
        if self.token:
            checks.append(("no token -> 401", self.auth))
        try:
            for name, fn in checks:
                self.check(name, fn)
        finally:
            self.release()
            self.http.close()
        passed = len(checks) - len(self.failures)
        self.out(f"{passed} checks passed, {len(self.failures)} failed")
        return 1 if self.failures else 0


def run_checks(url: str, *, token: str | None = None, action: str = "look") -> int:
    return Checker(url, token or os.environ.get(TOKEN_ENV), action).run()
