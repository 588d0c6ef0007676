"""Hidden tests judged on the trusted side; only the program runs in the sandbox (as EvalPlus).

    result = sandbox.judge(HiddenJob(code=program, tests=["assert add(1, 2) == 3"], entry_point="add"))

The sandboxed harness loads the program and then serves calls: the benchmark's own test code
(HumanEval's `check(candidate)`, MBPP's asserts) runs *here*, in the framework's process, and
`add` in it is a proxy that sends the plain arguments to the child and returns a fresh plain
value rebuilt from the child's reply (reinagent/sandbox/wire.py). So:

- the assertions run in code the program cannot reach, on values it never touched (no
  `__eq__` override or float subclass survives the trip);
- a pass is this side's own evidence: every hidden test's code ran to its end without an
  exception, and every call to the program got a plain value back. Nothing the child says,
  prints or exits with can make a test pass: the child dying (any exit status, at load time or
  during a call), hanging past the deadline, raising, or answering with anything malformed
  fails that test.

The benchmark's helpers that tests use (HumanEval/32's `poly`, /38's `encode_cyclic`, MBPP's
test_imports) come from the benchmark's own data (`trusted_setup`), never from the program.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import marshal
import os
import select
import signal
import sys
import time
from typing import Any

from pydantic import BaseModel, Field

from reinagent.config import MAX_TIMEOUT_S
from reinagent.sandbox.modes import Mode
from reinagent.sandbox.process import KIND_TO_REASON, Child, Limits, _signal_of, frame, started, summarise, wall_limit
from reinagent.sandbox.wire import (
    MAX_REPLY_BYTES, CandidateFailure, NotPlain, ReplyTooLarge, check_plain, parse_reply, rebuild,
)

FATAL = ("timeout", "memory", "exit", "crash")  # the child is gone: later tests cannot run
_QUIET_BUILTINS = {**vars(builtins), "print": lambda *args, **kwargs: None}  # keep our stdout ours


class HiddenJob(BaseModel):
    """A program and the benchmark's hidden tests, which run on the trusted side."""

    code: str  # the program: runs in the sandbox
    tests: list[str] = Field(default_factory=list)  # each one trusted Python code, run here
    entry_point: str  # the name the tests call; a proxy to the program's function
    trusted_setup: str = ""  # the benchmark's own code run here before the tests
    timeout_s: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)  # wall clock, whole run
    call_timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)  # None: timeout_s


class Proxy:
    """Stands for a function of the program inside the trusted test code."""

    __slots__ = ("_session", "_name")

    def __init__(self, session: Session, name: str):
        self._session, self._name = session, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._session.call(self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<the program's {self._name}>"


class Session:
    """The pipes to one serving child: send a request, wait for its reply under a deadline."""

    def __init__(self, child: Child, mode: Mode, deadline: float, per_call_s: float, limit_s: float):
        self.child, self.mode, self.deadline, self.per_call_s = child, mode, deadline, per_call_s
        self.limit_s = limit_s  # as the user set it, for messages
        self.failure: tuple[str, str] | None = None  # the current test's first failed call
        self.dead: tuple[str, str] | None = None  # the child is gone, and why
        self.calls = self._seq = 0
        self._in = child.proc.stdin.fileno()
        self._out = child.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        # poll, not select: select() refuses fd numbers above 1023, which a busy framework reaches
        self._writable, self._readable = select.poll(), select.poll()
        self._writable.register(self._in, select.POLLOUT)
        self._readable.register(self._out, select.POLLIN)
        self._buffer = bytearray()

    def fail(self, kind: str, message: str) -> CandidateFailure:
        if self.failure is None:
            self.failure = (kind, message)
        if kind in FATAL and self.dead is None:
            self.dead = (kind, message)
        return CandidateFailure(kind, message)

    def send(self, data: bytes, until: float) -> None:
        view = memoryview(data)
        while view:
            left = until - time.monotonic()
            if left <= 0:
                raise self._timeout()
            if not self._writable.poll(min(left, 0.1) * 1000):
                self._check_alive()
                continue
            try:
                view = view[os.write(self._in, view):]
            except BlockingIOError:
                continue
            except OSError:  # a broken pipe: the child is gone
                raise self._died() from None

    def receive(self, until: float) -> Any:
        """The next reply frame, parsed as JSON (not yet trusted)."""
        while True:
            if len(self._buffer) >= 4:
                size = int.from_bytes(self._buffer[:4], "big")
                if size > MAX_REPLY_BYTES:
                    self.child.kill()
                    raise self.fail("crash", f"the program's reply is larger than {MAX_REPLY_BYTES >> 20} MiB")
                if len(self._buffer) >= 4 + size:
                    data = bytes(self._buffer[4 : 4 + size])
                    del self._buffer[: 4 + size]
                    try:
                        return parse_reply(data)
                    except ReplyTooLarge as err:  # hostile: the child is killed, the run ends here
                        self.child.kill()
                        raise self.fail("crash", f"the program's reply is too large: {err}") from None
            left = until - time.monotonic()
            if left <= 0 and not self._readable.poll(0):
                # past the deadline with nothing to read; a reply already in the pipe (this side
                # was starved of CPU, or stopped, while the program answered) is still read
                raise self._timeout()
            if not self._readable.poll(max(0.0, min(left, 0.1)) * 1000) and self.child.proc.poll() is None:
                continue
            # Readable, or the child is gone: what it wrote before it exited is read first (a
            # harness that answered "timeout" exits by itself right after its reply).
            try:
                chunk = os.read(self._out, 1 << 20)
            except BlockingIOError:  # nothing written; gone with a forked grandchild holding the pipe
                if self.child.proc.poll() is not None:
                    raise self._died() from None
                continue
            if not chunk:
                raise self._died()
            self._buffer += chunk

    def _check_alive(self) -> None:
        # A forked grandchild may hold the pipes open after the program itself died.
        if self.child.proc.poll() is not None:
            raise self._died()

    def _timeout(self) -> CandidateFailure:
        self.child.kill()
        return self.fail("timeout", f"no reply within the wall-clock backstop of a {self.limit_s:g} s CPU limit per call (waiting, not computing; killed)")

    def _died(self) -> CandidateFailure:
        if self.child.proc.poll() is None:
            self.child.kill()
        code = self.child.proc.returncode
        sig = _signal_of(code, self.mode)
        if sig == signal.SIGXCPU:
            return self.fail("timeout", "CPU time limit exceeded")
        if "MemoryError" in self.child.output() or self.child.oom_killed():
            return self.fail("memory", "MemoryError: memory limit exceeded")
        if sig is not None:
            return self.fail("crash", f"killed by signal {signal.Signals(sig).name}")
        return self.fail("exit", f"the program exited (status {code}) before returning")

    def exchange(self, request: bytes | None, seq: int) -> Any:
        """Send a request (None: wait for the load reply) and return the reply's plain value."""
        if self.dead is not None:
            raise CandidateFailure(*self.dead)
        until = min(self.deadline, time.monotonic() + self.per_call_s)
        if request is not None:
            self.send(request, until)
        try:
            node = self.receive(until)
            if type(node) is not list or len(node) < 3 or node[0] not in ("r", "e") or node[1] != seq:
                raise NotPlain("malformed reply")
            if node[0] == "e":
                kind, message = node[2], bytes.fromhex(node[3]).decode("utf-8", "replace")
                if kind in FATAL:
                    self.child.kill()
                raise self.fail(kind if kind in (*FATAL, "syntax") else "failed", message[:500])
            return rebuild(node[2], self.fail)
        except (NotPlain, ValueError, IndexError, TypeError) as err:
            raise self.fail("failed", f"unusable reply from the program: {err}") from None

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        if self.failure is not None:  # a test that swallowed a failed call does not go on
            raise CandidateFailure(*self.failure)
        try:
            check_plain(args)
            check_plain(kwargs)
        except NotPlain as err:
            raise self.fail("failed", f"cannot pass {err} to the program") from None
        self._seq += 1
        self.calls += 1
        return self.exchange(frame(marshal.dumps((self._seq, name, args, kwargs))), self._seq)


def free_names(tests: list[str]) -> set[str]:
    """Names the tests read but never bind themselves (a rough scope-free over-approximation)."""
    loaded, bound = set(), set()
    for test in tests:
        for node in ast.walk(ast.parse(test)):
            if isinstance(node, ast.Name):
                (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return loaded - bound


def trusted_namespace(job: HiddenJob, session: Session) -> dict[str, Any]:
    """Globals for the hidden tests: the benchmark's setup, proxies for the program's functions,
    and standard-library modules the tests use without importing them (MBPP 596's `sys`)."""
    ns: dict[str, Any] = {"__builtins__": _QUIET_BUILTINS, "__name__": "hidden_tests"}
    if job.trusted_setup:
        exec(compile(job.trusted_setup, "<benchmark setup>", "exec", optimize=0, dont_inherit=True), ns)
    for name in sorted(free_names(job.tests) - {job.entry_point}):
        if name in ns or name in _QUIET_BUILTINS:
            continue
        if name in sys.stdlib_module_names:
            ns[name] = importlib.import_module(name)
        else:
            ns[name] = Proxy(session, name)
    ns[job.entry_point] = Proxy(session, job.entry_point)
    return ns


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= 500 else text[:500] + "..."


def run_hidden_test(test: str, index: int, ns: dict[str, Any], session: Session) -> tuple[str, str]:
    """(kind, message) of one hidden test; 'ok' only if its code ran to the end, here."""
    session.failure = None
    code = compile(test, f"<hidden test {index}>", "exec", optimize=0, dont_inherit=True)  # asserts kept
    try:
        exec(code, ns)
    except CandidateFailure:
        pass  # recorded in session.failure
    except AssertionError as exc:
        return session.failure or ("failed", _describe(exc))
    except Exception as exc:  # noqa: BLE001 - e.g. a TypeError from an opaque result
        return session.failure or ("failed", _describe(exc))
    return session.failure or ("ok", "")


def judge(mode: Mode, limits: Limits, job: HiddenJob) -> dict[str, Any]:
    """Run `job` once: an ExecResult as a dict. Never raises for the program's behaviour."""
    base: dict[str, Any] = {"mode": mode.value}
    per_call = job.call_timeout_s or job.timeout_s
    try:
        with started(mode, limits, job.timeout_s, {"code": job.code, "call_cpu_s": per_call}, serve=True) as child:
            # The harness limits each call's CPU time and RLIMIT_CPU the whole run's; these wall
            # clocks are backstops for a program that waits (process.Limits.wall_factor).
            session = Session(child, mode, child.start + wall_limit(job.timeout_s, limits),
                              wall_limit(per_call, limits), per_call)
            result = _judge_in(session, job)
            if session.dead is None:
                child.proc.stdin.close()  # the harness returns on end of input
                with contextlib.suppress(Exception):  # still running: `started` kills it
                    child.proc.wait(timeout=min(1.0, max(0.0, session.deadline - time.monotonic())))
                    child.clean = child.proc.returncode == 0
            else:
                child.kill()
            base["returncode"] = child.proc.returncode
            base["duration_s"] = round(time.monotonic() - child.start, 4)
            base["output"] = child.output().rstrip("\n")[-limits.output_chars :]
            return {**base, **result}
    except OSError as err:
        return {**base, "passed": False, "reason": "sandbox_error", "message": f"cannot start: {err}"}


def _judge_in(session: Session, job: HiddenJob) -> dict[str, Any]:
    try:
        session.send(frame(marshal.dumps(session.child.spec)), session.deadline)
        session.exchange(None, 0)  # the load reply: the program's top level ran
    except CandidateFailure as failed:
        reason = KIND_TO_REASON.get(failed.kind, "failed")
        message = failed.message if reason == "syntax" else f"while loading the code: {failed.message}"
        return {"passed": False, "reason": reason, "message": message}
    try:
        ns = trusted_namespace(job, session)
    except Exception as err:  # noqa: BLE001 - the benchmark's own setup is broken
        return {"passed": False, "reason": "sandbox_error", "message": f"hidden test setup failed: {_describe(err)}"}
    outcomes = []
    for i, test in enumerate(job.tests):
        if session.dead is not None:
            outcomes.append({"test": test, "kind": "not_run", "message": "not run (an earlier test ended the run)"})
            continue
        kind, message = run_hidden_test(test, i, ns, session)
        outcomes.append({"test": test, "kind": kind, "message": message})
    verdict = summarise(outcomes, len(job.tests))
    if verdict["passed"] and session.calls == 0:
        return {"passed": False, "reason": "failed", "message": "the hidden tests never called the program",
                "tests": outcomes}
    return verdict
