"""The run directory under faults: one writer (flock), writes cut short, tails, corruption, repair."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import pytest

from reinagent import resume, run
from reinagent.errors import RunDirError
from reinagent.records import TrialRecord
from reinagent.runlock import LOCK, RunLock, RunLocked
from reinagent.store import QUARANTINE, RECORDS, RunStore, read_records
from tests.conftest import ROOT, run_cli

WRONG = "Thought: x\nAction: Finish[wrong]"


def _one_line_error(done, *needles):
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def small_run(tmp_path, script):
    return run(benchmark="hotpotqa", num_trials=2, num_envs=2, model=script([], default=WRONG),
               run_dir=str(tmp_path / "r"), cache=False, progress=False)


HOLDER = """
import sys, time
from reinagent.runlock import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_lock_names_the_holder_and_dies_with_it(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLocked, match=rf"run {tmp_path} is in use by process {holder.pid}\b"):
            RunLock(tmp_path).acquire()
        assert (tmp_path / LOCK).read_text().strip() == str(holder.pid)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel dropped the flock with the killed holder: no stale lock to clean up.
    with RunLock(tmp_path) as lock:
        assert lock.held and (tmp_path / LOCK).read_text().strip() == str(os.getpid())


def test_second_store_in_the_same_process_is_refused(small_run):
    store, _spec, _records = RunStore.open(small_run)
    try:
        with pytest.raises(RunLocked, match=str(os.getpid())):
            RunStore.open(small_run)
        with pytest.raises(RunLocked):
            resume(small_run, progress=False)
        with pytest.raises(RunLocked):
            RunStore(small_run).append(TrialRecord(task_id="x", trial=1))
    finally:
        store.close()
    resume(small_run, progress=False)  # released: a resume goes ahead


APPEND_UNDER_LIMIT = """
import os, resource, sys
from reinagent.errors import RunDirError
from reinagent.records import TrialRecord
from reinagent.store import RECORDS, RunStore
run_dir, limit = sys.argv[1], int(sys.argv[2])
store = RunStore(run_dir)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
try:
    store.append(TrialRecord(task_id="big", trial=1, answer="x" * 5000))
except RunDirError as err:
    print("error:", err)
"""


def test_write_cut_short_by_file_size_limit_is_cut_back(tmp_path):
    store = RunStore(tmp_path)
    store.append(TrialRecord(task_id="a", trial=1))
    store.close()
    before = (tmp_path / RECORDS).read_bytes()
    # The kernel lets the write fill the file up to the limit, then refuses the rest (EFBIG).
    done = subprocess.run([sys.executable, "-c", APPEND_UNDER_LIMIT, str(tmp_path), str(len(before) + 1000)],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("error: could not write") and "File too large" in done.stdout
    assert (tmp_path / RECORDS).read_bytes() == before  # back to the last good offset
    assert [r.task_id for r in read_records(tmp_path)] == ["a"]


def test_resume_under_a_file_size_limit_fails_cleanly_then_completes(tmp_path, script):
    model = script([], default=WRONG)
    run_dir = run(benchmark="hotpotqa", num_trials=2, num_envs=3, model=model, run_dir=str(tmp_path / "r"),
                  cache=False, progress=False)
    path = run_dir / RECORDS
    full = path.read_bytes().splitlines(keepends=True)
    assert len(full) == 6
    path.write_bytes(b"".join(full[:3]))  # as if killed after trial 1
    limit = len(b"".join(full[:3])) + len(full[3]) // 2  # room for half a trial-2 record

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    done = subprocess.run([sys.executable, "-m", "reinagent.cli", "resume", str(run_dir), "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, preexec_fn=limited)
    error = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(error) == 1 and "could not write" in error[0], done.stderr
    assert path.read_bytes() == b"".join(full[:3])  # nothing partial, nothing lost
    resume(run_dir, progress=False)
    records = read_records(run_dir)
    assert sorted((r.task_id, r.trial) for r in records) == sorted(
        (json.loads(line)["task_id"], json.loads(line)["trial"]) for line in full)
    assert path.read_bytes().count(b"\n") == 6


def test_complete_last_record_missing_its_newline_is_kept(small_run):
    path = small_run / RECORDS
    data = path.read_bytes()
    path.write_bytes(data[:-1])  # the write stopped right before the newline
    assert len(read_records(small_run)) == 4
    resume(small_run, progress=False)  # a finished run: opens, mends the tail, runs nothing
    assert path.read_bytes() == data


def test_cut_last_line_is_dropped_before_appending(small_run):
    path = small_run / RECORDS
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:50])
    resume(small_run, progress=False)
    after = path.read_bytes().splitlines(keepends=True)
    assert after[:-1] == lines[:-1] and len(after) == 4
    assert all(line.endswith(b"\n") for line in after)


def test_run_dir_that_holds_a_run_or_is_a_file(small_run, tmp_path, script):
    model = script([], default=WRONG)
    args = ["run", "--num-envs", "1", "--num-trials", "1", "--model", model, "--quiet", "--run-dir"]
    before = (small_run / RECORDS).read_bytes()
    _one_line_error(run_cli(*args, str(small_run)), f"reinagent resume {small_run}")
    assert (small_run / RECORDS).read_bytes() == before
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    _one_line_error(run_cli(*args, str(a_file)), str(a_file), "is a file")
    orphan = tmp_path / "orphan"  # records without a spec: not a fresh directory either
    orphan.mkdir()
    (orphan / RECORDS).write_bytes(before)
    _one_line_error(run_cli(*args, str(orphan)), "already holds a run")


def test_corrupt_middle_line_is_named_and_repaired(small_run):
    path = small_run / RECORDS
    lines = path.read_bytes().splitlines(keepends=True)
    good = [TrialRecord.model_validate_json(line) for line in lines]
    bad = [b'{"task_id": "x", "trial": "not a number"}\n', b"\x00\xff garbage\n"]
    path.write_bytes(lines[0] + bad[0] + lines[1] + lines[2] + bad[1] + lines[3])
    with pytest.raises(RunDirError, match=rf"{path}:2 \(line 2\)"):
        read_records(small_run)
    _one_line_error(run_cli("report", str(small_run)), f"{path}:2", "reinagent repair")

    done = run_cli("repair", str(small_run))
    assert done.returncode == 0, done.stderr
    assert "moved lines 2, 5" in done.stdout and QUARANTINE in done.stdout and "kept 4" in done.stdout
    assert read_records(small_run) == good  # every good record, in order
    assert path.read_bytes() == b"".join(lines)
    moved = [json.loads(line) for line in (small_run / QUARANTINE).read_text().splitlines()]
    assert [m["line"] for m in moved] == [2, 5]
    assert moved[0]["text"] == bad[0].decode().rstrip("\n") and "base64" in moved[1]

    again = run_cli("repair", str(small_run))
    assert again.returncode == 0 and "nothing moved" in again.stdout
    assert len((small_run / QUARANTINE).read_text().splitlines()) == 2  # appended only when moving


def test_repair_waits_for_no_one(small_run, tmp_path):
    store, _spec, _records = RunStore.open(small_run)
    try:
        from reinagent.repair import repair

        with pytest.raises(RunLocked):
            repair(small_run)
    finally:
        store.close()
    _one_line_error(run_cli("repair", str(tmp_path / "nope")), "does not exist")


# Issue 38 section 4: a shared run directory's files are never opened through a symbolic link.

@pytest.mark.parametrize("name", [LOCK, RECORDS])
def test_resume_and_repair_refuse_a_run_whose_files_are_links(small_run, tmp_path, script, name):
    victim = tmp_path / "victim.txt"
    victim.write_text("the sharer's file\n")
    path = small_run / name
    keep = tmp_path / "kept"
    path.replace(keep)
    path.symlink_to(victim)
    for done in (run_cli("repair", str(small_run)), run_cli("resume", str(small_run), "--num-trials", "3")):
        _one_line_error(done, str(path), "symbolic link")
    with pytest.raises(RunDirError, match="symbolic link"):
        resume(small_run, num_trials=3, progress=False)
    assert victim.read_text() == "the sharer's file\n"  # neither truncated nor appended to


def test_a_dangling_records_link_is_not_created_anywhere(small_run, tmp_path):
    target = tmp_path / "elsewhere" / "made.jsonl"
    target.parent.mkdir()
    (small_run / RECORDS).replace(tmp_path / "kept")
    (small_run / RECORDS).symlink_to(target)
    _one_line_error(run_cli("resume", str(small_run), "--num-trials", "3"), "symbolic link")
    assert not target.exists()


def test_links_planted_after_the_check_are_refused_too(small_run, tmp_path):
    from reinagent.store import atomic_write

    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    store, spec, records = RunStore.open(small_run)
    try:
        (small_run / RECORDS).unlink()
        (small_run / RECORDS).symlink_to(victim)  # between the open and the next append
        with pytest.raises(RunDirError, match="symbolic link"):
            store.append(records[0])
        (small_run / f".spec.json.tmp{os.getpid()}").symlink_to(victim)  # the temp name is predictable
        atomic_write(small_run / "spec.json", "{}")  # the link is replaced, never written through
        assert json.loads((small_run / "spec.json").read_text()) == {}
    finally:
        store.close()
    assert victim.read_text() == "keep\n"
