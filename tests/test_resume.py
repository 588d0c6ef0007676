"""Resume is exact: one writer at a time, extended runs equal longer runs, redone trials supersede
the old ones durably."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from reinagent import resume, run
from reinagent.errors import ConfigError
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.records import Supersede
from reinagent.runner import load_run
from reinagent.store import RECORDS, SPEC, read_log
from tests.conftest import CLI, ROOT, run_cli

WRONG = "Thought: x\nAction: Finish[wrong]"
VIVA = "VIVA Media AG"  # the first task of hard100
RIGHT = "Thought: the paragraph says so.\nAction: Finish[Gesellschaft mit beschränkter Haftung]"
LESSON = "I answered too fast; next time I will read the paragraph."


def _wait_until(predicate, what, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _comparable(records) -> dict:
    """What a run decided, per (task, trial): everything but timestamps and latencies."""
    out = {}
    for r in records:
        out[(r.task_id, r.trial)] = {
            "prompts": [[m.model_dump() for m in r.trajectory.prompt_of(s)] for s in r.trajectory.steps],
            "outputs": [s.output for s in r.trajectory.steps],
            "reflection": r.reflection, "reflection_calls": len(r.reflection_calls), "memory": r.memory,
            "success": r.success, "answer": r.answer, "error": r.error,
        }
    return out


def _raw_keys(run_dir):
    return [(e.task_id, e.trial) for e in read_log(run_dir) if not isinstance(e, Supersede)]


@pytest.fixture
def learner(script):
    """Wrong until it has been told the lesson twice (trial 3): then right on the VIVA task."""
    return script([{"when": "Your failed attempt", "reply": LESSON},
                   {"when": f"(?s)^(?=.*{re.escape(VIVA)})(?=.*{re.escape(LESSON)}.*{re.escape(LESSON)})",
                    "reply": RIGHT}], default=WRONG)


def _run(tmp_path, name, model, trials, **kw):
    return run(benchmark="hotpotqa", agent="cot-context", num_trials=trials, num_envs=3, model=model,
               run_dir=str(tmp_path / name), cache=False, progress=False, **kw)


def test_extending_a_run_equals_running_it_that_long(tmp_path, learner):
    direct = _run(tmp_path, "direct", learner, 4)
    short = _run(tmp_path, "short", learner, 2)
    assert all(r.reflection is None for r in load_run(short)[1] if r.trial == 2)  # skipped: it was last
    resume(short, num_trials=4, progress=False)
    assert _comparable(load_run(short)[1]) == _comparable(load_run(direct)[1])
    solved = {r.task_id: r.trial for r in load_run(short)[1] if r.success}
    assert list(solved.values()) == [3]  # the lesson reached the actor twice, as in the direct run
    spec = json.loads((short / SPEC).read_text())
    assert spec["config"]["num_trials"] == 4
    (change,) = spec["history"]
    assert change["changes"]["num_trials"] == {"from": 2, "to": 4}
    trials = [json.loads(run_cli("report", str(d), "--format", "json").stdout)["trials"] for d in (short, direct)]
    assert [[(t["attempted"], t["solved"]) for t in ts] for ts in trials] == [[(3, 0), (3, 0), (3, 1), (2, 0)]] * 2


def test_extension_killed_midway_finishes_on_a_plain_resume(tmp_path, learner):
    """The new count is saved before any reflection: a later `resume` (no flags) completes them."""
    direct = _run(tmp_path, "direct", learner, 3)
    short = _run(tmp_path, "short", learner, 2)
    resume(short, num_trials=3, progress=False)
    # Undo the work after the spec change, as if the resume had been killed right after it.
    path = short / RECORDS
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:6]))
    resume(short, progress=False)
    assert _comparable(load_run(short)[1]) == _comparable(load_run(direct)[1])


def test_bad_trial_numbers_are_one_line_errors(tmp_path, learner):
    short = _run(tmp_path, "short", learner, 2)
    before = (short / RECORDS).read_bytes()
    with pytest.raises(ConfigError, match="below the run's 2 trials"):
        resume(short, num_trials=1, progress=False)
    for args, needle in [(["--from-trial", "3"], "--from-trial 3 is beyond the run's 2 trials; valid: 1 to 2"),
                         (["--num-trials", "1"], "--num-trials 1 is below the run's 2 trials")]:
        done = run_cli("resume", str(short), *args)
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert needle in line
    assert (short / RECORDS).read_bytes() == before  # nothing written, lock released
    resume(short, num_trials=3, from_trial=3, progress=False)  # within the new count: fine
    assert max(r.trial for r in load_run(short)[1]) == 3


def _gated_server():
    """A loopback model whose replies wait for `gate`; `arrived` tells that a request came in."""
    gate, arrived = threading.Event(), threading.Event()
    gate.set()

    def hold(_body):
        arrived.set()
        gate.wait(120)
        return None

    return FakeOpenAIServer(fault_when=hold), gate, arrived


def test_from_trial_supersedes_durably_even_when_killed_right_after(tmp_path):
    server, gate, arrived = _gated_server()
    with server:
        run_dir = run(benchmark="hotpotqa", agent="cot-context", num_trials=3, num_envs=3, model="openai/fake",
                      base_url=server.base_url, run_dir=str(tmp_path / "r"), cache=False, progress=False)
        original = _comparable(load_run(run_dir)[1])
        gate.clear()
        arrived.clear()
        proc = subprocess.Popen([*CLI, "resume", str(run_dir), "--from-trial", "2", "--quiet"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_until(arrived.is_set, "the resume's first model call")
            assert isinstance(read_log(run_dir)[-1], Supersede)  # written before any redo
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # The killed resume redid nothing, and stale trials 2-3 count nowhere.
        _spec, records = load_run(run_dir)
        assert sorted({r.trial for r in records}) == [1]
        summary = json.loads(run_cli("report", str(run_dir), "--format", "json").stdout)
        assert [t["attempted"] for t in summary["trials"]] == [3, 0, 0]
        history = json.loads((run_dir / SPEC).read_text())["history"]
        assert history[-1]["changes"]["from_trial"] == 2
        resume(run_dir, progress=False)  # a plain resume redoes them
    assert _comparable(load_run(run_dir)[1]) == original


def test_retry_errors_redoes_the_errored_trial_and_the_later_trials_of_its_task(tmp_path):
    """An error in trial 1 left trial 2 of that task without a reflection to learn from; retrying
    redoes both, and the run then equals one that never saw the error."""
    to_fail = [0]  # how many more VIVA actor calls to refuse (HTTP 400: not retried)
    lock = threading.Lock()

    def fault(body):
        last = body["messages"][-1]["content"]
        with lock:
            if to_fail[0] and VIVA in last and "failed attempt" not in last:
                to_fail[0] -= 1
                return "400"
        return None

    with FakeOpenAIServer(fault_when=fault) as server:
        clean = run(benchmark="hotpotqa", agent="cot-context", num_trials=2, num_envs=3, model="openai/fake",
                    base_url=server.base_url, run_dir=str(tmp_path / "clean"), cache=False, progress=False)
        to_fail[0] = 1  # trial 1 of VIVA errs; its trial 2 then runs without a reflection
        faulty = run(benchmark="hotpotqa", agent="cot-context", num_trials=2, num_envs=3, model="openai/fake",
                     base_url=server.base_url, run_dir=str(tmp_path / "faulty"), cache=False, progress=False)
        errored = {(r.task_id, r.trial) for r in load_run(faulty)[1] if r.error}
        assert len(errored) == 1 and next(iter(errored))[1] == 1  # only trial 1 of the VIVA task
        (task_id, _), = errored
        assert (task_id, 2) in {(r.task_id, r.trial) for r in load_run(faulty)[1]}
        before = server.count
        resume(faulty, retry_errors=True, progress=False)
        assert server.count - before == 3  # trial 1 (actor + reflection) and trial 2 (actor)
    assert _comparable(load_run(faulty)[1]) == _comparable(load_run(clean)[1])
    (marker,) = [e for e in read_log(faulty) if isinstance(e, Supersede)]
    assert sorted(marker.keys) == [(task_id, 1), (task_id, 2)]


def test_two_resumes_at_once_one_writes_and_the_other_exits_naming_it(tmp_path):
    server, gate, arrived = _gated_server()
    with server:
        run_dir = run(benchmark="hotpotqa", agent="cot-context", num_trials=2, num_envs=3, model="openai/fake",
                      base_url=server.base_url, run_dir=str(tmp_path / "r"), cache=False, progress=False)
        path = run_dir / RECORDS
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:3]))  # as if killed after trial 1
        gate.clear()
        arrived.clear()
        calls_before = server.count
        first = subprocess.Popen([*CLI, "resume", str(run_dir), "--quiet"], cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_until(arrived.is_set, "the first resume's first model call")  # it holds the lock now
            second = run_cli("resume", str(run_dir))
            assert second.returncode == 2, second.stderr
            (line,) = second.stderr.strip().splitlines()
            assert str(run_dir) in line and f"process {first.pid}" in line
            repair = run_cli("repair", str(run_dir))
            assert repair.returncode == 2 and f"process {first.pid}" in repair.stderr
            assert first.poll() is None  # still held at the gate: the refusals did not wait for it
        finally:
            gate.set()
        assert first.wait(timeout=300) == 0, first.stderr.read()
        first.stderr.close()
        assert server.count - calls_before == 3  # trial 2 once: three actor calls, nobody else's
    keys = _raw_keys(run_dir)
    assert len(keys) == len(set(keys)) == 6


def test_lock_is_free_after_the_holder_is_killed(tmp_path):
    server, gate, arrived = _gated_server()
    with server:
        run_dir = tmp_path / "r"
        gate.clear()
        proc = subprocess.Popen([*CLI, "run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-trials",
                                 "1", "--num-envs", "2", "--model", "openai/fake", "--base-url", server.base_url,
                                 "--run-dir", str(run_dir), "--no-cache", "--quiet"],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            _wait_until(arrived.is_set, "the run's first model call")
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        finally:
            gate.set()
        resume(run_dir, progress=False)
    assert len(load_run(run_dir)[1]) == 2


def test_flags_with_nothing_to_redo_change_nothing(tmp_path, learner):
    short = _run(tmp_path, "short", learner, 2)
    files = {name: (short / name).read_bytes() for name in (RECORDS, SPEC)}
    resume(short, retry_errors=True, progress=False)  # no errors in this run
    resume(short, num_trials=2, progress=False)  # the count it already has
    assert {name: (short / name).read_bytes() for name in files} == files


def test_a_resumed_run_keeps_its_memory_size(tmp_path, learner):
    """Mutant: a resumed run ignoring --memory-size (the default window of 3 instead of the run's 1).
    The learner needs its lesson twice in one prompt; with a window of 1 it never gets it."""
    direct = _run(tmp_path, "direct", learner, 4, memory_size=1)
    short = _run(tmp_path, "short", learner, 2, memory_size=1)
    resume(short, num_trials=4, progress=False)
    records = load_run(short)[1]
    assert max(len(r.memory) for r in records) == 1 and not any(r.success for r in records)
    assert _comparable(records) == _comparable(load_run(direct)[1])


def test_a_trial_redone_after_repair_sees_no_later_memory_and_its_later_trials_are_redone(tmp_path, learner):
    """Issue 35 §6: `repair` moved the VIVA task's trial-1 record aside (its line was corrupt);
    `resume` must not redo trial 1 with the reflection trial 2 wrote, nor keep trials 2 and 3,
    which ran on the lost trial: they are superseded and redone, and the run equals a clean one."""
    from reinagent.repair import repair

    clean = _run(tmp_path, "clean", learner, 3)
    gapped = _run(tmp_path, "gapped", learner, 3)
    path = gapped / RECORDS
    lines = path.read_bytes().splitlines(keepends=True)
    (lost,) = [i for i, line in enumerate(lines)
               if (d := json.loads(line)).get("trial") == 1 and VIVA in json.dumps(d["trajectory"])]
    task_id = json.loads(lines[lost])["task_id"]
    lines[lost] = lines[lost][:40] + b"\n"  # a line cut short in the middle of the file
    path.write_bytes(b"".join(lines))
    assert repair(gapped).moved == [lost + 1]
    assert (task_id, 1) not in {(r.task_id, r.trial) for r in load_run(gapped)[1]}

    done = run_cli("resume", str(gapped), "--quiet")
    assert done.returncode == 0, done.stderr
    assert f"{task_id}/trial1" in done.stderr and "superseding the later ones" in done.stderr
    records = {(r.task_id, r.trial): r for r in load_run(gapped)[1]}
    redone = records[(task_id, 1)]
    assert redone.memory == [] and LESSON not in json.dumps([m.model_dump() for m in redone.trajectory.messages])
    assert records[(task_id, 2)].memory == [LESSON] and records[(task_id, 3)].success  # redone in order
    (marker,) = [e for e in read_log(gapped) if isinstance(e, Supersede)]
    assert sorted(marker.keys) == [(task_id, 2), (task_id, 3)]
    history = json.loads((gapped / SPEC).read_text())["history"]
    assert history[-1]["changes"]["lost_trials"] == [f"{task_id}/trial1"]
    assert _comparable(records.values()) == _comparable(load_run(clean)[1])


def test_a_run_started_before_the_search_reflection_bound_resumes_without_it():
    """A spec without `search_reflections` (a run from before issue 35) resumes as it began, with no
    bound; a spec that has it keeps its own value."""
    from reinagent.records import RunSpec
    from reinagent.resuming import ResumePlan, recorded_settings

    def spec(**config):
        return RunSpec(config={"benchmark": "hotpotqa", "constrained": False, **config}, task_ids=[], created_at=0.0,
                       reinagent_version="0", python_version="3")

    assert recorded_settings(spec(), ResumePlan(num_trials=1)) == {"search_reflections": None}
    assert recorded_settings(spec(search_reflections=3), ResumePlan(num_trials=1)) == {}
