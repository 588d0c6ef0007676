"""End to end on the embedded model: HotpotQA cot-context REFLEXION, 2 questions, 2 trials."""

from __future__ import annotations

import json

import pytest

from reinagent.runner import load_run
from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def test_embedded_model_run_resume_report(tmp_path):
    run_dir = tmp_path / "local"
    proc = run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--strategy", "reflexion",
                   "--num-trials", "2", "--num-envs", "2", "--model", "local", "--run-dir", str(run_dir),
                   "--no-cache", "--quiet", timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "trial 1/2" in proc.stderr and "trial 2/2" in proc.stderr
    spec, records = load_run(run_dir)
    assert spec.config["model"] == "local" and spec.packages.get("transformers")
    assert {r.trial for r in records} <= {1, 2} and len([r for r in records if r.trial == 1]) == 2
    for rec in records:
        assert rec.error is None, rec.error
        assert rec.trajectory.steps and rec.trajectory.steps[0].output.strip()  # the model said something
        assert rec.trajectory.calls[0].prompt_tokens > 100 and rec.trajectory.calls[0].completion_tokens > 0
        if rec.trial == 1 and not rec.success:
            assert rec.reflection, "a failed first trial gets a reflection"
    trial1, trial2 = [r for r in records if r.trial == 1], [r for r in records if r.trial == 2]
    # exactly the tasks that failed trial 1 get a second trial
    assert sorted(r.task_id for r in trial2) == sorted(r.task_id for r in trial1 if not r.success)
    for rec in trial2:
        first = next(r for r in records if r.task_id == rec.task_id and r.trial == 1)
        assert rec.memory == [first.reflection]
        assert first.reflection in rec.trajectory.messages[1].content
    # resuming a finished run makes no model calls and changes nothing
    before = (run_dir / "records.jsonl").read_bytes()
    assert run_cli("resume", str(run_dir), "--quiet", timeout=600).returncode == 0
    assert (run_dir / "records.jsonl").read_bytes() == before
    report = json.loads(run_cli("report", str(run_dir), "--format", "json").stdout)
    assert report["num_tasks"] == 2 and len(report["trials"]) == 2
    assert report["usage"]["calls"] == sum(len(r.calls) for r in records)
