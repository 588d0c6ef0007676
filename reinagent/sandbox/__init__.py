"""Contained execution of generated code: never in the framework's own interpreter.

    sandbox = Sandbox(workers=4)
    result = sandbox.run(ExecJob(code="def f(x): return x + 1", tests=["assert f(1) == 2"]))
    results = await sandbox.run_tests([job1, job2, ...])      # parallel, from async code
    verdict = sandbox.judge(HiddenJob(code=..., tests=[...], entry_point="f"))

Two kinds of job. An ExecJob runs the program *and* its tests in the child: for the model's own
internal tests, whose outcome is feedback only (a program can forge it). A HiddenJob is how a
benchmark's hidden tests are judged: they run on the trusted side and call the program through
a proxy that only accepts plain values back (see `judge`); only these verdicts are trusted.

Each run is a separate process with a fresh scratch directory as cwd and HOME, an environment
holding only PATH/HOME/TMPDIR/LANG, CPU-time, memory (the whole program's), file-size and
process-count limits, and a wall-clock timeout that kills the whole process group (and every
process of the run's dedicated uid). The strongest available containment is used (see `modes`); choose one
with `mode=` or the REINAGENT_SANDBOX environment variable (auto, bwrap, uid, rlimits).

    modes.py process.py     containment modes; starting one run and turning what it left into a verdict
    cgroup.py               a cgroup v2 per run (the program's total memory), where the machine allows
    harness.py harness_serve.py   the program inside the sandbox (sent as one source; serve mode apart)
    judge.py wire.py        hidden tests on the trusted side; the plain values that cross
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, Field

from reinagent.config import MAX_TIMEOUT_S
from reinagent.errors import env_count

from reinagent.sandbox.judge import HiddenJob, judge
from reinagent.sandbox.modes import MODE_NOTES, Mode
from reinagent.sandbox.process import Limits, launch_and_wait, probe
from reinagent.text import valid_data

REASONS = ("passed", "failed", "syntax", "timeout", "memory", "exit", "crash", "sandbox_error")


class ExecJob(BaseModel):
    """One program and the tests to run against it, each test run (and reported) on its own."""

    code: str
    tests: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)  # wall clock, whole run
    test_timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)  # None: timeout_s
    explain: bool = True  # for a failed `assert X == Y`, report the value of X


class TestOutcome(BaseModel):
    test: str
    kind: str  # ok, failed, timeout, memory, exit, crash, not_run
    message: str = ""
    actual: str | None = None  # repr of the left side of a failed `assert X == Y`

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


class ExecResult(BaseModel):
    """The verdict of one run. `passed` is true only when the harness reported every test ok."""

    passed: bool
    reason: str  # one of REASONS
    message: str = ""  # one line saying why, for people and for feedback
    output: str = ""  # tail of the program's stdout and stderr
    duration_s: float = 0.0
    tests: list[TestOutcome] = Field(default_factory=list)
    returncode: int | None = None
    mode: str = ""

    @property
    def num_passed(self) -> int:
        return sum(1 for t in self.tests if t.ok)


class Sandbox:
    """A pool of `workers` concurrent sandboxed runs. Thread-safe; one per benchmark is plenty."""

    def __init__(self, workers: int | None = None, *, mode: str | None = None, limits: Limits | None = None,
                 warn: bool = True):
        self.workers = workers or env_count("REINAGENT_SANDBOX_WORKERS", os.cpu_count() or 1, most=1024)
        self.limits = limits or Limits()
        # warn=False: the caller refuses weak modes itself, so no warning line precedes its error
        self.mode = probe(mode or os.environ.get("REINAGENT_SANDBOX", "auto"), self.limits, warn=warn)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        return f"{self.mode.value}: {MODE_NOTES[self.mode]}"

    def run(self, job: ExecJob) -> ExecResult:
        """Run one job and wait (blocking), in a pool slot so that `workers` stays the bound."""
        return self._executor().submit(self._execute, job).result()

    async def arun(self, job: ExecJob) -> ExecResult:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor(), self._execute, job)

    def _execute(self, job: ExecJob) -> ExecResult:
        if not isinstance(job, ExecJob):  # a HiddenJob must never run its tests in the child
            raise TypeError(f"Sandbox.run takes an ExecJob, not {type(job).__name__} (use judge)")
        result = launch_and_wait(self.mode, self.limits, job.model_dump())
        result.pop("reported", None)
        return ExecResult.model_validate(valid_data(result))  # the program's text, made valid

    def judge(self, job: HiddenJob) -> ExecResult:
        """Judge a program by hidden tests run on the trusted side (blocking, in a pool slot)."""
        return self._executor().submit(self._judge, job).result()

    def judge_many(self, jobs: Sequence[HiddenJob]) -> list[ExecResult]:
        return list(self._executor().map(self._judge, jobs))

    async def ajudge(self, job: HiddenJob) -> ExecResult:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor(), self._judge, job)

    def _judge(self, job: HiddenJob) -> ExecResult:
        return ExecResult.model_validate(valid_data(judge(self.mode, self.limits, job)))

    @property
    def is_weak(self) -> bool:
        """True for the fallbacks without bubblewrap (the network and host files are reachable)."""
        return self.mode is not Mode.BWRAP

    async def run_tests(self, jobs: Sequence[ExecJob]) -> list[ExecResult]:
        """All jobs, at most `workers` at a time, results in job order."""
        return list(await asyncio.gather(*(self.arun(job) for job in jobs)))

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="sandbox")
            return self._pool

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


_DEFAULT: Sandbox | None = None
_DEFAULT_LOCK = threading.Lock()


def default_sandbox() -> Sandbox:
    """The process-wide sandbox (workers from REINAGENT_SANDBOX_WORKERS or the CPU count)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Sandbox()
        return _DEFAULT


async def run_tests(jobs: Sequence[ExecJob], *, sandbox: Sandbox | None = None) -> list[ExecResult]:
    """Run jobs in parallel in the (default) sandbox; usable from any async code."""
    return await (sandbox or default_sandbox()).run_tests(jobs)


__all__ = ["REASONS", "ExecJob", "ExecResult", "HiddenJob", "Limits", "Mode", "Sandbox", "TestOutcome",
           "default_sandbox", "run_tests"]
