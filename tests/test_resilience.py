"""Retries against a real loopback server, errors isolated to one (task, trial), kill and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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
        resumed_calls = server.count - calls_before_resume
    records = read_records(run_dir)
    keys = [(r.task_id, r.trial) for r in records]
    assert len(keys) == len(set(keys)), "a (task, trial) was recorded twice"
    assert len(records) == trials * envs  # the model is always wrong: every task runs every trial
    assert records[: len(before)] == before  # nothing lost or rewritten
    new = records[len(before):]
    assert resumed_calls == _expected_calls(new, trials)  # no call repeated for a finished one
    with open(run_dir / RECORDS, "rb") as fh:
        assert fh.read().endswith(b"\n")


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


def test_resume_extends_trials_and_retries_errors(tmp_path, script):
    model = script([], default="Thought: x\nAction: Finish[wrong]")
    run_dir = run(benchmark="hotpotqa", num_trials=1, num_envs=2, model=model, run_dir=str(tmp_path / "r"),
                  cache=False, progress=False)
    resume(run_dir, num_trials=3, progress=False)
    summary = json.loads(subprocess.run([*CLI, "report", str(run_dir), "--format", "json"], cwd=ROOT,
                                        capture_output=True, text=True, check=True).stdout)
    assert [t["attempted"] for t in summary["trials"]] == [2, 2, 2]
    assert sys.modules.get("reinagent") is not None
