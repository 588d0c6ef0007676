"""Start one sandboxed run, enforce its wall clock, clean up, and turn what it left into a verdict."""

from __future__ import annotations

import json
import marshal
import math
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError, choices
from reinagent.sandbox.cgroup import RunCgroup, usable_base
from reinagent.sandbox.harness import STARTED
from reinagent.sandbox.modes import (
    UIDS,
    Launch,
    Mode,
    bwrap_launch,
    is_root,
    kill_uid,
    plain_launch,
    sweep_files_of,
    uid_base,
    warn_weak,
)

# One program in two files (harness_serve.py defines the serve mode, harness.py ends by calling main).
HARNESS = "\n".join(Path(__file__).with_name(name).read_text(encoding="utf-8")
                     for name in ("harness_serve.py", "harness.py"))
READ_TAIL_BYTES = 256 << 10


@dataclass(frozen=True)
class Limits:
    """Per-run resource limits.

    memory_mb caps the program's *total* memory, all its processes together: a cgroup v2's
    memory.max where the machine gives us one (reinagent/sandbox/cgroup.py; then each process may
    have all of it and cgroup_nproc processes). Elsewhere a per-process limit is all the kernel
    offers: each process gets memory_mb / nproc of address space (RLIMIT_AS) and RLIMIT_NPROC
    allows nproc processes and threads, so their product stays within memory_mb."""

    memory_mb: int = 1024
    file_mb: int = 16  # largest file (or output) the program may write
    nproc: int = 4  # without a cgroup: processes and threads of the run's uid, memory_mb / nproc each
    cgroup_nproc: int = 32  # with one: its pids.max, and RLIMIT_NPROC
    scratch_mb: int = 64  # size of the private /sandbox and /tmp under bubblewrap
    grace_s: float = 3.0  # wall-clock allowance for start-up and teardown on top of the backstop
    # Time limits count the CPU the program spends (the harness's ITIMER_PROF per test or call,
    # RLIMIT_CPU for the whole run): a model generating beside the judge slows the program's
    # clock, not its CPU. The wall clock is only a backstop for a program that waits: this many
    # times the limit (docs/programming.md, "What the time limit measures").
    wall_factor: float = 5.0
    output_chars: int = 2000  # tail of the output kept in the result


def rlimits(limits: Limits, timeout_s: float, extra_nproc: int, *, cgroup: bool = False) -> dict[str, tuple[int, int]]:
    """(soft, hard) per limit; the program cannot raise them again. cgroup: memory.max holds the
    whole program, so one process may use it all."""
    cpu = math.ceil(timeout_s) + 1
    nproc = limits.cgroup_nproc if cgroup else limits.nproc
    per_process = (limits.memory_mb << 20) // (1 if cgroup else max(1, nproc))
    return {
        "RLIMIT_AS": (per_process,) * 2,
        "RLIMIT_CPU": (cpu, cpu + 1),  # SIGXCPU at the soft limit tells "timeout" from a kill
        "RLIMIT_FSIZE": (limits.file_mb << 20,) * 2,
        "RLIMIT_NPROC": (nproc + extra_nproc,) * 2,
        "RLIMIT_CORE": (0, 0),
    }


def wall_limit(cpu_s: float, limits: Limits) -> float:
    """The wall-clock backstop for a run or call limited to `cpu_s` seconds of CPU."""
    return cpu_s * limits.wall_factor + limits.grace_s


def _launch(mode: Mode, limits: Limits, uid: int | None) -> Launch:
    if mode is Mode.BWRAP:
        return bwrap_launch(HARNESS, scratch_mb=limits.scratch_mb, uid=uid)
    scratch = tempfile.mkdtemp(prefix="reinagent-sandbox-")
    return plain_launch(HARNESS, scratch=scratch, uid=uid)


def frame(data: bytes) -> bytes:
    """A length-prefixed frame, as the harness reads them from stdin."""
    return len(data).to_bytes(4, "big") + data


@dataclass
class Child:
    """One started sandboxed process; `started` cleans up everything it leaves behind."""

    proc: subprocess.Popen
    launch: Launch
    uid: int | None
    out: Any  # the temporary file holding its stdout and stderr (serve mode: stderr only)
    start: float
    spec: dict[str, Any]  # what to send as the first stdin frame (the caller's, completed)
    clean: bool = False  # exited on its own under bubblewrap: nothing of it can be left
    started_fd: int | None = None  # read end of the harness's "contained, about to run" pipe
    cgroup: RunCgroup | None = None  # the run's own cgroup, where the machine gives us one

    def oom_killed(self) -> bool:
        return self.cgroup is not None and self.cgroup.oom_killed()

    def kill(self) -> None:
        _kill_group(self.proc.pid)
        self.proc.wait()

    def output(self) -> str:
        return _tail(self.out)

    def ran_program(self) -> bool:
        """Whether the harness got as far as the program (the sandbox started).

        The harness writes this to a pipe of its own and closes it before any untrusted code runs:
        the program cannot take back what is already in a pipe, nor write to one it never held,
        unlike the output file it shares (which it may truncate and fill with a fake bwrap error)."""
        if self.started_fd is None:
            return False
        try:
            return STARTED.encode() in os.read(self.started_fd, 64)
        except BlockingIOError:
            return False


@contextmanager
def started(mode: Mode, limits: Limits, timeout_s: float, spec: dict[str, Any], *, serve: bool) -> Iterator[Child]:
    """Start the harness with `spec` (sent as the first stdin frame) and clean up after it.

    serve=True keeps stdin open for requests and gives the replies their own pipe (stdout);
    otherwise stdout and stderr go together to a temporary file. Raises OSError when the
    sandbox cannot start."""
    uid = UIDS.fresh() if is_root() and mode is not Mode.RLIMITS else None
    launch: Launch | None = None
    child: Child | None = None
    group: RunCgroup | None = None
    try:
        launch = _launch(mode, limits, uid)
        base = usable_base()
        if base is not None:
            group = RunCgroup(base, limits.memory_mb, limits.cgroup_nproc)
        spec = {**spec, "serve": serve, "drop": launch.drop, "wall_factor": limits.wall_factor,
                "limits": rlimits(limits, timeout_s, launch.extra_nproc, cgroup=group is not None)}
        if mode is not Mode.BWRAP:  # bwrap has --die-with-parent; elsewhere the harness prctl()s
            spec["parent_pid"] = os.getpid()
        with tempfile.TemporaryFile() as out:
            started_r, started_w = os.pipe()
            os.set_blocking(started_r, False)
            spec["started_fd"] = started_w
            try:
                proc = subprocess.Popen(
                    group.wrap(launch.argv) if group is not None else launch.argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE if serve else out,
                    stderr=out if serve else subprocess.STDOUT,
                    env=launch.env,
                    cwd=launch.cwd,
                    start_new_session=True,  # its own process group, killed as a whole
                    close_fds=True,
                    pass_fds=(started_w,),  # bwrap passes it on; the harness closes it
                )
            except BaseException:
                os.close(started_r)
                raise
            finally:
                os.close(started_w)
            child = Child(proc, launch, uid, out, time.monotonic(), spec, started_fd=started_r, cgroup=group)
            try:
                yield child
            finally:
                if proc.poll() is None:
                    child.kill()
                for stream in (proc.stdin, proc.stdout):
                    if stream is not None:
                        with suppress(OSError):
                            stream.close()
                os.close(started_r)
    finally:
        if uid is not None and not (child is not None and child.clean and mode is Mode.BWRAP):
            # Escapees of the process group, orphans, a fork bomb's leftovers. Under bubblewrap
            # the pid namespace dies with its first process, so a clean exit needs no sweep.
            kill_uid(uid)
        if uid is not None and mode is not Mode.BWRAP:
            sweep_files_of(uid)  # what it wrote to /tmp, /var/tmp, /dev/shm must not outlive it
        if launch is not None and launch.host_scratch:
            shutil.rmtree(launch.host_scratch, ignore_errors=True)
        if group is not None:
            group.remove()


def launch_and_wait(mode: Mode, limits: Limits, job: dict[str, Any]) -> dict[str, Any]:
    """Run `job` (an ExecJob as a dict) once; the ExecResult as a dict. Never raises for the
    program's behaviour; a sandbox that cannot start gives reason 'sandbox_error'."""
    nonce = secrets.token_hex(16)
    spec = {
        "nonce": nonce,
        "code": job["code"],
        "tests": job["tests"],
        "test_timeout_s": job.get("test_timeout_s") or job["timeout_s"],
        "explain": job.get("explain", True),
    }
    try:
        with started(mode, limits, job["timeout_s"], spec, serve=False) as child:
            proc = child.proc
            timed_out = False
            try:
                proc.communicate(frame(marshal.dumps(child.spec)), timeout=wall_limit(job["timeout_s"], limits))
            except subprocess.TimeoutExpired:
                timed_out = True
                child.kill()
            duration = time.monotonic() - child.start
            result = interpret(child.output(), nonce, proc.returncode, timed_out, job, mode, limits,
                               started=child.ran_program())
            if result.get("reason") in ("crash", "exit") and child.oom_killed():
                result.update(reason="memory", message=f"memory limit exceeded ({limits.memory_mb} MiB, all processes)")
            result["duration_s"] = round(duration, 4)
            child.clean = not timed_out and result.get("reported", False)
            return result
    except OSError as err:
        return {"passed": False, "reason": "sandbox_error", "message": f"cannot start: {err}"}


def _kill_group(pgid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _tail(out) -> str:
    out.seek(0, os.SEEK_END)
    size = out.tell()
    out.seek(max(0, size - READ_TAIL_BYTES))
    return out.read().decode("utf-8", "replace")


def _signal_of(returncode: int | None, mode: Mode) -> int | None:
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if mode is Mode.BWRAP and returncode > 128:  # bwrap reports a killed child as 128 + signal
        return returncode - 128
    return None


KIND_TO_REASON = {"failed": "failed", "timeout": "timeout", "memory": "memory", "exit": "exit",
                  "crash": "crash", "syntax": "syntax"}


def interpret(
    text: str,
    nonce: str,
    returncode: int | None,
    timed_out: bool,
    job: dict[str, Any],
    mode: Mode,
    limits: Limits,
    *,
    started: bool,
) -> dict[str, Any]:
    """The verdict. Success needs the harness's nonce line; the exit code alone never passes.
    `started`: the harness reached the program (Child.ran_program), so no failure is the sandbox's."""
    base: dict[str, Any] = {"returncode": returncode, "mode": mode.value}
    at = text.rfind(nonce)
    report = None
    if at != -1:
        line_end = text.find("\n", at)
        try:
            report = json.loads(text[at + len(nonce) : None if line_end == -1 else line_end])
        except ValueError:
            report = None
        text = text[:at]
    base["output"] = text.rstrip("\n")[-limits.output_chars :]
    if report is not None:
        if not well_formed(report, len(job["tests"])):  # the program forged or broke it
            return {**base, "passed": False, "reason": "crash", "reported": True,
                    "message": "the harness's report was malformed (the program tampered with it)"}
        return {**base, **_from_report(report, job["tests"]), "reported": True}
    sig = _signal_of(returncode, mode)
    if timed_out:
        reason, message = "timeout", f"killed after {wall_limit(job['timeout_s'], limits):g} s of wall time (the backstop for {job['timeout_s']:g} s of CPU)"
    elif sig == signal.SIGXCPU:
        reason, message = "timeout", "CPU time limit exceeded"
    elif "MemoryError" in text:
        reason, message = "memory", "MemoryError: memory limit exceeded"
    elif sig == signal.SIGXFSZ:
        reason, message = "crash", f"file size limit ({limits.file_mb} MiB) exceeded"
    elif sig is not None:
        reason, message = "crash", f"killed by signal {signal.Signals(sig).name}"
    elif not started:  # the harness never got to the program: bwrap or the uid drop failed
        reason, message = "sandbox_error", text.strip().splitlines()[0] if text.strip() else "drop failed"
    elif returncode == 0:
        reason, message = "exit", "exited with status 0 before the tests finished"
    else:
        reason, message = "crash", f"exited with status {returncode} before the tests finished"
    return {**base, "passed": False, "reason": reason, "message": message}


TEST_KINDS = ("ok", "failed", "timeout", "memory", "exit", "crash")


def well_formed(report: Any, num_tests: int) -> bool:
    """The harness's report has the shape harness.py writes. The program can replace it (through
    sys.modules, with the nonce read from stack frames): anything else is a malformed report,
    which fails the attempt; never an exception on this side."""
    def outcome(item: Any, size: int) -> bool:
        return (type(item) is list and len(item) == size and item[0] in TEST_KINDS
                and type(item[1]) is str and (size == 2 or item[2] is None or type(item[2]) is str))

    if type(report) is not dict:
        return False
    error, setup, tests = report.get("compile_error"), report.get("setup"), report.get("tests", [])
    return ((error is None or type(error) is str) and (setup is None or outcome(setup, 2))
            and type(tests) is list and len(tests) <= num_tests and all(outcome(t, 3) for t in tests))


def _from_report(report: dict[str, Any], tests: list[str]) -> dict[str, Any]:
    if report.get("compile_error"):
        return {"passed": False, "reason": "syntax", "message": report["compile_error"]}
    setup_kind, setup_message = report.get("setup") or ["crash", "no setup result"]
    if setup_kind != "ok":
        reason = KIND_TO_REASON.get(setup_kind, "crash")
        return {"passed": False, "reason": reason, "message": f"while loading the code: {setup_message}"}
    outcomes = []
    for i, test in enumerate(tests):
        if i < len(report.get("tests", [])):
            kind, message, actual = report["tests"][i]
            outcomes.append({"test": test, "kind": kind, "message": message, "actual": actual})
        else:
            outcomes.append({"test": test, "kind": "not_run", "message": "not run (an earlier test ended the run)"})
    return summarise(outcomes, len(tests))


def summarise(outcomes: list[dict[str, Any]], total: int) -> dict[str, Any]:
    """The verdict of a run whose tests each have an outcome (internal tests and hidden ones)."""
    bad = [o for o in outcomes if o["kind"] != "ok"]
    if not bad:
        return {"passed": True, "reason": "passed", "message": f"{total} tests passed", "tests": outcomes}
    first = bad[0]
    reason = KIND_TO_REASON.get(first["kind"], "crash")
    message = f"{len(bad)} of {total} tests failed; first: {first['message']}"
    return {"passed": False, "reason": reason, "message": message, "tests": outcomes}


_PROBED: dict[str, Mode] = {}
_PROBE_LOCK = threading.Lock()
PROBE_JOB = {"code": "x = 1", "tests": ["assert x == 1"], "timeout_s": 30.0}


def probe(requested: str, limits: Limits, *, warn: bool = True) -> Mode:
    """The mode to use: `requested`, or for 'auto' the strongest that works here (cached)."""
    requested = requested.strip().lower()
    valid = ["auto", *(m.value for m in Mode)]
    if requested not in valid:
        raise ConfigError(f"unknown sandbox mode {requested!r}; valid: {choices(valid)}")
    if is_root() and requested != Mode.RLIMITS.value:
        uid_base()  # a base that could reach real users is refused before any run (a ConfigError)
    with _PROBE_LOCK:
        if requested in _PROBED:
            return _PROBED[requested]
        if requested == "auto":
            candidates = [Mode.BWRAP, Mode.UID if is_root() else Mode.RLIMITS]
        else:
            candidates = [Mode(requested)]
        why = "bubblewrap (`bwrap`) is not installed (Debian package `bubblewrap`)"
        for mode in candidates:
            if mode is Mode.UID and not is_root():
                raise ConfigError("sandbox mode 'uid' needs root; use auto, bwrap or rlimits")
            if mode is Mode.RLIMITS and is_root():
                # RLIMIT_NPROC is never enforced for root: a fork bomb would take the machine.
                raise ConfigError("sandbox mode 'rlimits' is unsafe as root; use auto, bwrap or uid")
            if mode is Mode.BWRAP and shutil.which("bwrap") is None:
                continue
            result = launch_and_wait(mode, limits, PROBE_JOB)
            if result["passed"]:
                if mode is not Mode.BWRAP and warn:
                    warn_weak(mode, why if requested == "auto" else "chosen explicitly")
                _PROBED[requested] = mode
                return mode
            why = f"bubblewrap failed here: {result.get('message') or result.get('output', '')[:200]}"
        raise ConfigError(f"the sandbox cannot start in mode {requested!r}: {why}")
