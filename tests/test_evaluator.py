"""Reflexion's Evaluator for programming (`--evaluator internal|hidden`), end to end on the real
runner and sandbox with scripted coders on HumanEval/0 (`has_close_elements`).

Under `internal` (the default, as the paper and its programming_runs/reflexion.py) the program's
own tests end a task's loop and the hidden tests judge, once, the program the loop stopped with
(or the last one when the trials run out): that verdict is the task's pass@1. Under `hidden` the
hidden tests judge every trial and decide whether another runs: an oracle's pass@N, labelled so.
"""

from __future__ import annotations

import json
import re

import pytest

from reinagent.records import TrialRecord, final_record, solved_at, stops_loop
from reinagent.runner import load_run
from tests.conftest import one_line_error, run_cli
from tests.test_env_service import server_factory  # noqa: F401 - a fixture: `reinagent serve-env` processes

ENTRY = "has_close_elements"
# the first attempt's request, or a retry's (the reference's retry chat ends on "[improved impl]:"
# and the task): a regex, as the scripted model's rules are
IMPLEMENT = rf"(?:Write the complete implementation of `{ENTRY}`|\[improved impl\]:\n```python\n[^`]*def {ENTRY})"
TESTS_PROMPT = f"(?s)You write unit tests.*{ENTRY}"
REFLECT = "Write your reflection now"
# Passes its own (too easy) test, fails the hidden ones: the has-close pairs are missed.
WRONG = f"```python\ndef {ENTRY}(numbers, threshold):\n    return False\n```"
ALWAYS_TRUE = f"```python\ndef {ENTRY}(numbers, threshold):\n    return True\n```"
RIGHT = (f"```python\ndef {ENTRY}(numbers, threshold):\n"
         "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n```")
EASY_TEST = f"assert {ENTRY}([1.0, 2.0, 3.0], 0.5) == False"
WRONG_TEST = f"assert {ENTRY}([1.0, 2.0], 0.5) == True"  # the model's own test is wrong: 1.0 apart

FAKE_PASSES_OWN_TEST = [
    {"when": REFLECT, "reply": "Reflection: I returned a constant. Next time I will compare every pair."},
    {"when": TESTS_PROMPT, "reply": EASY_TEST},
    {"when": IMPLEMENT, "reply": WRONG},
]


def _run(tmp_path, name: str, model: str, *extra: str, trials: int = 3) -> tuple[dict, list[TrialRecord]]:
    run_dir = tmp_path / name
    proc = run_cli("run", "--benchmark", "humaneval", "--agent", "coder", "--num-envs", "1",
                   "--num-trials", str(trials), "--model", model, "--run-dir", str(run_dir), "--no-cache",
                   "--quiet", *extra)
    assert proc.returncode == 0, proc.stderr
    return _report(run_dir), _records(run_dir)


def _report(run_dir) -> dict:
    proc = run_cli("report", str(run_dir), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _records(run_dir) -> list[TrialRecord]:
    return sorted(load_run(run_dir)[1], key=lambda r: r.trial)


def _spec(run_dir) -> dict:
    return json.loads((run_dir / "spec.json").read_text())


@pytest.mark.parametrize("flags", [(), ("--strategy", "last_attempt_and_reflexion", "--memory-size", "1")],
                         ids=["default", "reference-memory"])
def test_own_tests_passing_end_the_loop_and_the_hidden_tests_judge_once(tmp_path, script, flags):
    report, records = _run(tmp_path, "run", script(FAKE_PASSES_OWN_TEST, default="no"), *flags)
    (only,) = records  # trials 2 and 3 never ran: the loop stopped on the program's own tests
    assert only.trial == 1 and only.internal_passed is True and not only.success
    assert only.evaluation["benchmark_evaluations"] == 1 and only.evaluation["reason"] == "failed"
    assert only.reflection is None  # nothing to reflect on: the Evaluator passed it
    assert report["evaluator"] == "internal" and report["pass_at_1"] == 0.0 and report["success_rate"] == 0.0
    assert report["status"] == "complete" and "pass@1" in report["judged_by"]
    assert _spec(tmp_path / "run")["config"]["evaluator"] == "internal"


def test_evaluator_hidden_is_the_oracle_loop_and_says_so(tmp_path, script):
    report, records = _run(tmp_path, "run", script(FAKE_PASSES_OWN_TEST, default="no"), "--evaluator", "hidden")
    assert [r.trial for r in records] == [1, 2, 3]
    assert all(r.internal_passed and not r.success and r.evaluation["benchmark_evaluations"] == 1 for r in records)
    assert [bool(r.reflection) for r in records] == [True, True, False]
    run_dir = tmp_path / "run"
    assert _spec(run_dir)["config"]["evaluator"] == "hidden"
    assert report["evaluator"] == "hidden" and "oracle" in report["judged_by"] and "oracle" in report["label"]
    markdown = run_cli("report", str(run_dir))
    assert "judged by the hidden tests: oracle" in markdown.stdout and "oracle-gated pass@N" in markdown.stdout
    listing = run_cli("runs", str(tmp_path))
    assert listing.returncode == 0 and "oracle: hidden tests" in listing.stdout, listing.stdout + listing.stderr
    page = tmp_path / "report.html"
    assert run_cli("report", str(run_dir), "--format", "html", "-o", str(page)).returncode == 0
    assert "judged by the hidden tests: oracle" in page.read_text() and "oracle-gated pass@N" in page.read_text()
    from tests.test_viewer import Viewer

    viewer = Viewer(tmp_path)
    try:
        assert "oracle: hidden tests" in viewer.get("/").text
        assert "oracle: hidden tests" in viewer.get("/runs/run").text
        assert viewer.get("/api/runs").json()["runs"][0]["evaluator"] == "hidden"
    finally:
        viewer.close()

    # A resumed run keeps its evaluator: trial 4 runs although the program passed its own tests.
    resumed = run_cli("resume", str(run_dir), "--num-trials", "4", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert [r.trial for r in _records(run_dir)] == [1, 2, 3, 4]
    assert _spec(run_dir)["config"]["evaluator"] == "hidden"
    # ... and cannot change it.
    refused = run_cli("resume", str(run_dir), "--evaluator", "internal")
    one_line_error(refused, "--evaluator", "reinagent run")
    assert refused.returncode == 2


def test_a_run_older_than_the_flag_resumes_as_it_ran(tmp_path, script):
    """A spec without `evaluator` (written before the flag) was judged by the hidden tests each
    trial: its resume goes on so, not under today's default."""
    _, records = _run(tmp_path, "run", script(FAKE_PASSES_OWN_TEST, default="no"), "--evaluator", "hidden",
                      trials=1)
    spec_path = tmp_path / "run" / "spec.json"
    spec = json.loads(spec_path.read_text())
    del spec["config"]["evaluator"]
    spec_path.write_text(json.dumps(spec))
    resumed = run_cli("resume", str(tmp_path / "run"), "--num-trials", "2", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert [r.trial for r in _records(tmp_path / "run")] == [1, 2]


def test_the_last_trial_is_judged_and_an_extended_run_scores_where_its_loop_stopped(tmp_path, script):
    """The model's own test is wrong, so its right program fails it every trial: the hidden tests
    run only on the last trial's program (pass@1 true). Extended by one trial, the loop goes on
    from there (its own tests still failed it): trial 3's program passes its own test and fails
    the hidden ones, and that is the task's score, not trial 2's earlier hidden pass."""
    right_again = RIGHT.replace("    return", "    # variant B\n    return")
    rules = [
        {"when": f"(?s)variant B.*{REFLECT}", "reply": "Reflection: ALWAYS-TRUE is the way."},
        {"when": REFLECT, "reply": "Reflection: try again carefully."},
        {"when": TESTS_PROMPT, "reply": WRONG_TEST},
        {"when": f"(?s)ALWAYS-TRUE.*{IMPLEMENT}", "reply": ALWAYS_TRUE},
        {"when": f"(?s)try again carefully.*{IMPLEMENT}", "reply": right_again},
        {"when": IMPLEMENT, "reply": RIGHT},
    ]
    report, records = _run(tmp_path, "run", script(rules, default="no"), trials=2)
    first, last = records
    assert not first.internal_passed and first.evaluation["benchmark_evaluations"] == 0 and first.reflection
    assert not last.internal_passed and last.success and last.evaluation["benchmark_evaluations"] == 1
    assert report["pass_at_1"] == 1.0 and [t["solved"] for t in report["trials"]] == [0, 1]

    run_dir = tmp_path / "run"
    resumed = run_cli("resume", str(run_dir), "--num-trials", "3", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    records = _records(run_dir)
    assert [r.trial for r in records] == [1, 2, 3]
    assert "ALWAYS-TRUE" in records[1].reflection  # the old last trial's reflection, written on resume
    assert records[1].success and records[2].internal_passed and not records[2].success
    assert "return True" in records[2].trajectory.answer
    report = _report(run_dir)
    assert report["pass_at_1"] == 0.0 and report["success_rate"] == 0.0
    assert [t["solved_cumulative"] for t in report["trials"]] == [0, 0, 0]
    shown = run_cli("show", str(run_dir), "1")
    assert "its own tests passed at trial 3" in shown.stdout, shown.stdout + shown.stderr


@pytest.mark.parametrize("rollout", ["mcts", "tot"])
def test_search_rollouts_stop_on_the_internal_tests_too(tmp_path, script, rollout):
    search = ["--rollout", rollout, "--value-samples", "1", "--tot-depth", "1"] + (
        ["--mcts-iterations", "1", "--mcts-children", "1"] if rollout == "mcts"
        else ["--tot-breadth", "1", "--tot-keep", "1"])  # each rollout's own flags: others are refused
    model = script(FAKE_PASSES_OWN_TEST, default="no")
    report, records = _run(tmp_path, "internal", model, *search)
    (only,) = records
    assert only.internal_passed and not only.success and only.evaluation["benchmark_evaluations"] == 1
    assert only.trajectory.rollout == rollout and report["pass_at_1"] == 0.0
    _, records = _run(tmp_path, "hidden", model, *search, "--evaluator", "hidden")
    assert [r.trial for r in records] == [1, 2, 3]
    # written once per task: the later searches ran trial 1's tests
    assert [r.trajectory.extra["internal_tests_source"] for r in records] == ["model", "an earlier trial",
                                                                                "an earlier trial"]


def test_through_an_env_server_the_loop_decides_on_the_internal_result(tmp_path, script, server_factory):  # noqa: F811
    server = server_factory("--benchmark", "humaneval")
    _, records = _run(tmp_path, "remote", script(FAKE_PASSES_OWN_TEST, default="no"), "--env-url", server.url)
    (only,) = records
    assert only.internal_passed and not only.success and only.evaluation["benchmark_evaluations"] == 1
    assert server.sessions() == 0


@pytest.mark.parametrize("rollout", ["mcts", "tot"])
def test_a_served_env_search_scores_nodes_by_their_own_tests_not_the_hidden_verdict(
        tmp_path, script, server_factory, rollout):  # noqa: F811
    """A right program with a wrong own test is a failure node locally: through `serve-env` (whose
    judged env rewards the hidden verdict) it must be the same failure, not "solved" (issue 44 §1)."""
    rules = [{"when": REFLECT, "reply": "Reflection: try again."}, {"when": TESTS_PROMPT, "reply": WRONG_TEST},
             {"when": IMPLEMENT, "reply": RIGHT}]
    search = ["--rollout", rollout, "--value-samples", "1", "--tot-depth", "1"] + (
        ["--mcts-iterations", "1", "--mcts-children", "1"] if rollout == "mcts"
        else ["--tot-breadth", "1", "--tot-keep", "1"])
    server = server_factory("--benchmark", "humaneval")
    seen = {}
    for where, extra in (("local", []), ("remote", ["--env-url", server.url])):
        _, records = _run(tmp_path, where, script(rules, default="no"), *search, *extra, trials=2)
        seen[where] = records
        first = records[0]
        assert len(records) == 2 and first.internal_passed is False  # its own (wrong) test failed it
        assert first.trajectory.extra["internal_pass_rate"] == 0.0
        assert first.evaluation["benchmark_evaluations"] == 0  # no hidden verdict while trials are left
    assert [r.internal_passed for r in seen["local"]] == [r.internal_passed for r in seen["remote"]]


@pytest.mark.parametrize("rollout", ["react", "mcts"])
def test_tests_are_written_once_even_across_an_errored_trial(tmp_path, script, rollout):
    """Trial 1's implementation call fails (a model error) after its tests were written; trial 2
    (the errored trial not retried) and trial 3 (after an errored trial 2) run those tests, and
    the model is asked for tests once in all (issue 44 §8)."""
    import asyncio

    from reinagent.config import build_config
    from reinagent.errors import ModelError
    from reinagent.plan import build
    from reinagent.plan import resolve
    from reinagent.llm.scripted import ScriptedLLM
    from reinagent.memory import EpisodicMemory
    from reinagent.reflector import Reflector
    from reinagent.runner import run_episode

    asked = {"tests": 0, "impl": 0}

    class FailingImplementation(ScriptedLLM):
        async def generate(self, messages, params, *, rollout_id=None):
            text = "\n".join(m.content for m in messages)
            if "You write unit tests" in text:
                asked["tests"] += 1
            elif re.search(IMPLEMENT, text) and REFLECT not in text:
                asked["impl"] += 1
                if asked["impl"] <= 2:  # trial 1's call, and trial 2's
                    raise ModelError("server went away")
            return await super().generate(messages, params, rollout_id=rollout_id)

    llm = FailingImplementation(script(FAKE_PASSES_OWN_TEST, default="no")[len("scripted:"):])
    search = {"mcts_iterations": 1, "mcts_children": 1, "value_samples": 1, "tot_depth": 1} if rollout == "mcts" else {}
    cfg = build_config(benchmark="humaneval", agent="coder", rollout=rollout, num_envs=1, num_trials=3, cache=False,
                       model="scripted:unused", **search)
    plan = resolve(cfg, check_models=False)
    task = plan.tasks[0]
    store = type("S", (), {"run_dir": tmp_path})()
    exp = build(plan, store, models=(llm, llm, [llm]))
    exp.reflector = Reflector(llm, plan.benchmark.reflection_examples)
    previous, records = None, []
    for trial in (1, 2, 3):
        previous = asyncio.run(run_episode(exp, task, trial, EpisodicMemory(window=3), previous))
        records.append(previous)
    assert [r.error is not None for r in records] == [True, True, False], [r.error for r in records]
    assert asked["tests"] == 1
    assert records[2].trajectory.extra["internal_tests_source"] == "an earlier trial"
    assert records[2].trajectory.extra["internal_tests"] == [EASY_TEST]


def test_a_program_with_a_syntax_error_fails_its_own_tests(tmp_path, script):
    """No test ran, so none passed: under `internal` the loop goes on after it."""
    broken = f"```python\ndef {ENTRY}(numbers, threshold):\n    return (\n```"
    rules = [{"when": REFLECT, "reply": "Reflection: close the bracket."}, {"when": TESTS_PROMPT, "reply": EASY_TEST},
             {"when": IMPLEMENT, "reply": broken}]
    _, records = _run(tmp_path, "run", script(rules, default="no"), trials=2)
    assert [r.trial for r in records] == [1, 2]
    assert all(r.internal_passed is False and r.trajectory.end_reason == "syntax_error" for r in records)


def test_a_program_passing_some_of_its_own_tests_does_not_end_a_search_branch(tmp_path, script):
    """The coder's MCTS: a node ends its branch only when every own test passes; at 1 of 2 the
    simulation goes on to the depth limit."""
    rules = [{"when": REFLECT, "reply": "Reflection: try again."},
             {"when": TESTS_PROMPT, "reply": f"{EASY_TEST}\n{WRONG_TEST}"}, {"when": IMPLEMENT, "reply": RIGHT}]
    _, records = _run(tmp_path, "run", script(rules, default="no"), "--rollout", "mcts", "--value-samples", "1",
                      "--tot-depth", "2", "--mcts-iterations", "1", "--mcts-children", "1", trials=1)
    (only,) = records
    assert only.trajectory.extra["internal_pass_rate"] == 0.5
    assert max(n.depth for n in only.trajectory.tree) == 2


def test_coder_mcts_reflects_on_every_failing_program_when_asked_as_lats_does(tmp_path, script):
    """`--search-reflect-on every_failure` (LATS's programming search, which the preset picks for
    programming): a program failing its own tests gets a reflection at once, not only at the depth
    limit; `ended` (the default) keeps to the ends of paths."""
    rules = [{"when": REFLECT, "reply": "Reflection: the own test is wrong."},
             {"when": TESTS_PROMPT, "reply": WRONG_TEST}, {"when": IMPLEMENT, "reply": RIGHT}]
    search = ["--rollout", "mcts", "--value-samples", "1", "--tot-depth", "2", "--mcts-iterations", "1",
              "--mcts-children", "1"]
    reflected = {}
    for how in ("ended", "every_failure"):
        _, records = _run(tmp_path, how, script(rules, default="no"), *search, "--search-reflect-on", how, trials=1)
        reflected[how] = sorted(n.depth for n in records[0].trajectory.tree if n.reflection)
        assert _spec(tmp_path / how)["config"]["search_reflect_on"] == how
    assert reflected == {"ended": [2], "every_failure": [1, 2]}
    refused = run_cli("run", "--benchmark", "humaneval", "--search-reflect-on", "every_failure", "--model", "scripted:x",
                      "--num-envs", "1", "--run-dir", str(tmp_path / "no"))
    one_line_error(refused, "--search-reflect-on")
    assert refused.returncode == 2


def test_an_evaluator_for_a_benchmark_without_internal_tests_is_one_line(tmp_path):
    proc = run_cli("run", "--benchmark", "hotpotqa", "--evaluator", "hidden", "--num-envs", "1",
                   "--run-dir", str(tmp_path / "r"))
    one_line_error(proc, "--evaluator", "humaneval")
    assert proc.returncode == 2 and not (tmp_path / "r").exists()


# --- the rules themselves, on records -------------------------------------------------------------

def _rec(trial: int, success: bool, internal: bool | None, error: str | None = None) -> TrialRecord:
    return TrialRecord(task_id="t", trial=trial, success=success, internal_passed=internal, error=error)


def test_the_final_record_is_the_last_trial_whatever_order_the_records_come_in():
    """Records read back from a store come in no promised order: the loop's last trial is still
    the one with the highest trial number."""
    first, second = _rec(1, False, False), _rec(2, True, False)
    for evaluator in ("internal", "hidden", None):
        assert final_record([second, first], evaluator) is second
        assert final_record([first, second], evaluator) is second
    assert solved_at([second, first], "internal") == 2


def test_which_verdict_ends_the_loop():
    passed_own = _rec(1, False, True)
    assert stops_loop(passed_own, "internal") and not stops_loop(passed_own, "hidden")
    hidden_only = _rec(1, True, False)
    assert not stops_loop(hidden_only, "internal") and stops_loop(hidden_only, "hidden")
    assert stops_loop(_rec(1, True, None), None)
    assert not stops_loop(_rec(1, False, True, error="model error: x"), "internal")


def test_the_score_is_the_record_the_loop_stopped_with():
    # trial 1 was the last once (hidden pass, own tests failed); the extended loop stopped at 2
    records = [_rec(2, False, True), _rec(1, True, False)]
    assert final_record(records, "internal").trial == 2 and solved_at(records, "internal") is None
    assert solved_at(records, "hidden") == 1
    # trials ran out: the last one is the score
    ran_out = [_rec(1, False, False), _rec(2, True, False)]
    assert final_record(ran_out, "internal").trial == 2 and solved_at(ran_out, "internal") == 2
    assert final_record([], "internal") is None


def test_internal_tests_kept_picks_at_random_once_per_task():
    """`--internal-tests-kept K`: K of the tests written, picked at random (the reference's
    `internal_tests(prompt, model, 1)` keeps one), the same pick whenever the task is replayed."""
    from reinagent import benchmarks
    from reinagent.agents.coder import CoderAgent
    from reinagent.settings import AgentSettings

    task = benchmarks.make("humaneval").load_tasks("test")[0]
    written = [f"assert {ENTRY}([1.0, {x}.5], 0.1) == False" for x in range(2, 6)]
    reply = "\n".join(written)
    everything, source = CoderAgent(AgentSettings()).tests_from(task, reply)
    assert everything == written and source == "model"  # the default keeps every test written
    picks = set()
    for seed in range(12):
        agent = CoderAgent(AgentSettings(internal_tests_kept=1, seed=seed))
        (one,), _ = agent.tests_from(task, reply)
        assert one in written and agent.tests_from(task, reply)[0] == [one]  # reproducible
        picks.add(one)
    assert len(picks) > 1  # at random, not always the first
    two, _ = CoderAgent(AgentSettings(internal_tests_kept=2)).tests_from(task, reply)
    assert len(two) == 2 and [t for t in written if t in two] == two  # kept in the order written


def test_the_reference_programming_loop_is_what_strategies_md_says(tmp_path, script):
    """docs/strategies.md's programming rows, with its flags for the reference loop: each trial's
    prompt has the previous implementation, its own-test feedback and only the latest reflection;
    one internal test, written once; the loop ends on the own tests, the hidden tests judge once."""
    tests = "\n".join([f"assert {ENTRY}([1.0, 2.0, 3.0], 0.5) == False", f"assert {ENTRY}([1.0, 1.1], 0.5) == True",
                       f"assert {ENTRY}([], 1.0) == False"])
    v1 = f"```python\ndef {ENTRY}(numbers, threshold):\n    return None  # v1\n```"
    v2 = f"```python\ndef {ENTRY}(numbers, threshold):\n    return 'x'  # v2\n```"
    rules = [
        {"when": f"(?s)# v1.*{REFLECT}", "reply": "Reflection: R-ONE, I returned None."},
        {"when": f"(?s)# v2.*{REFLECT}", "reply": "Reflection: R-TWO, compare every pair."},
        {"when": TESTS_PROMPT, "reply": tests},
        {"when": f"(?s)R-TWO.*{IMPLEMENT}", "reply": RIGHT},
        {"when": f"(?s)R-ONE.*{IMPLEMENT}", "reply": v2},
        {"when": IMPLEMENT, "reply": v1},
    ]
    report, records = _run(tmp_path, "run", script(rules, default="no"), "--strategy", "last_attempt_and_reflexion",
                           "--memory-size", "1", "--internal-tests-kept", "1")
    assert [r.trial for r in records] == [1, 2, 3]
    kept = records[0].trajectory.extra["internal_tests"]
    assert len(kept) == 1 and kept[0] in tests.splitlines()
    assert all(r.trajectory.extra["internal_tests"] == kept for r in records)
    third = "\n".join(m.content for m in records[2].trajectory.messages[:-1])  # the retry chat, not the reply
    assert "# v2" in third and "[unit test results from previous impl]:" in third and "# v1" not in third
    assert "R-TWO" in third and "R-ONE" not in third and records[2].memory == [records[1].reflection]
    assert [r.evaluation["benchmark_evaluations"] for r in records] == [0, 0, 1]
    assert records[2].internal_passed and records[2].success and report["pass_at_1"] == 1.0
    assert _spec(tmp_path / "run")["config"]["internal_tests_kept"] == 1


@pytest.mark.parametrize("evaluator", [None, "hidden", "internal"])
def test_pass_at_1_is_taken_from_the_right_trial(evaluator):
    """Task a solved at trial 2, b and d at trial 1, c never: pass@1 is trial 1's success (b, d)
    under the hidden or the benchmark's own verdict; under `internal` it is the hidden verdict where
    each loop stopped (a, b, d; c stopped at trial 1 on its own tests and failed the hidden ones)."""
    from reinagent.records import RunSpec
    from reinagent.report.summary import summarize_records

    internal = evaluator == "internal"
    records = [
        TrialRecord(task_id="a", trial=1, success=False, internal_passed=False if internal else None),
        TrialRecord(task_id="a", trial=2, success=True, internal_passed=True if internal else None),
        TrialRecord(task_id="b", trial=1, success=True, internal_passed=True if internal else None),
        TrialRecord(task_id="d", trial=1, success=True, internal_passed=True if internal else None),
        *([TrialRecord(task_id="c", trial=1, success=False, internal_passed=True)] if internal else
          [TrialRecord(task_id="c", trial=t, success=False) for t in (1, 2, 3)]),
    ]
    spec = RunSpec(config={"benchmark": "humaneval", "num_trials": 3, "evaluator": evaluator},
                   task_ids=["a", "b", "c", "d"], created_at=0.0, reinagent_version="0", python_version="3")
    summary = summarize_records(spec, records)
    assert summary["pass_at_1"] == pytest.approx(3 / 4 if internal else 2 / 4)
    assert summary["success_rate"] == pytest.approx(3 / 4)
    assert [t["solved"] for t in summary["trials"]] == [2, 1, 0]
    assert summary["status"] == "complete" and summary["evaluator"] == evaluator
