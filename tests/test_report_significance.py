"""The report's significance tests (report/significance.py): known values, and what a comparison of
a NONE and a REFLEXION run on the same tasks says (issue 17's embedded experiment needs both)."""

from __future__ import annotations

import json
import math

import pytest

from reinagent.report.significance import (
    between_runs, first_vs_last, mcnemar_exact, retry_after_failure, retry_between, two_proportion,
)
from reinagent.report.summary import summarize
from tests.conftest import run_cli
from tests.test_report import COMPLETE, make_run


def test_mcnemar_exact_known_values():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(7, 0) == pytest.approx(2 / 2 ** 7)  # seven gains, no loss: 0.0156
    assert mcnemar_exact(0, 7) == mcnemar_exact(7, 0)  # two-sided
    # 10 discordant tasks split 8/2: 2 * P(X <= 2), X ~ Bin(10, 1/2) = 2 * 56 / 1024
    assert mcnemar_exact(8, 2) == pytest.approx(112 / 1024)
    assert mcnemar_exact(5, 5) == 1.0  # capped at 1
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_two_proportion_known_value():
    z, p = two_proportion(15, 100, 30, 100)
    pooled = 45 / 200
    assert z == pytest.approx(0.15 / math.sqrt(pooled * (1 - pooled) * 0.02))
    assert z == pytest.approx(2.540, abs=1e-3) and p == pytest.approx(0.0111, abs=1e-4)
    assert two_proportion(0, 10, 0, 10) == (0.0, 1.0)  # nothing varies: no evidence either way


def test_summary_names_the_tasks_solved_first_and_by_the_last_trial(tmp_path):
    s = summarize(make_run(tmp_path / "run", COMPLETE))
    assert s["solved_tasks"] == {"first_trial": ["a", "b"], "by_last_trial": ["a", "b", "c"],
                                 "failed_first_trial": ["c", "d", "e"], "second_trial": ["c"]}
    assert s["task_ids"] == list(COMPLETE)
    f = first_vs_last(s)
    assert (f["first"], f["last"], f["gained"], f["lost"]) == (2, 3, 1, 0)
    assert f["p_mcnemar"] == 1.0  # one gained task is no evidence


def test_comparison_report_tests_reflexion_against_none_on_the_same_tasks(tmp_path):
    # 12 tasks. NONE solves t0-t2 in trial 1 and nothing after; REFLEXION solves the same three in
    # trial 1 and eight more in later trials: 8 discordant tasks, all one way.
    tasks = [f"t{i}" for i in range(12)]
    none = {t: [i < 3, False, False] if i >= 3 else [True] for i, t in enumerate(tasks)}
    refl = {t: ([True] if i < 3 else [False, True] if i < 11 else [False, False, False])
            for i, t in enumerate(tasks)}
    runs = tmp_path / "runs"
    make_run(runs / "1-none", none, strategy="none")
    make_run(runs / "2-reflexion", refl)
    md = run_cli("report", str(runs)).stdout
    section = md.split("## More than chance?", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| cot-context/reflexion"))
    assert "3 -> 11/12" in row and "11/12 vs 3/12" in row
    assert f"+8 -0: p={2 / 2 ** 8:.3g} (significant at 5%)" in row
    none_row = next(line for line in section.splitlines() if line.startswith("| cot-context/none"))
    assert "3 -> 3/12: p=1 (not significant)" in none_row and none_row.endswith("| n/a | n/a | n/a |")
    # each run's own section carries its paired trial-1 vs last-trial line
    assert "trial 1 -> trial 3: 3 -> 11 of 12 tasks solved (+8, -0), McNemar exact p=0.00781" in md
    summaries = json.loads(run_cli("report", str(runs), "--format", "json").stdout)
    summaries = summaries if isinstance(summaries, list) else summaries["runs"]
    b = between_runs(summaries[0], summaries[1])
    assert (b["gained"], b["lost"]) == (8, 0) and b["p_z"] < 0.05


def test_runs_on_different_tasks_get_no_paired_test(tmp_path):
    a = summarize(make_run(tmp_path / "a", {"x": [True], "y": [False, False, False]}, strategy="none"))
    b = summarize(make_run(tmp_path / "b", {"x": [True], "z": [False, True]}))
    row = between_runs(a, b)
    assert row["p_mcnemar"] is None and row["gained"] is None  # unpaired: only the z-test applies
    assert row["other"] == 2 and row["base"] == 1


def test_retry_after_a_trial_1_failure_has_its_wilson_interval(tmp_path):
    from reinagent.report.stats import wilson_interval

    s = summarize(make_run(tmp_path / "run", COMPLETE))
    r = s["retry_after_failure"]
    assert (r["failed_first"], r["solved_second"]) == (3, 1) and r["rate"] == pytest.approx(1 / 3)
    assert r["ci"] == list(wilson_interval(1, 3))
    # an errored trial 1 was never judged: not a failure to retry
    errored = summarize(make_run(tmp_path / "err", {"a": [False, True], "b": [False, True]}, num_trials=2,
                                 errors={("b", 1): "model error: HTTP 500"}))
    assert errored["retry_after_failure"]["failed_first"] == 1
    one = summarize(make_run(tmp_path / "one", {"a": [False]}, num_trials=1))
    assert one["retry_after_failure"] is None and retry_after_failure(one) is None


def _paired_runs(tmp_path):
    """20 tasks. Both runs fail t0-t17 at trial 1 (t18, t19 solved by both, t17 by REFLEXION only
    once more below); REFLEXION's retry solves t0-t9, NONE's only t10-t11."""
    tasks = [f"t{i}" for i in range(20)]
    refl = {t: [True] if i >= 18 else [False, i < 10] for i, t in enumerate(tasks)}
    none = {t: [True] if i >= 17 else [False, i in (10, 11)] for i, t in enumerate(tasks)}
    runs = tmp_path / "runs"
    make_run(runs / "1-none", none, strategy="none", num_trials=2)
    make_run(runs / "2-reflexion", refl, num_trials=2)
    return runs


def test_mcnemar_between_runs_is_over_the_tasks_both_failed_at_trial_1(tmp_path):
    runs = _paired_runs(tmp_path)
    a, b = summarize(runs / "1-none"), summarize(runs / "2-reflexion")
    r = retry_between(a, b)
    # t17 failed only under REFLEXION: left out; over the 17 both failed, +10 (t0-t9) -2 (t10, t11)
    assert (r["both_failed"], r["base_solved"], r["other_solved"]) == (17, 2, 10)
    assert (r["gained"], r["lost"]) == (10, 2) and r["p_mcnemar"] == pytest.approx(mcnemar_exact(10, 2))
    assert r["p_mcnemar"] < 0.05
    md = run_cli("report", str(runs)).stdout
    section = md.split("## Retry after a trial-1 failure", 1)[1].split("\n## ", 1)[0]
    assert "| cot-context/reflexion/scripted:x | 18 | 10/18 55.6% [" in section
    assert "| cot-context/none/scripted:x | 17 | 2/17 11.8% [" in section
    assert f"| 17 both | 10 vs 2 of 17 | +10 -2: p={mcnemar_exact(10, 2):.3g} (significant at 5%) |" in section
    assert "trial-1 failures solved at trial 2: 10/18 55.6% [" in md  # the run's own section
    html = run_cli("report", str(runs), "--format", "html").stdout
    assert "Retry after a trial-1 failure" in html and "+10 -2: p=" in html
    data = json.loads(run_cli("report", str(runs), "--format", "json").stdout)
    assert data[1]["retry_after_failure"]["solved_second"] == 10
    [c] = data[1]["retry_comparisons"]
    assert (c["both_failed"], c["gained"], c["lost"]) == (17, 10, 2) and c == data[0]["retry_comparisons"][0]


def _internal_run(run_dir, strategy: str, outcomes: dict[str, list[tuple[bool, bool]]], num_trials: int = 3):
    """A programming run under `--evaluator internal`: task `t`'s trial k+1 is (own tests passed,
    hidden verdict), as the loop leaves them: a record whose own tests passed ends the loop."""
    from reinagent.records import RunSpec
    from reinagent.store import RunStore
    from tests.test_report import T0, make_record

    spec = RunSpec(config={"benchmark": "humaneval", "agent": "coder", "strategy": strategy, "split": "test",
                           "num_trials": num_trials, "model": "scripted:x", "evaluator": "internal"},
                   task_ids=list(outcomes), created_at=T0, reinagent_version="test", python_version="3")
    store = RunStore.create(run_dir, spec)
    for task_id, trials in outcomes.items():
        for k, (own, hidden) in enumerate(trials, start=1):
            record = make_record(task_id, k, success=hidden)
            record.internal_passed = own
            store.append(record)
    return run_dir


# 5 tasks, 3 trials: a passes its own tests and the hidden ones at trial 1; b passes its own tests
# at trial 1 and fails the hidden ones (its loop ends there, unsolved); c is solved at trial 2;
# d passes its own tests at trial 2 and fails the hidden ones; e fails its own tests every trial
# (the last trial judged by the hidden tests: failed).
INTERNAL = {"a": [(True, True)], "b": [(True, False)], "c": [(False, False), (True, True)],
            "d": [(False, False), (True, False)], "e": [(False, False), (False, False), (False, False)]}


def test_a_complete_internal_run_is_complete_and_retries_count_retried_tasks_only(tmp_path):
    """Issue 44 §2-3: a task whose loop ended on its own tests and failed the hidden ones is not
    "not attempted" later, so the run is complete and tested; and a trial-1 failure that was not
    retried (its own tests passed it) is not in the retry rate's denominator."""
    run = _internal_run(tmp_path / "runs" / "2-reflexion", "reflexion", INTERNAL)
    s = summarize(run)
    assert s["status"] == "complete" and [t["not_attempted"] for t in s["trials"]] == [0, 0, 0]
    assert s["solved_tasks"]["failed_first_trial"] == ["c", "d", "e"]  # b was never retried
    r = s["retry_after_failure"]
    assert (r["failed_first"], r["solved_second"]) == (3, 1)
    f = first_vs_last(s)
    assert f is not None and (f["first"], f["last"]) == (1, 2)
    md = run_cli("report", str(run)).stdout
    assert "not attempted" not in md and "partial run" not in md
    assert "trial-1 failures solved at trial 2: 1/3 " in md
    # against a NONE run of the same tasks: the run-vs-run tests are made, not "n/a (partial run)"
    _internal_run(tmp_path / "runs" / "1-none", "none", {**INTERNAL, "c": [(False, False), (False, False),
                                                                            (False, False)]})
    both = run_cli("report", str(tmp_path / "runs")).stdout
    assert "partial run" not in both and "+1 -0: p=1 (not significant)" in both, both
