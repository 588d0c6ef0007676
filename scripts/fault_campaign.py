#!/usr/bin/env python
"""The kill campaign: SIGKILL `reinagent run` / `resume` at random moments, resume until done.

    .venv/bin/python scripts/fault_campaign.py                   # 24 kills over 3 benchmarks
    .venv/bin/python scripts/fault_campaign.py --kills 6 --benchmarks hotpotqa,humaneval --json out.json

For each benchmark it first makes an uninterrupted reference run, then the same run again, killed
with SIGKILL (the runner's PID only: its children must die by themselves) at moments drawn from
`--seed`, and resumed after each kill until it finishes. Models are a loopback OpenAI-compatible
server with latency (reinagent.llm.fake_server) answering deterministically, so the two runs must
agree. What is checked:

  * every (task, trial) is recorded exactly once in records.jsonl;
  * success and answer of each (task, trial) equal the reference run's;
  * calls repeated: the server-side count minus the reference's. Each repeated request is traced
    to the kill that lost it. Per kill, repeats <= calls in flight, where a call is in flight when
    the server got it and its answer was not in the runner's response cache when the runner died
    (server-side requests of that process minus the cache entries it added). The server-side
    count of calls still being answered at the kill is reported beside it. So a finished
    (task, trial) or a stored answer is never paid for twice;
  * no orphans: this process is a child subreaper (PR_SET_CHILD_SUBREAPER), so whatever the
    killed runner leaves behind (ALFWorld workers, sandboxes, their children) is re-parented
    here; together with the runner's session id and an environment marker, a /proc scan finds
    anything that outlives it. Each kill waits (with a deadline) for them to go;
  * each resume after a kill starts (the run lock died with its holder).

HumanEval runs need bubblewrap (or pass --allow-weak-sandbox through REINAGENT_CAMPAIGN_FLAGS);
ALFWorld needs the alfworld extra and its games, and is skipped with a message without them.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reinagent.llm.fake_server import FakeOpenAIServer  # noqa: E402

ORPHAN_DEADLINE_S = 30.0
RUN_TIMEOUT_S = 600.0
MARKER_ENV = "REINAGENT_CAMPAIGN_MARKER"
PR_SET_CHILD_SUBREAPER = 36
REFLECTION = "REFLECTED: next time I will read the question again and check my answer."

Reply = Callable[[list[dict[str, Any]]], str]


@dataclass
class Workload:
    name: str
    flags: list[str]  # `reinagent run` flags besides --run-dir, --base-url and --cache-dir
    reply: Reply
    latency_s: float


@dataclass
class Kill:
    number: int
    verb: str  # run or resume
    records_before: int
    children: int = 0  # processes below the runner at the kill (ALFWorld workers, sandboxes)
    working: bool = False  # it had called the model or had children: past its start-up
    calls: int = 0  # requests the server got from this process
    stored: int = 0  # answers this process put in its response cache before it died
    in_flight: int = 0  # calls - stored: sent, and no answer stored at the kill
    being_answered: int = 0  # server-side: still being answered at the kill
    repeated: int = 0  # calls of this process that a later process made again
    lags_ms: list[int] = field(default_factory=list)  # per repeat: kill time - answer time (< 0: unanswered)
    orphans: list[str] = field(default_factory=list)


@dataclass
class BenchmarkReport:
    benchmark: str
    kills: list[Kill] = field(default_factory=list)
    records: int = 0
    duplicates: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    calls_reference: int = 0
    calls_campaign: int = 0
    same_requests: bool = False
    failed_starts: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def calls_repeated(self) -> int:
        return self.calls_campaign - self.calls_reference

    @property
    def in_flight(self) -> int:
        return sum(k.in_flight for k in self.kills)

    @property
    def being_answered(self) -> int:
        return sum(k.being_answered for k in self.kills)

    @property
    def ok(self) -> bool:
        traced = sum(k.repeated for k in self.kills) == self.calls_repeated
        in_flight = all(k.repeated <= k.in_flight for k in self.kills)
        return (self.records > 0 and not self.duplicates and not self.mismatches and self.same_requests
                and traced and in_flight and not self.orphans and not self.failed_starts)

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "calls_repeated": self.calls_repeated, "in_flight": self.in_flight,
                "being_answered": self.being_answered, "ok": self.ok}


# --- workloads: deterministic loopback models ---------------------------------------------------------


def _stable(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _reflected(messages: list[dict[str, Any]]) -> bool:
    return any(REFLECTION in str(m.get("content")) for m in messages)


def _reflector_asked(messages: list[dict[str, Any]]) -> bool:
    return "failed attempt" in str(messages[-1].get("content", "")).lower()


def hotpotqa_workload(envs: int, trials: int) -> Workload:
    """ReAct: Search, then Finish. A third of the tasks is right at once, a third after reflecting."""
    from reinagent import make

    answers = {t.question: t.answer for t in make("hotpotqa").load_tasks("hard100")[:envs]}

    def reply(messages):
        if _reflector_asked(messages):
            return REFLECTION
        text = str(messages[-1].get("content", ""))
        question = next((q for q in answers if q in text), None)
        if question is None:
            return "Thought: I do not know.\nAction: Finish[unknown]"
        tail = text[text.rindex(question):]
        if "Observation" not in tail:
            return f"Thought: I should look this up.\nAction: Search[{question[:40]}]"
        kind = _stable(question) % 3
        right = kind == 0 or (kind == 1 and _reflected(messages))
        return f"Thought: I have it.\nAction: Finish[{answers[question] if right else 'no idea'}]"

    flags = ["--benchmark", "hotpotqa", "--agent", "react", "--strategy", "reflexion", "--num-envs", str(envs),
             "--num-trials", str(trials), "--max-concurrency", "3", "--model", "openai/fake"]
    return Workload("hotpotqa", flags, reply, latency_s=0.1)


def humaneval_workload(envs: int, trials: int) -> Workload:
    """The coder agent: sandboxes run the internal tests and the hidden ones while calls are in flight."""
    from reinagent import make

    tasks = make("humaneval").load_tasks("test")[:envs]

    def reply(messages):
        if _reflector_asked(messages):
            return REFLECTION
        text = str(messages[-1].get("content", ""))
        task = next((t for t in tasks if t.text in text), None)
        if task is None or "unit tests" in str(messages[0].get("content", "")).lower():
            return "I will rely on the examples in the docstring."  # no tests: the doctests are used
        kind = _stable(task.task_id) % 3
        if kind == 0 or (kind == 1 and _reflected(messages)):
            return f"```python\n{task.header}{task.canonical}\n```"
        return f"```python\ndef {task.entry_point}(*args, **kwargs):\n    return None\n```"

    flags = ["--benchmark", "humaneval", "--strategy", "reflexion", "--num-envs", str(envs), "--num-trials",
             str(trials), "--max-concurrency", "2", "--model", "openai/fake", *_extra_flags()]
    return Workload("humaneval", flags, reply, latency_s=0.05)


def alfworld_workload(envs: int, trials: int) -> Workload:
    """ReAct in text games: worker processes hold the games while the model is asked."""

    def reply(messages):
        if _reflector_asked(messages):
            return REFLECTION
        return "> look" if _stable(str(messages[-1].get("content", ""))) % 2 else "> inventory"

    flags = ["--benchmark", "alfworld", "--strategy", "reflexion", "--num-envs", str(envs), "--num-trials",
             str(trials), "--max-steps", "6", "--max-concurrency", "3", "--model", "openai/fake"]
    return Workload("alfworld", flags, reply, latency_s=0.05)


def _extra_flags() -> list[str]:
    return os.environ.get("REINAGENT_CAMPAIGN_FLAGS", "").split()


def alfworld_missing() -> str | None:
    """Why ALFWorld cannot run here, or None."""
    import importlib.util

    for package in ("alfworld", "textworld"):  # not imported: alfworld sets ALFWORLD_DATA on import
        if importlib.util.find_spec(package) is None:
            return f"the {package} package is not installed"
    try:
        from reinagent import make

        make("alfworld").load_tasks("valid_unseen")[:1]
    except Exception as err:  # noqa: BLE001 - any reason is a reason to skip
        return f"{type(err).__name__}: {err}"
    return None


# --- processes ------------------------------------------------------------------------------------------


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def launch(args: list[str], marker: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), MARKER_ENV: marker}
    with open(log, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "reinagent.cli", *args, "--quiet"], cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, session) of a process, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[3])


def descendants(root: int) -> list[int]:
    """Every live process below `root` (children, grandchildren, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def leftovers(marker: str, session: int) -> list[str]:
    """Live processes the killed runner left: re-parented to us, in its session, or marked."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        stat = _stat(pid)
        if stat is None:
            continue
        state, ppid, sid = stat
        if state == "Z":
            if ppid == me:
                try:
                    os.waitpid(pid, os.WNOHANG)  # an orphan that died: reap it
                except ChildProcessError:
                    pass
            continue
        try:
            marked = marker.encode() in Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            marked = False
        if ppid == me or sid == session or marked:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            found.append(f"{pid} {cmd.strip()[:120]}")
    return found


def wait_for_no_leftovers(marker: str, session: int) -> list[str]:
    """Poll until the runner's descendants are gone; kill and return those past the deadline."""
    deadline = time.monotonic() + ORPHAN_DEADLINE_S
    while (found := leftovers(marker, session)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for line in found:
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass
    return found


# --- runs -------------------------------------------------------------------------------------------------


def record_lines(run_dir: Path) -> list[dict[str, Any]]:
    """The complete record lines of records.jsonl (markers and a cut last line left out)."""
    path = run_dir / "records.jsonl"
    if not path.exists():
        return []
    out = []
    for raw in path.read_bytes().split(b"\n")[:-1]:
        try:
            data = json.loads(raw)
        except ValueError:
            continue
        if isinstance(data, dict) and "kind" not in data and "task_id" in data:
            out.append(data)
    return out


def outcomes(run_dir: Path) -> dict[tuple[str, int], tuple[bool, str | None, str | None]]:
    return {(r["task_id"], r["trial"]): (bool(r.get("success")), r.get("answer"), r.get("error"))
            for r in record_lines(run_dir)}


def dump_requests(server: FakeOpenAIServer, path: Path) -> None:
    """What the server was asked, in order (for a person comparing two runs)."""
    path.write_text("".join(json.dumps(b, sort_keys=True) + "\n" for b in server.requests))


def _requests(server: FakeOpenAIServer) -> set[str]:
    return {json.dumps(body, sort_keys=True) for body in server.requests}


def cache_entries(cache: Path) -> int:
    """Answers in the campaign's response cache (read-only; 0 before it exists)."""
    import sqlite3

    path = cache / "responses.sqlite3"
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.OperationalError:  # made, but killed before its table was
        return 0
    finally:
        db.close()


def trace_repeats(server: FakeOpenAIServer, spans: list[tuple[Kill, int, int, float]]) -> None:
    """For each kill: its process's calls being answered at the kill, and those made again later."""
    bodies = [json.dumps(b, sort_keys=True) for b in server.requests]
    last_seen = {body: i for i, body in enumerate(bodies)}
    for kill, first, end, at in spans:
        kill.calls = end - first
        kill.in_flight = kill.calls - kill.stored
        for i in range(first, end):
            done = server.timings[i][1]
            kill.being_answered += done is None or done > at
            if last_seen[bodies[i]] > i:
                kill.repeated += 1
                kill.lags_ms.append(-1 if done is None else round((at - done) * 1000))


def run_flags(w: Workload, run_dir: Path, server: FakeOpenAIServer, cache: Path) -> list[str]:
    return ["run", *w.flags, "--run-dir", str(run_dir), "--base-url", server.base_url, "--cache-dir", str(cache)]


@dataclass
class Reference:
    outcomes: dict[tuple[str, int], tuple[bool, str | None, str | None]]
    calls: int
    requests: set[str]
    startup_s: float  # launch to the first model call
    wall_s: float  # launch to exit


def reference(w: Workload, workdir: Path) -> Reference:
    """The uninterrupted run: its outcomes, server-side calls, and how long it took."""
    marker = uuid.uuid4().hex
    with FakeOpenAIServer(latency_s=w.latency_s, reply=w.reply) as server:
        start = time.monotonic()
        proc = launch(run_flags(w, workdir / "reference", server, workdir / "cache-reference"), marker,
                      workdir / "reference.log")
        if proc.wait(RUN_TIMEOUT_S) != 0:
            raise SystemExit(f"{w.name}: the reference run failed; see {workdir / 'reference.log'}")
        wall = time.monotonic() - start
        left = wait_for_no_leftovers(marker, proc.pid)
        if left:
            raise SystemExit(f"{w.name}: the reference run left processes behind: {left}")
        dump_requests(server, workdir / "requests-reference.jsonl")
        startup = (server.timings[0][0] - start) if server.timings else wall
        return Reference(outcomes(workdir / "reference"), server.count, _requests(server), startup, wall)


STARTUP_KILLS = 0.2  # the share of kills aimed at start-up (imports, opening the run, the lock)


def wait_and_kill_moment(rng: random.Random, ref: Reference, run_dir: Path, before: int, remaining: int,
                         proc: subprocess.Popen, server: FakeOpenAIServer, first_call: int) -> None:
    """Return at a random moment to kill `proc` (or when it exits). One kill in five lands in
    start-up. The others wait for a random number of new records, at most a sixth of the work
    left (and for the process's first model call, or twice the reference's start-up if the work
    left makes none), then a random part of an episode's time: so kills land mid-call,
    mid-sandbox, mid-write or at exit, paced by progress rather than by a clock that a loaded
    machine slows, and later processes still have work left to be killed in."""
    if rng.random() < STARTUP_KILLS:
        _wait(proc, rng.uniform(0.0, ref.startup_s))
        return
    target = before + rng.randint(0, max(0, remaining // 6))
    deadline = time.monotonic() + 2 * ref.startup_s
    while proc.poll() is None and (
        record_count(run_dir) < target
        or (server.count == first_call and time.monotonic() < deadline)
    ):
        time.sleep(0.005)
    per_record = max(ref.wall_s - ref.startup_s, 0.0) / max(len(ref.outcomes), 1)
    _wait(proc, rng.uniform(0.0, per_record))


def record_count(run_dir: Path) -> int:
    """Complete lines of records.jsonl (cheap: polled while the runner writes)."""
    try:
        return (run_dir / "records.jsonl").read_bytes().count(b"\n")
    except OSError:
        return 0


def _wait(proc: subprocess.Popen, seconds: float) -> None:
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        pass


def campaign(w: Workload, kills: int, rng: random.Random, workdir: Path) -> BenchmarkReport:
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    ref = reference(w, workdir)
    report = BenchmarkReport(w.name, calls_reference=ref.calls)
    run_dir, cache, log = workdir / "campaign", workdir / "cache-campaign", workdir / "campaign.log"
    total = len(ref.outcomes)
    spans: list[tuple[Kill, int, int, float]] = []
    with FakeOpenAIServer(latency_s=w.latency_s, reply=w.reply) as server:
        for number in range(1, kills + 1):
            verb = "resume" if (run_dir / "spec.json").exists() else "run"
            if verb == "run":  # killed before the spec existed: nothing was recorded
                shutil.rmtree(run_dir, ignore_errors=True)
            args = run_flags(w, run_dir, server, cache) if verb == "run" else ["resume", str(run_dir)]
            marker = uuid.uuid4().hex
            first_call, entries = server.count, cache_entries(cache)
            proc = launch(args, marker, log)
            before = len(record_lines(run_dir))
            wait_and_kill_moment(rng, ref, run_dir, before, total - before, proc, server, first_call)
            code = proc.poll()
            if code is not None:
                if code != 0:
                    report.failed_starts.append(f"{verb} #{number} exited {code} before the kill")
                report.orphans += wait_for_no_leftovers(marker, proc.pid)
                break  # it finished first: the campaign for this benchmark ends early
            children = len(descendants(proc.pid))
            os.kill(proc.pid, signal.SIGKILL)
            at = time.monotonic()
            proc.wait()
            kill = Kill(number, verb, before, children)
            kill.orphans = wait_for_no_leftovers(marker, proc.pid)
            spans.append((kill, first_call, server.count, at))  # its calls have all arrived by now
            kill.working = server.count > first_call or children > 0
            kill.stored = cache_entries(cache) - entries
            report.kills.append(kill)
            report.orphans += kill.orphans
            print(f"  {w.name} kill {number}: {verb} at {len(record_lines(run_dir))}/{total} records, "
                  f"{children} child process(es) at the kill, {len(kill.orphans)} orphan(s)", flush=True)
        marker = uuid.uuid4().hex
        args = ["resume", str(run_dir)] if (run_dir / "spec.json").exists() else run_flags(w, run_dir, server, cache)
        proc = launch(args, marker, log)
        if proc.wait(RUN_TIMEOUT_S) != 0:
            report.failed_starts.append(f"the final {args[0]} exited {proc.returncode}; see {log}")
        report.orphans += wait_for_no_leftovers(marker, proc.pid)
        report.calls_campaign = server.count
        report.same_requests = _requests(server) == ref.requests
        dump_requests(server, workdir / "requests-campaign.jsonl")
        trace_repeats(server, spans)
    counts = Counter((r["task_id"], r["trial"]) for r in record_lines(run_dir))
    report.records = len(counts)
    report.duplicates = [f"{k[0]} trial {k[1]} x{n}" for k, n in counts.items() if n > 1]
    got = outcomes(run_dir)
    report.mismatches = [f"{k[0]} trial {k[1]}: {got.get(k)} != {v}" for k, v in ref.outcomes.items()
                         if got.get(k) != v]
    report.mismatches += [f"{k[0]} trial {k[1]}: not in the reference" for k in got if k not in ref.outcomes]
    report.wall_s = round(time.monotonic() - started, 1)
    return report


WORKLOADS: dict[str, Callable[[bool], Workload]] = {
    "hotpotqa": lambda quick: hotpotqa_workload(6 if quick else 9, 3),
    "humaneval": lambda quick: humaneval_workload(4 if quick else 8, 2 if quick else 3),
    "alfworld": lambda quick: alfworld_workload(3 if quick else 8, 2),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=24, help="SIGKILLs in all, shared among the benchmarks")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--benchmarks", default="alfworld,humaneval,hotpotqa",
                        help="in this order; kills a finished run could not take pass to the next")
    parser.add_argument("--quick", action="store_true", help="smaller runs (the test suite's campaign)")
    parser.add_argument("--workdir", type=Path, help="where the runs go (default: a fresh temporary folder)")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.benchmarks.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; valid: {', '.join(WORKLOADS)}")
    skipped = {}
    if "alfworld" in names and (why := alfworld_missing()):
        skipped["alfworld"] = why
        print(f"skipping alfworld: {why} (install the alfworld extra and its games)", flush=True)
        names.remove("alfworld")
    if not names:
        print("nothing to run", flush=True)
        return 0
    become_subreaper()
    import tempfile

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fault-campaign-"))
    rng = random.Random(args.seed)
    share = [args.kills // len(names) + (i < args.kills % len(names)) for i in range(len(names))]
    reports, carried = [], 0
    for name, kills in zip(names, share):
        kills += carried
        print(f"{name}: {kills} kills (work in {workdir / name})", flush=True)
        reports.append(campaign(WORKLOADS[name](args.quick), kills, rng, workdir / name))
        carried = kills - len(reports[-1].kills)  # the run finished before these could land
    for r in reports:
        print(f"{r.benchmark}: kills survived {len(r.kills)}, records {r.records}, calls repeated "
              f"{r.calls_repeated} (in flight at the kills {r.in_flight}, of which still being answered "
              f"server-side {r.being_answered}), duplicates {len(r.duplicates)}, "
              f"mismatches {len(r.mismatches)}, kills past start-up {sum(k.working for k in r.kills)} "
              f"(with child processes running {sum(k.children > 0 for k in r.kills)}), orphans found "
              f"{len(r.orphans)}, {r.wall_s:.0f}s: "
              f"{'OK' if r.ok else 'FAILED'}", flush=True)
        for problem in (*r.duplicates, *r.mismatches, *r.orphans, *r.failed_starts):
            print(f"    {problem}", flush=True)
    total = {"kills_survived": sum(len(r.kills) for r in reports),
             "calls_repeated": sum(r.calls_repeated for r in reports),
             "in_flight_at_kills": sum(r.in_flight for r in reports),
             "being_answered_at_kills": sum(r.being_answered for r in reports),
             "orphans_found": sum(len(r.orphans) for r in reports),
             "ok": all(r.ok for r in reports)}
    print(f"total: kills survived {total['kills_survived']}, calls repeated {total['calls_repeated']} "
          f"(calls in flight at the kills {total['in_flight_at_kills']}, of which still being answered "
          f"server-side {total['being_answered_at_kills']}), orphans found {total['orphans_found']}: "
          f"{'OK' if total['ok'] else 'FAILED'}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"total": total, "skipped": skipped, "seed": args.seed,
                                         "benchmarks": [r.summary() for r in reports]}, indent=2))
    return 0 if total["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
