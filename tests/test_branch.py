"""`reinagent branch`: a run under another strategy that shares its source's first trial (issue 37's
paired comparison: the same first attempts under REFLEXION and NONE, exactly)."""

from __future__ import annotations

import json

import pytest

from reinagent import benchmarks, run
from reinagent.branch import branch_run
from reinagent.errors import ConfigError, RunDirError
from reinagent.store import read_records, read_spec

from .conftest import one_line_error, run_cli

LESSON = "I guessed instead of computing. Next time I will compute the answer step by step."


def _script(tmp_path):
    """Task 0 is answered right at once; the others wrong at trial 1 and right once a reflection
    is in the prompt (so a trial 2 that saw no reflection fails again)."""
    first = benchmarks.make("arithmetic").load_tasks("test")[0]
    rules = [{"when": "Your failed attempt", "reply": LESSON},
             {"when": "compute the answer step by step", "reply": "Thought: careful.\nAction: Finish[RIGHT]"},
             {"when": f"What is {first.a} \\{first.op} {first.b}\\?$", "reply": f"Thought: ok.\nAction: Finish[{first.answer}]"}]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": rules, "default": "Thought: I guess.\nAction: Finish[100]"}))
    return path


def _source(tmp_path, strategy):
    return run(benchmark="arithmetic", num_envs=3, num_trials=2, strategy=strategy, model=f"scripted:{_script(tmp_path)}",
               run_dir=str(tmp_path / f"src-{strategy}"), cache=False, progress=False)


def _first(records):
    return {r.task_id: r for r in records if r.trial == 1}


def test_a_none_branch_of_a_reflexion_run_shares_trial_1_and_drops_its_reflections(tmp_path):
    source = _source(tmp_path, "reflexion")
    src = read_records(source)
    assert sum(1 for r in src if r.trial == 1 and r.reflection) == 2  # the source reflected on its 2 failures
    out = branch_run(source, tmp_path / "none", strategy="none", progress=False)
    records = read_records(out)
    spec = read_spec(out)
    assert spec.config["strategy"] == "none" and spec.task_ids == read_spec(source).task_ids
    assert spec.settings["branched_from"] == {"run": str(source), "trials": 1, "strategy": "reflexion",
                                              "reflections": "not copied"}
    # trial 1 is the source's, byte for byte apart from the reflection NONE never shows
    for tid, record in _first(records).items():
        expected = _first(src)[tid].model_copy(update={"reflection": None, "reflection_raw": None, "reflection_calls": [],
                                                       "copied_from": str(source),
                                                       "copied_calls": len(_first(src)[tid].trajectory.calls)})
        assert record == expected
    assert not any(r.reflection or r.reflection_calls for r in records)
    second = [r for r in records if r.trial == 2]
    assert len(second) == 2 and not any(r.memory or r.success for r in second)  # a plain retry fails again


def test_a_reflexion_branch_of_a_none_run_writes_the_reflections_then_retries(tmp_path):
    source = _source(tmp_path, "none")
    assert not any(r.reflection for r in read_records(source))
    out = branch_run(source, tmp_path / "reflexion", strategy="reflexion", progress=False)
    records = read_records(out)
    first, src_first = _first(records), _first(read_records(source))
    for tid, record in first.items():  # the same attempts; the branch's own Reflector reflected
        assert record.trajectory == src_first[tid].trajectory and record.started_at == src_first[tid].started_at
        assert record.reflection == (None if record.success else LESSON)
    second = [r for r in records if r.trial == 2]
    assert len(second) == 2 and all(r.memory == [LESSON] for r in second)
    assert read_spec(out).settings["branched_from"]["reflections"] == "not copied"


def test_reflections_are_kept_between_strategies_that_both_use_them(tmp_path):
    source = _source(tmp_path, "reflexion")
    out = branch_run(source, tmp_path / "both", strategy="last_attempt_and_reflexion", progress=False)
    records = read_records(out)
    assert read_spec(out).settings["branched_from"]["reflections"] == "kept"
    copied = {tid: r.model_copy(update={"copied_from": None, "copied_calls": 0}) for tid, r in _first(records).items()}
    assert copied == _first(read_records(source))
    assert all(r.copied_calls == len(r.calls) for r in _first(records).values())


def test_a_branchs_report_counts_what_the_branch_did_and_says_what_it_copied(tmp_path):
    """Was: the branch's wall time, calls in flight and tokens paid included the source's trial 1
    (a NONE branch that took 48 s showed 4 min 43 s). Now they are the branch's own, and the report
    says "trial 1: N records copied from RUN"."""
    from reinagent.report.markdown import report_markdown
    from reinagent.report.summary import summarize

    source = _source(tmp_path, "none")
    out = branch_run(source, tmp_path / "reflexion", strategy="reflexion", progress=False)
    records = read_records(out)
    own = [r for r in records if r.trial == 2]
    s = summarize(out)
    assert s["copied"] == {"from": str(source), "records": 3, "trials": [1]}
    # the branch's calls: its trial 2, and the reflections it wrote on the copied trial-1 failures
    assert s["usage"]["by_role"]["reflector"]["calls"] == 2
    assert s["usage"]["by_role"]["actor"]["calls"] == sum(len(r.trajectory.calls) for r in own)
    assert s["usage"]["prompt_tokens"] == sum(c.prompt_tokens for r in records for c in r.own_calls)
    assert s["wall_s"] == round(max(r.finished_at for r in own) - min(r.started_at for r in own), 3)
    md = report_markdown([s])
    assert f"trial 1: 3 records copied from {source}" in md
    assert "| 1 | 3 |" in md and "| copied |" in md  # trial 1's wall time is the source's
    src = summarize(source)
    assert src["copied"] is None and src["usage"]["calls"] == sum(len(r.calls) for r in read_records(source))


def test_bad_branches_are_refused_before_anything_is_written(tmp_path):
    source = _source(tmp_path, "none")
    with pytest.raises(ConfigError, match="at least 2"):
        branch_run(source, tmp_path / "b1", strategy="reflexion", num_trials=1, progress=False)
    with pytest.raises(ConfigError, match="unknown strategy 'reflect'; valid: "):
        branch_run(source, tmp_path / "b2", strategy="reflect", progress=False)
    with pytest.raises(RunDirError, match="does not exist"):
        branch_run(tmp_path / "nowhere", tmp_path / "b3", strategy="reflexion", progress=False)
    with pytest.raises(RunDirError):
        branch_run(source, source, strategy="reflexion", progress=False)  # an existing run is never reused
    # a source whose trial 1 is unfinished: the branch would invent the missing first attempts
    lines = (source / "records.jsonl").read_text().splitlines(keepends=True)
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "spec.json").write_text((source / "spec.json").read_text())
    (partial / "records.jsonl").write_text(next(line for line in lines if '"trial":1' in line.replace(" ", "")))
    with pytest.raises(RunDirError, match="trial 1 of 2 task"):
        branch_run(partial, tmp_path / "b4", strategy="reflexion", progress=False)
    assert not any((tmp_path / f"b{i}").exists() for i in (1, 2, 3, 4))


def test_cli_branch(tmp_path):
    source = _source(tmp_path, "reflexion")
    done = run_cli("branch", str(source), "--strategy", "none", "--run-dir", str(tmp_path / "cli"), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "cli" / "report.html").exists()
    assert len(read_records(tmp_path / "cli")) == 5
    one_line_error(run_cli("branch", str(source), "--strategy", "sometimes", "--run-dir", str(tmp_path / "bad")),
                   "unknown strategy", "reflexion")


def test_reflection_max_tokens_reaches_the_reflector_and_a_resume_cannot_change_it(tmp_path):
    """`--reflection-max-tokens N` (a model trained to reflect in N tokens is measured with N)."""
    from reinagent.config import build_config
    from reinagent.plan import build
    from reinagent.plan import resolve

    plan = resolve(build_config(benchmark="arithmetic", num_envs=1, reflection_max_tokens=64, model="scripted:x"), check_models=False)
    assert build(plan, None, models=(None, None, [])).reflector.params.max_tokens == 64
    plan = resolve(build_config(benchmark="arithmetic", num_envs=1, model="scripted:x"), check_models=False)
    assert build(plan, None, models=(None, None, [])).reflector.params.max_tokens == 200
    one_line_error(run_cli("run", "--benchmark", "arithmetic", "--reflection-max-tokens", "0"), "--reflection-max-tokens")
    from reinagent.resuming import FIXED

    assert "reflection_max_tokens" in FIXED


def test_one_reflection_is_said_in_the_singular(tmp_path):
    source = run(benchmark="arithmetic", num_envs=2, num_trials=2, strategy="none", model=f"scripted:{_script(tmp_path)}",
                 run_dir=str(tmp_path / "src"), cache=False, progress=False)
    done = run_cli("branch", str(source), "--strategy", "reflexion", "--run-dir", str(tmp_path / "b"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "wrote 1 reflection the old last trial skipped" in done.stderr  # was "wrote 1 reflections"
