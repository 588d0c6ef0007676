"""`reinagent runs`, `reinagent show`, `reinagent list`'s splits and `--help`, on real run
directories written by `reinagent run` with a scripted model, and on the committed runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reinagent.browse import listing
from reinagent.browse.listing import is_running, list_runs
from reinagent.runlock import RunLock
from reinagent.store import RECORDS
from tests.conftest import ROOT, run_cli, write_script

# Trial 1 fails; the reflection "Check the paragraph." makes trial 2 answer task 1 (VIVA Media).
RULES = [{"when": "Your failed attempt", "reply": "Check the paragraph."},
         {"when": "Check the paragraph", "reply": "Action: Finish[Gesellschaft mit beschränkter Haftung]"}]
VIVA = "VIVA Media AG changed it's name in 2004"


def make_runs(root: Path) -> Path:
    """Two finished runs (reflexion 2 tasks x 3 trials, none 2 x 2) and one killed in trial 2."""
    model = write_script(root / "script.yaml", RULES, default="Thought: x\nAction: Finish[wrong]")
    for name, strategy, trials in (("reflexion", "reflexion", "3"), ("none", "none", "2"), ("killed", "reflexion", "3")):
        proc = run_cli("run", "--num-envs", "2", "--num-trials", trials, "--strategy", strategy, "--model", model,
                       "--run-dir", str(root / "runs" / name), "--quiet", "--no-cache")
        assert proc.returncode == 0, proc.stderr
    # "killed": keep trial 1 and the trial-2 record of the task that stays unsolved, as a run
    # stopped mid-trial leaves it (records are in finishing order, so pick them by content)
    path = root / "runs" / "killed" / RECORDS
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = [ln for ln in lines if json.loads(ln)["trial"] == 1]
    keep += [ln for ln in lines if json.loads(ln)["trial"] == 2 and not json.loads(ln)["success"]]
    assert len(keep) == 3
    path.write_text("".join(keep), encoding="utf-8")
    return root / "runs"


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory) -> Path:
    return make_runs(tmp_path_factory.mktemp("browse"))


def _one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_runs_lists_each_run(runs_root):
    proc = run_cli("runs", str(runs_root))
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    assert header.split() == ["run", "benchmark", "agent", "strategy", "rollout", "model", "status", "trials",
                              "records", "solved", "errors", "started"]
    by_name = {row.split()[0]: row.split() for row in rows}
    assert set(by_name) == {"killed", "none", "reflexion"}
    assert by_name["reflexion"][1:5] == ["hotpotqa", "cot-context", "reflexion", "react"]
    # records done of expected: a task solved at trial 2 needs 2 records, an unsolved one 3
    assert by_name["reflexion"][6:11] == ["finished", "3/3", "5/5", "1/2", "0"]
    assert by_name["none"][6:11] == ["finished", "2/2", "4/4", "0/2", "0"]
    assert by_name["killed"][6:11] == ["incomplete", "2/3", "3/6", "0/2", "0"]  # not "trials 3/3 done"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", by_name["none"][11])

    data = json.loads(run_cli("runs", str(runs_root), "--json").stdout)
    killed = next(r for r in data if r["run_id"] == "killed")
    # trial 2 began with both tasks unsolved and one of its episodes is recorded
    assert killed["current_trial"] == {"trial": 2, "attempted": 1, "expected": 2}
    assert killed["records"] == 3 and killed["records_expected"] == 6
    assert killed["num_trials"] == 3 and killed["split"] == "hard100"


def test_runs_finds_nested_runs_and_reads_committed_ones():
    infos, problems = list_runs(ROOT / "hotpot_runs")
    assert not problems and len(infos) >= 8
    assert all(i.run_id.split("/")[0] in ("embedded", "embedded100", "qwen2.5-coder-1.5b") for i in infos)
    assert all(i.status == "finished" for i in infos)
    assert {i.agent for i in infos} == {"react", "cot-context", "cot-no-context"}


def test_runs_bad_input(tmp_path):
    _one_line_error(run_cli("runs", str(tmp_path / "nope")), "does not exist", "reinagent runs hotpot_runs")
    (tmp_path / "file").write_text("x")
    _one_line_error(run_cli("runs", str(tmp_path / "file")), "is a file")
    empty = run_cli("runs", str(tmp_path))
    assert empty.returncode == 0 and "no runs under" in empty.stdout
    assert run_cli("runs", str(tmp_path), "--json").stdout.strip() == "[]"


def test_status_follows_the_run_lock(runs_root):
    run_dir = runs_root / "killed"
    assert not (run_dir / listing.LOCK).exists() or not is_running(run_dir)
    with RunLock(run_dir):  # what a writing `run` / `resume` holds
        assert is_running(run_dir)
        assert [i.status for i in list_runs(runs_root)[0] if i.run_id == "killed"] == ["running"]
    assert not is_running(run_dir)
    assert [i.status for i in list_runs(runs_root)[0] if i.run_id == "killed"] == ["incomplete"]
    # Another process holds it, then dies by SIGKILL: the kernel drops the lock, so not running.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from reinagent.runlock import RunLock; lock = RunLock(sys.argv[1]).acquire();"
         "print('locked', flush=True); sys.stdin.read()", str(run_dir)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert is_running(run_dir)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    assert not is_running(run_dir)


def test_status_check_takes_no_lock_where_the_kernel_lists_them(runs_root, monkeypatch):
    """A probe flock, however short, could make a writer's non-blocking lock fail as it starts;
    with /proc/locks the check only reads."""
    if not listing.PROC_LOCKS.exists():
        pytest.skip("no /proc/locks on this system")

    def no_flock(*args):
        raise AssertionError("is_running must not take a lock")

    run_dir = runs_root / "killed"
    with RunLock(run_dir):
        monkeypatch.setattr(listing.fcntl, "flock", no_flock)
        assert is_running(run_dir)
        monkeypatch.undo()
    monkeypatch.setattr(listing.fcntl, "flock", no_flock)
    assert not is_running(run_dir)


@pytest.mark.parametrize("proc_locks", [True, False], ids=["proc-locks", "flock-probe"])
def test_status_without_a_lock_file_or_proc_locks(runs_root, tmp_path, monkeypatch, proc_locks):
    if not proc_locks:
        monkeypatch.setattr(listing, "PROC_LOCKS", Path("/nonexistent/locks"))
    run_dir = runs_root / "killed"
    with RunLock(run_dir):
        assert is_running(run_dir)
    assert not is_running(run_dir)
    bare = shutil.copytree(runs_root / "none", tmp_path / "bare")
    (bare / listing.LOCK).unlink(missing_ok=True)  # a run written before run.lock existed
    assert not is_running(bare)


def test_show_one_task(runs_root):
    run = str(runs_root / "reflexion")
    listed = run_cli("show", run)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"1\s+solved at trial 2\s+" + re.escape(VIVA), listed.stdout)
    assert re.search(r"2\s+unsolved after 3 trial\(s\)", listed.stdout)

    by_number = run_cli("show", run, "1")
    assert by_number.returncode == 0, by_number.stderr
    out = by_number.stdout
    assert "\x1b[" not in out, "no colour codes when stdout is not a terminal"
    assert "task 1/2: 5a7613c15542994ccc9186bf" in out and f"Question: {VIVA}" in out
    assert "gold answer: Gesellschaft mit beschränkter Haftung" in out
    assert "=== trial 1: failed" in out and "[1] Action: Finish[wrong]" in out
    assert "reflection written after this trial: Check the paragraph." in out
    assert "=== trial 2: solved" in out and "memory (reflections in this trial's prompt):\n    - Check the paragraph." in out
    assert out.index("=== trial 1") < out.index("=== trial 2")
    # the same task by id and by a piece of its question
    assert run_cli("show", run, "5a7613c15542994ccc9186bf").stdout == out
    assert run_cli("show", run, "changed it's NAME in 2004").stdout == out

    only2 = run_cli("show", run, "1", "--trial", "2").stdout
    assert "=== trial 2: solved" in only2 and "=== trial 1" not in only2


def test_show_bad_input(runs_root, tmp_path):
    run = str(runs_root / "reflexion")
    _one_line_error(run_cli("show", run, "9"), "task number 9 is out of range", "1 to 2")
    _one_line_error(run_cli("show", run, "no such words"), "no task", "'no such words'")
    _one_line_error(run_cli("show", run, "?"), "matches 2 tasks", "1 (", "2 (")  # both questions end in ?
    _one_line_error(run_cli("show", run, "1", "--trial", "7"), "--trial 7", "has trial(s) 1 or 2")
    _one_line_error(run_cli("show", str(tmp_path), "1"), "not a run directory")


def test_show_committed_run():
    proc = run_cli("show", "hotpot_runs/embedded/react_reflexion", "Pete Doherty", "--trial", "1")
    assert proc.returncode == 0, proc.stderr
    assert "Which of Jonny Craig and Pete Doherty has been a member of more bands ?" in proc.stdout
    assert "=== trial 1:" in proc.stdout and "=== trial 2:" not in proc.stdout


def test_help_lists_whole_descriptions():
    """Issue 14: click cut descriptions in the group listing ("Run solutions against the...;...")."""
    from reinagent.cli import cli

    proc = run_cli("--help")
    assert proc.returncode == 0
    listing_text = " ".join(proc.stdout.split("Commands:")[1].split())
    listing_text = re.sub(r"(\w)- (\w)", r"\1-\2", listing_text)  # click wraps after a hyphen ("OpenAI-|compatible")
    for name in cli.list_commands(None):
        command = cli.get_command(None, name)
        first_sentence = command.get_short_help_str(limit=10_000)
        assert f"{name} {first_sentence}" in listing_text, name
    for verb in ("runs", "show", "view"):
        assert verb in listing_text


def test_list_shows_splits():
    from reinagent.benchmarks import REGISTRY, make

    proc = run_cli("list")
    assert proc.returncode == 0, proc.stderr
    for name in REGISTRY:
        bench = make(name)
        rest = [s for s in bench.splits if s != bench.default_split]
        assert f"splits: {', '.join([f'{bench.default_split} (default)', *rest])}" in proc.stdout, name
    assert "splits: hard100 (default), dev-first100, dev-qa7405" in proc.stdout


HEAVY = ("torch", "transformers", "litellm", "fastapi", "uvicorn", "starlette", "pandas", "matplotlib")
DRIVER = """
import json, sys
sys.argv = ["reinagent", *sys.argv[1:]]
from reinagent.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in %r if m in sys.modules)), file=sys.stderr)
""" % (HEAVY,)


@pytest.mark.parametrize("verb", [["--help"], ["runs"], ["show"], ["view", "--help"]])
def test_browsing_verbs_start_light(runs_root, verb):
    """Listing and showing runs needs neither the web stack nor a model library nor pandas."""
    args = {"runs": ["runs", str(runs_root)], "show": ["show", str(runs_root / "reflexion"), "1"]}.get(verb[0], verb)
    proc = subprocess.run([sys.executable, "-c", DRIVER, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ})
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == [], proc.stderr


def test_runs_skips_a_corrupt_run_and_lists_the_rest(runs_root, tmp_path):
    shutil.copytree(runs_root / "none", tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "spec.json").write_text("{not json")
    proc = run_cli("runs", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^good\s+hotpotqa", proc.stdout, re.M) and "bad" not in proc.stdout
    assert proc.stderr.startswith("skipped: ") and "spec.json is corrupt" in proc.stderr
