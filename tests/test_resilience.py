"""Retries against a real loopback server, errors isolated to one (task, trial), kill and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from reinagent import resume, run
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.runner import load_run
from reinagent.store import RECORDS, read_records
from tests.conftest import CLI, ROOT


def test_transient_faults_are_retried(tmp_path):
    faults = {1: "429", 2: "500", 3: "drop", 5: "503"}
    with FakeOpenAIServer(faults=faults) as server:
        run_dir = run(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=2,
                      num_envs=2, model="openai/fake", base_url=server.base_url, run_dir=str(tmp_path / "r"),
                      cache=False, progress=False)
        # 2 tasks x (actor + reflector) in trial 1, 2 actor calls in trial 2, plus 4 faulted requests
        assert server.count == 6 + len(faults)
    _spec, records = load_run(run_dir)
    assert len(records) == 4 and all(r.error is None for r in records)


def test_hard_failure_marks_only_that_record(tmp_path):
    bad_question = "VIVA Media AG"  # first task of hard100

    def fault(body):
        return "400" if bad_question in body["messages"][-1]["content"] else None

    with FakeOpenAIServer(fault_when=fault) as server:
        run_dir = run(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=2,
                      num_envs=3, model="openai/fake", base_url=server.base_url, run_dir=str(tmp_path / "r"),
                      cache=False, progress=False)
    _spec, records = load_run(run_dir)
    errored = [r for r in records if r.error]
    assert {r.trial for r in errored} == {1, 2} and len(errored) == 2  # one task, both trials
    assert all("400" in r.error for r in errored)
    assert len([r for r in records if not r.error]) == 4


def test_retries_exhausted_is_an_error_not_a_crash(tmp_path):
    with FakeOpenAIServer(fault_when=lambda body: "503") as server:
        run_dir = run(benchmark="hotpotqa", agent="cot-context", num_trials=1, num_envs=2,
                      model="openai/fake", base_url=server.base_url, run_dir=str(tmp_path / "r"),
                      cache=False, progress=False)
    _spec, records = load_run(run_dir)
    assert len(records) == 2 and all("gave up after retries" in r.error for r in records)


def _expected_calls(records, num_trials):
    """cot with an always-wrong model: one actor call, plus a reflection unless it is the last trial."""
    return sum(1 + (r.trial < num_trials) for r in records)


def _wait_for_records(run_dir, n, proc, timeout=60.0):
    """Block until the run has written n complete records (n=0: until its spec exists)."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if (run_dir / "spec.json").exists():
            path = run_dir / RECORDS
            if n == 0 or (path.exists() and path.read_bytes().count(b"\n") >= n):
                return
        time.sleep(0.01)
    raise AssertionError(f"the run did not write {n} records in time")


@pytest.mark.parametrize("kill_at_records", [0, 3, 8, 13])
def test_sigkill_then_resume_loses_and_repeats_nothing(tmp_path, kill_at_records):
    trials, envs = 3, 6
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(latency_s=0.15) as server:
        proc = subprocess.Popen(
            [*CLI, "run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--strategy", "reflexion",
             "--num-trials", str(trials), "--num-envs", str(envs), "--model", "openai/fake",
             "--base-url", server.base_url, "--run-dir", str(run_dir), "--no-cache",
             "--max-concurrency", "2", "--quiet"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        _wait_for_records(run_dir, kill_at_records, proc)
        time.sleep(0.05 * kill_at_records % 0.2)  # land at different points of an episode
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = read_records(run_dir)
        calls_before_resume = server.count
        resume(run_dir, progress=False)
        # Requests the killed run sent just before dying may reach the server after the count above
        # (they sit in its listen queue or a handler thread): at most one per episode in flight.
        resumed_calls = server.count - calls_before_resume
        requests = [body["messages"] for body in server.requests]
    records = read_records(run_dir)
    keys = [(r.task_id, r.trial) for r in records]
    assert len(keys) == len(set(keys)), "a (task, trial) was recorded twice"
    assert len(records) == trials * envs  # the model is always wrong: every task runs every trial
    assert records[: len(before)] == before  # nothing lost or rewritten
    new = records[len(before):]
    in_flight = 2  # --max-concurrency: episodes, each with one model call at a time
    assert _expected_calls(new, trials) <= resumed_calls <= _expected_calls(new, trials) + in_flight
    for rec in before:  # exact, whatever the timing: a finished (task, trial)'s call was never repeated
        prompt = [m.model_dump() for m in rec.trajectory.prompt_of(rec.trajectory.steps[0])]
        assert sum(_chat(messages) == prompt for messages in requests) == 1, (rec.task_id, rec.trial)
    with open(run_dir / RECORDS, "rb") as fh:
        assert fh.read().endswith(b"\n")


def _chat(messages):
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def test_partial_last_line_is_dropped_on_resume(tmp_path, script):
    model = script([], default="Thought: x\nAction: Finish[wrong]")
    run_dir = run(benchmark="hotpotqa", num_trials=2, num_envs=2, model=model, run_dir=str(tmp_path / "r"),
                  cache=False, progress=False)
    path = run_dir / RECORDS
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])  # a write cut short by a kill
    assert len(read_records(run_dir)) == len(lines) - 1
    resume(run_dir, progress=False)
    records = read_records(run_dir)
    assert len(records) == len(lines)
    assert len({(r.task_id, r.trial) for r in records}) == len(lines)


def test_resume_extends_trials_and_retries_errors(tmp_path):
    """Real errors (the server refuses one task's calls), then `--num-trials 3 --retry-errors`:
    exactly the errored (task, trial) is redone, the others only gain the reflection their last
    trial skipped, and the run ends as one started with 3 trials on a healthy server."""
    bad_question = "VIVA Media AG"
    broken = [True]

    def fault(body):
        return "400" if broken[0] and bad_question in body["messages"][-1]["content"] else None

    settings = dict(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_envs=3,
                    model="openai/fake", cache=False, progress=False)
    with FakeOpenAIServer(fault_when=fault) as server:
        run_dir = run(num_trials=1, base_url=server.base_url, run_dir=str(tmp_path / "r"), **settings)
        first = {(r.task_id, r.trial): r for r in load_run(run_dir)[1]}
        errored = {key for key, r in first.items() if r.error}
        assert len(errored) == 1 and "400" in first[next(iter(errored))].error
        broken[0] = False
        before = server.count
        resume(run_dir, num_trials=3, retry_errors=True, progress=False)
        # the errored one: actor + reflection; the 2 others: their reflection; trials 2-3: 3 x 2 + 3
        assert server.count - before == 2 + 2 + 9
        direct = run(num_trials=3, base_url=server.base_url, run_dir=str(tmp_path / "direct"), **settings)
    final = {(r.task_id, r.trial): r for r in load_run(run_dir)[1]}
    for key, rec in first.items():
        if key in errored:  # redone: a fresh, error-free trial
            assert final[key].error is None and final[key].trajectory.steps and not rec.trajectory.steps
        else:  # kept as it was, plus the reflection
            assert final[key].trajectory == rec.trajectory and final[key].started_at == rec.started_at
            assert rec.reflection is None and final[key].reflection

    def decided(records):  # all but timestamps and latencies
        strip = {"started_at", "finished_at", "trajectory", "reflection_calls"}
        return {(r.task_id, r.trial): (r.model_dump(exclude=strip), r.trajectory.messages,
                                       [s.output for s in r.trajectory.steps]) for r in records}

    assert decided(final.values()) == decided(load_run(direct)[1])
    summary = json.loads(subprocess.run([*CLI, "report", str(run_dir), "--format", "json"], cwd=ROOT,
                                        capture_output=True, text=True, check=True).stdout)
    assert [t["attempted"] for t in summary["trials"]] == [3, 3, 3]
    assert summary["num_errors"] == 0 and summary["num_trials"] == 3 and summary["status"] == "complete"
