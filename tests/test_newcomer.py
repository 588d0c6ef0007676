"""The newcomer's path (issue 38 §8-12): the RL extra checked before any work, the shipped
examples/rl.toml working with every subcommand the docs run it with, Ctrl-C that says how many
records are saved and the exact command that continues, reports and `runs` that do not count what
was never attempted, and the paper-style script's arguments.

The Ctrl-C and RL tests run the real embedded model (OpenVINO for `run`, torch for `rl train`);
each waits for a record or a line with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, ROOT, one_line_error, run_cli

DEADLINE_S = 600.0
EXAMPLE = ROOT / "examples" / "rl.toml"


def _hide_modules(tmp_path: Path, *modules: str) -> dict[str, str]:
    """An environment in which `import trl` (say) fails as if the extra were not installed: a
    sitecustomize that marks the modules absent, ahead of the checkout on PYTHONPATH."""
    folder = tmp_path / "hide"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules))
    return {"PYTHONPATH": f"{folder}{os.pathsep}{ROOT}"}


# --- 8. the rl extra, checked before any work ---------------------------------------------------

@pytest.mark.timeout(120)
def test_rl_train_without_the_rl_extra_says_so_before_loading_anything(tmp_path):
    out = tmp_path / "train"
    proc = run_cli("rl", "train", "--config", str(EXAMPLE), "--output-dir", str(out),
                   env=_hide_modules(tmp_path, "trl", "datasets"), timeout=100)
    line = one_line_error(proc, "reinagent rl train needs the rl extra", "trl, datasets", "pip install -e '.[rl]'")
    assert proc.returncode == 2 and proc.stdout == "", line  # no "training ..." line: nothing was loaded
    assert not out.exists()


@pytest.mark.timeout(120)
def test_rl_demo_script_checks_the_extra_first(tmp_path):
    """scripts/rl_demo.sh evaluated the base model for 2 minutes, then `rl train` failed."""
    env = {**os.environ, **_hide_modules(tmp_path, "trl"), "PYTHON": sys.executable,
           "REINAGENT": f"{sys.executable} -m reinagent.cli"}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "rl_demo.sh"), str(tmp_path / "demo")], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=100)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs the rl extra (not installed: trl)" in proc.stderr and ".[rl]" in proc.stderr
    assert not (tmp_path / "demo" / "base.json").exists() and "before training" not in proc.stdout


def test_readme_says_how_to_get_the_extras_and_reinagent_on_the_path():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme.index("## A five-minute tour")
    setup = readme[:tour]
    assert "source .venv/bin/activate" in setup, "the tour's bare `reinagent` is not on PATH after set-up"
    assert "pip install -e '.[rl]'" in readme and "scripts/rl_demo.sh" in readme
    assert re.search(r"\d+(\.\d+)? GB", setup), "no disk footprint before the tour"
    assert re.search(r"fresh machine\W[^\n]*\d+ min", setup), "no fresh-machine time before the tour"


# --- 9. the shipped example works with every subcommand the docs run it with ----------------------

def _documented_example_commands() -> set[str]:
    found = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found |= set(re.findall(r"reinagent rl (\w+) +--config examples/rl\.toml", page.read_text(encoding="utf-8")))
    return found


@pytest.mark.timeout(900)
def test_the_example_rl_toml_runs_and_evaluates(tmp_path):
    """`rl run` exited 2 on the example's max_prompt_length / max_obs_length. (`rl train` with it:
    test_rl_train_ctrl_c_saves_a_checkpoint_and_the_same_command_resumes.)"""
    assert _documented_example_commands() == {"run", "train", "eval"}
    out = tmp_path / "out"
    ran = run_cli("rl", "run", "--config", str(EXAMPLE), "--output-dir", str(out), "--num-tasks", "2", "--quiet",
                  timeout=DEADLINE_S)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "note: max_prompt_length and max_obs_length apply to token rollouts" in ran.stderr  # said, not silent
    run_dir = Path(re.search(r"run directory: (\S+)", ran.stderr).group(1))
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 2
    evaluated = run_cli("rl", "eval", "--config", str(EXAMPLE), "--output-dir", str(out), "--num-tasks", "2",
                        timeout=DEADLINE_S)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert re.search(r"^test \(.*\): success .* over 2 tasks", evaluated.stdout, re.M), evaluated.stdout


# --- 10. Ctrl-C: the saved count, the exact command, no native noise -----------------------------

def _sigint_as_from_a_terminal() -> None:
    # a suite started in the background by a shell without job control inherits SIGINT ignored,
    # and exec keeps that: start the command as a terminal would (as tests/test_alfworld.py does)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Lines:
    """A subprocess's stderr, read line by line on a thread, so a test can wait for a line."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for(self, needle: str, proc: subprocess.Popen, deadline_s: float = DEADLINE_S) -> None:
        end = time.monotonic() + deadline_s
        while not any(needle in line for line in self.lines):
            assert proc.poll() is None, "".join(self.lines)[-3000:]
            assert time.monotonic() < end, f"no {needle!r} in time: " + "".join(self.lines)[-3000:]
            time.sleep(0.1)

    def text(self) -> str:
        self._thread.join(timeout=60)
        return "".join(self.lines)


@pytest.mark.timeout(1200)
def test_ctrl_c_names_the_saved_records_and_the_resume_command(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*CLI, "run", "--num-envs", "3", "--num-trials", "1", "--model", "local",
                             "--agent", "cot-context", "--run-dir", str(run_dir), "--quiet", "--cache-dir",
                             str(tmp_path / "cache")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_sigint_as_from_a_terminal)
    records = run_dir / "records.jsonl"
    end = time.monotonic() + DEADLINE_S
    while not (records.exists() and records.read_text(encoding="utf-8").strip()):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < end, "no record in time"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    saved = len(records.read_text(encoding="utf-8").splitlines())
    assert proc.returncode == 130, err
    assert "leaked" not in err and "[ERROR]" not in err and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last == (f"interrupted: {saved} (task, trial) records are saved in {run_dir}; "
                    f"continue with: reinagent resume {run_dir}"), err
    # the command it names continues the run
    resumed = run_cli("resume", str(run_dir), "--quiet", timeout=DEADLINE_S)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(records.read_text(encoding="utf-8").splitlines()) == 3


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_rl_train_ctrl_c_saves_a_checkpoint_and_the_same_command_resumes(tmp_path):
    """A rerun of `rl train` after Ctrl-C began again at step 1 without a word."""
    out = tmp_path / "train"
    args = ["rl", "train", "--config", str(EXAMPLE), "--output-dir", str(out), "--max-steps", "2", "--num-tasks", "4"]
    proc = subprocess.Popen([*CLI, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_from_a_terminal)
    lines = Lines(proc)
    lines.wait_for("  rollouts: ", proc)  # inside step 1
    proc.send_signal(signal.SIGINT)
    # stdout alone here: stderr is the reader thread's (communicate() would race it for lines)
    proc.stdout.read()
    proc.wait(timeout=DEADLINE_S)
    err = lines.text()
    assert proc.returncode == 130, err[-3000:]
    assert "Ctrl-C: finishing this step and saving a checkpoint" in err and "Traceback" not in err
    command = "reinagent " + " ".join(args)
    assert (f"interrupted after step 1, with a checkpoint of that step: `{command}` (the same command, "
            "overwrite = false) continues at step 2 from trainer/checkpoint-1") in err, err[-3000:]
    assert [json.loads(r)["step"] for r in (out / "train_metrics.jsonl").read_text().splitlines()] == [1]
    assert not (out / "checkpoint").exists()  # the final checkpoint is not written for an interrupted run

    again = run_cli(*args, timeout=DEADLINE_S)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming {out} from trainer/checkpoint-1: steps 1-1 are kept, training continues at step 2" in again.stderr
    assert [json.loads(r)["step"] for r in (out / "train_metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert "trained 2 grpo steps" in again.stdout


# --- 11. partial runs: "-" for what was not attempted, records done of expected -------------------

def test_a_report_does_not_score_tasks_never_attempted(tmp_path):
    from reinagent.report.loading import load
    from reinagent.report.markdown import report_markdown
    from reinagent.report.significance import significance_table
    from reinagent.report.tables import comparison_table, trial_table
    from tests.test_report import make_run

    tasks = [f"t{i}" for i in range(100)]
    done = make_run(tmp_path / "done", {t: [i < 10] for i, t in enumerate(tasks)}, num_trials=1, strategy="none")
    empty = make_run(tmp_path / "empty", {t: [] for t in tasks}, num_trials=1)
    # trial 2 reached by 30 of the 95 tasks still open when it began
    half = make_run(tmp_path / "half", {t: ([True] if i < 5 else [False, False] if i < 35 else [False])
                                        for i, t in enumerate(tasks)}, num_trials=2)
    summaries = [r.summary for r in load([done, empty, half])]
    _, rows = comparison_table(summaries)
    by_trial_1 = next(r for r in rows if r[0] == "solved by trial 1 [95% CI]")
    assert by_trial_1[1] == "10/100 10.0% [5.5, 17.4]"
    assert by_trial_1[2] == "-"  # it was `0/100 0.0% [0.0, 3.7]` beside the finished run
    by_trial_2 = next(r for r in rows if r[0] == "solved by trial 2 [95% CI]")
    assert by_trial_2[3] == "5/100 so far (65 not attempted)"
    _, trials = trial_table(summaries[2])
    assert trials[1][3:5] == ["5/100 so far (65 not attempted)", "-"]  # no rate, no interval
    _, empty_trials = trial_table(summaries[1])
    assert empty_trials[0][3:5] == ["-", "-"]
    _, sig = significance_table(summaries)
    assert sig[2][1] == "n/a (partial run: 65 tasks not attempted)"
    md = report_markdown(summaries)
    assert "McNemar" not in md.split("trial 1 -> trial 2", 1)[-1].splitlines()[0]
    assert "trial 1 -> trial 2: not tested, a partial run (65 of 100 tasks" in md


def test_a_finished_run_keeps_its_figures(tmp_path):
    from reinagent.report.loading import load
    from reinagent.report.tables import trial_table
    from tests.test_report import COMPLETE, make_run

    s = load(make_run(tmp_path / "c", COMPLETE))[0].summary
    assert [t["not_attempted"] for t in s["trials"]] == [0, 0, 0]
    _, rows = trial_table(s)
    assert rows[2][3:5] == ["3/5", "60.0% [23.1, 88.2]"]


@pytest.mark.timeout(600)
def test_compare_plot_url_is_encoded_for_any_run_name(tmp_path):
    from tests.test_report import COMPLETE, make_run
    from tests.test_viewer import Viewer

    names = ["a+b", "with space", "x&y", "hash#1", "pct%20"]
    for name in names:
        make_run(tmp_path / "runs" / name, COMPLETE)
    viewer = Viewer(tmp_path / "runs")
    try:
        page = viewer.get("/compare", params=[("run", n) for n in names])
        assert page.status_code == 200, page.text[:500]
        src = html.unescape(re.search(r'<img class="plot"[^>]* src="([^"]+)"', page.text).group(1))
        plot = viewer.get(src)
        assert plot.status_code == 200 and plot.content[:8] == b"\x89PNG\r\n\x1a\n", (src, plot.status_code)
    finally:
        viewer.close()


# --- 12. the paper-style script: --help, the trial count on resume, where --resume_dir is -----------

FAKE_REINAGENT = """#!/usr/bin/env bash
echo "$PWD|$*" >> "$(dirname "$0")/calls.log"
if [ "$1" = resume ]; then mkdir -p "$2"; echo report > "$2/report.md"; fi
if [ "$1" = report ]; then echo '{}'; fi
"""


def _script_copy(tmp_path: Path) -> Path:
    """run_reinagent.sh beside a bootstrap that records it ran and a reinagent that records its
    arguments (what the script asks of the real one)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "run_reinagent.sh", repo / "run_reinagent.sh")
    (repo / "scripts" / "bootstrap.sh").write_text(f"#!/bin/sh\ntouch {repo}/bootstrapped\n")
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "reinagent").write_text(FAKE_REINAGENT)
    for path in (repo / "scripts" / "bootstrap.sh", repo / ".venv" / "bin" / "reinagent"):
        path.chmod(0o755)
    return repo


def test_run_reinagent_help_prints_the_usage_not_code_and_installs_nothing(tmp_path):
    repo = _script_copy(tmp_path)
    proc = subprocess.run(["bash", str(repo / "run_reinagent.sh"), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--is_resume" in proc.stdout and "--num_trials" in proc.stdout
    assert "set -euo" not in proc.stdout and "root=" not in proc.stdout and "#" not in proc.stdout, proc.stdout
    assert not (repo / "bootstrapped").exists()


def test_run_reinagent_resume_passes_the_trial_count_and_finds_the_run_from_anywhere(tmp_path):
    repo = _script_copy(tmp_path)
    (repo / "runs" / "alf1").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for resume_dir in ("runs/alf1", "alf1"):
        log = repo / ".venv" / "bin" / "calls.log"
        log.unlink(missing_ok=True)
        proc = subprocess.run(["bash", str(repo / "run_reinagent.sh"), "--is_resume", "--resume_dir", resume_dir,
                               "--num_trials", "5"], cwd=elsewhere, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        first = log.read_text().splitlines()[0].split("|", 1)[1]
        assert first == f"resume {repo}/runs/alf1 --num-trials 5", first
    missing = subprocess.run(["bash", str(repo / "run_reinagent.sh"), "--is_resume", "--resume_dir", "nope"],
                             cwd=elsewhere, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "--resume_dir nope does not exist" in missing.stderr


# --- 12. smaller ones of the CLI ------------------------------------------------------------------

def test_benchmark_help_names_every_registered_benchmark():
    from reinagent.benchmarks import benchmark_names

    text = " ".join(run_cli("run", "--help").stdout.split())
    option = text[text.index("--benchmark TEXT"):text.index("--agent TEXT")]
    for name in benchmark_names():
        assert re.search(rf"\b{re.escape(name)}\b", option), f"--benchmark help omits {name}: {option}"


def test_exact_precision_hint_names_the_projects_extra():
    from reinagent.llm.local import EXPORT_HINT

    assert "'.[exact]'" in EXPORT_HINT and "optimum-intel[openvino]" not in EXPORT_HINT


def test_the_default_rollout_is_not_called_react_in_a_cot_report(tmp_path):
    from reinagent.report.loading import load
    from reinagent.report.markdown import report_markdown
    from tests.test_report import COMPLETE, make_run

    md = report_markdown([load(make_run(tmp_path / "cot", COMPLETE, agent="cot-context"))[0].summary])
    rollout_rows = [ln for ln in md.splitlines() if ln.startswith("| one pass |")]
    assert rollout_rows and "| react |" not in md


@pytest.mark.timeout(900)
def test_quiet_means_no_library_progress_bars_or_warnings(tmp_path):
    proc = run_cli("run", "--model", "hf", "--agent", "cot-context", "--num-envs", "1", "--num-trials", "1",
                   "--max-tokens", "2", "--run-dir", str(tmp_path / "r"), "--quiet", "--no-cache", timeout=DEADLINE_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Loading weights" not in proc.stderr and "it/s" not in proc.stderr, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
