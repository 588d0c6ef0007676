"""One planted run no longer breaks every reader (issue 45, item 3).

records.jsonl linked to /dev/zero, or a FIFO; a spec with `num_trials: 1e9`; one record with a huge
`trial`: `report`, `show`, `branch`, `resume` and `repair` grew to gigabytes or hung. Now each gives
one line and exit 2; `runs` and the viewer list every other run with one line for the planted
one; 30 `ln -s .` links cost one visit per real directory. The CLI runs in a child limited to
2 GB of address space and 60 s, so the old readers fail here (MemoryError, or a timeout) without
taking the machine."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from reinagent.store import RECORDS, SPEC
from tests.conftest import CLI, ROOT, write_script

LIMIT_BYTES = 2 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          preexec_fn=_limited)


def _one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-500:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    model = write_script(root / "script.yaml", [], default="Thought: x\nAction: Finish[wrong]")
    proc = subprocess.run([*CLI, "run", "--num-envs", "2", "--num-trials", "2", "--model", model, "--run-dir",
                           str(root / "good"), "--quiet", "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return root / "good"


def _zero(run: Path) -> None:
    (run / RECORDS).unlink()
    (run / RECORDS).symlink_to("/dev/zero")


def _fifo(run: Path) -> None:
    (run / RECORDS).unlink()
    os.mkfifo(run / RECORDS)


def _huge_trial(run: Path) -> None:
    lines = (run / RECORDS).read_text().splitlines()
    record = json.loads(lines[0])
    record["trial"] = 10**9
    (run / RECORDS).write_text("\n".join([*lines, json.dumps(record)]) + "\n")


def _spec_trials(value):
    def plant(run: Path) -> None:
        spec = json.loads((run / SPEC).read_text())
        spec["config"]["num_trials"] = value
        (run / SPEC).write_text(json.dumps(spec))
    return plant


def _rl_steps(run: Path) -> None:
    spec = json.loads((run / SPEC).read_text())
    spec["settings"].update({"rl": {}, "steps": 10**9})  # an RL run's steps are its reports' trials
    (run / SPEC).write_text(json.dumps(spec))


PLANTS = {"dev-zero": (_zero, "character device"), "fifo": (_fifo, "FIFO"),
          "huge-trial": (_huge_trial, "trial number outside 1 to 100000"),
          "rl-steps": (_rl_steps, "settings.steps is 1000000000"),
          "spec-1e9": (_spec_trials(1e9), "num_trials is 1000000000.0"),
          "spec-int": (_spec_trials(10**9), "num_trials is 1000000000")}


def _planted(good: Path, where: Path, name: str) -> Path:
    run = where / name
    shutil.copytree(good, run)
    (run / "run.lock").unlink(missing_ok=True)
    PLANTS[name][0](run)
    return run


@pytest.mark.parametrize("name", list(PLANTS))
def test_every_reader_of_a_planted_run_says_one_line(good, tmp_path, name):
    run = _planted(good, tmp_path, name)
    needle = PLANTS[name][1]
    for args in (("report", str(run)), ("show", str(run)), ("show", str(run), "1"),
                 ("branch", str(run), "--strategy", "none", "--run-dir", str(tmp_path / "b"), "--quiet"),
                 ("resume", str(run), "--quiet")):
        # a writer refuses any link in a run directory before it reads (runlock.py)
        _one_line(cli(*args), "symbolic link" if name == "dev-zero" and args[0] == "resume" else needle)
    assert not (tmp_path / "b").exists()


def test_repair_moves_a_huge_trial_aside(good, tmp_path):
    run = _planted(good, tmp_path, "huge-trial")
    fixed = cli("repair", str(run))
    assert fixed.returncode == 0 and "moved line 5" in fixed.stdout, fixed.stdout + fixed.stderr
    assert cli("report", str(run)).returncode == 0


def test_runs_and_the_viewer_list_every_other_run(good, tmp_path):
    from tests.test_viewer import Viewer

    root = tmp_path / "runs"
    root.mkdir()
    shutil.copytree(good, root / "ok")
    for name in PLANTS:
        _planted(good, root, name)
    listing = cli("runs", str(root))
    assert listing.returncode == 0, listing.stderr
    assert [ln.split()[0] for ln in listing.stdout.splitlines()[1:]] == ["ok"]
    skipped = [ln for ln in listing.stderr.splitlines() if ln.startswith("skipped: ")]
    assert len(skipped) == len(PLANTS)
    for _, needle in PLANTS.values():
        assert any(needle in line for line in skipped), (needle, skipped)

    viewer = Viewer(root)
    try:
        data = viewer.get("/api/runs").json()
        assert [r["run_id"] for r in data["runs"]] == ["ok"] and len(data["problems"]) == len(PLANTS)
        page = viewer.get("/")
        assert page.status_code == 200 and page.text.count("skipped: ") == len(PLANTS)
        assert viewer.get("/runs/fifo").status_code == 409  # an error page for that run, not a hang
        assert viewer.get("/api/runs").status_code == 200  # and the viewer still answers
    finally:
        viewer.close()


def test_symlink_loops_are_walked_once(good, tmp_path):
    root = tmp_path / "loops"
    root.mkdir()
    shutil.copytree(good, root / "ok")
    for i in range(30):
        (root / f"l{i}").symlink_to(".")
    (root / "again").symlink_to("ok")  # a link to a run lists that run once
    listing = cli("runs", str(root))
    assert listing.returncode == 0, listing.stderr
    assert len(listing.stdout.splitlines()) == 2 and listing.stdout.splitlines()[1].split()[0] in ("again", "ok")
    from reinagent.browse.listing import discover

    assert len(discover(root)) == 1
    report = cli("report", str(root))
    assert report.returncode == 0, report.stderr
