"""The kill campaign (scripts/fault_campaign.py) in small, and the pieces it relies on: children
that die with the runner, an orphan scan that finds what does not, a resume that asks the same."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "fault_campaign.py"


def _campaign(tmp_path, *args: str, timeout: float = 900) -> dict:
    out = tmp_path / "campaign.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--workdir", str(tmp_path / "work"),
                           "--json", str(out), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.exists(), proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert proc.returncode == 0 and report["total"]["ok"], proc.stdout + proc.stderr
    return report


def _check(bench: dict) -> None:
    assert bench["kills"], f"{bench['benchmark']}: no kill landed"
    assert bench["records"] > 0 and not bench["duplicates"] and not bench["mismatches"]
    assert bench["same_requests"]  # the resumed run asked the model exactly what the reference did
    # per kill, calls made again <= calls in flight: sent, with no answer stored when it died
    for kill in bench["kills"]:
        assert 0 <= kill["repeated"] <= kill["in_flight"] == kill["calls"] - kill["stored"]
    assert bench["calls_repeated"] == sum(k["repeated"] for k in bench["kills"])
    assert not bench["orphans"] and not bench["failed_starts"]


def test_kill_campaign_hotpotqa_and_humaneval(tmp_path):
    report = _campaign(tmp_path, "--kills", "8", "--benchmarks", "hotpotqa,humaneval", "--seed", "7")
    assert [b["benchmark"] for b in report["benchmarks"]] == ["hotpotqa", "humaneval"]
    for bench in report["benchmarks"]:
        _check(bench)


@pytest.mark.alfworld
def test_kill_campaign_alfworld(tmp_path):
    report = _campaign(tmp_path, "--kills", "2", "--benchmarks", "alfworld", "--seed", "3")
    if report["skipped"]:
        pytest.skip(f"alfworld: {report['skipped']['alfworld']}")
    _check(report["benchmarks"][0])


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie has exited
    except OSError:
        return True


def _wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_alfworld_worker_dies_with_its_parent_even_when_its_socket_stays_open():
    """The socket's EOF cannot tell a worker its parent died while another process still holds
    the parent's end (here a child of the parent, as a sandbox or a second worker could be);
    PR_SET_PDEATHSIG does, even for a worker busy in a long step."""
    pytest.importorskip("textworld")
    driver = textwrap.dedent("""
        import subprocess, sys, time
        from reinagent.benchmarks.alfworld_env import _Worker
        worker = _Worker()
        holder = subprocess.Popen(["sleep", "600"], pass_fds=(worker.conn.fileno(),), start_new_session=True)
        print(worker.process.pid, holder.pid, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    worker_pid, holder_pid = map(int, proc.stdout.readline().split())
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _wait_gone(worker_pid), "the ALFWorld worker outlived its parent"
    finally:
        for pid in (worker_pid, holder_pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_the_orphan_scan_finds_a_child_that_outlives_the_runner(tmp_path):
    """The campaign's own check can fail: a killed process's child that ignores its parent's
    death (new session, no PDEATHSIG) is found and reported."""
    probe = textwrap.dedent(f"""
        import importlib.util, os, signal, subprocess, sys, time
        spec = importlib.util.spec_from_file_location("fc", {str(SCRIPT)!r})
        fc = importlib.util.module_from_spec(spec); sys.modules["fc"] = fc; spec.loader.exec_module(fc)
        fc.become_subreaper()
        fc.ORPHAN_DEADLINE_S = 1.0
        runner = fc.launch(["--version"], "marker-x", __import__("pathlib").Path({str(tmp_path / 'log')!r}))
        runner.wait()
        # a stand-in runner whose child survives it
        parent = subprocess.Popen([sys.executable, "-c",
            "import subprocess, time; subprocess.Popen(['sleep', '600'], start_new_session=True); time.sleep(600)"],
            env={{**os.environ, fc.MARKER_ENV: "marker-y"}}, start_new_session=True)
        deadline = time.monotonic() + 30
        while not fc.leftovers("marker-y", parent.pid) or len(fc.leftovers("marker-y", parent.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(parent.pid, signal.SIGKILL); parent.wait()
        print(len(fc.wait_for_no_leftovers("marker-y", parent.pid)))
        print(len(fc.wait_for_no_leftovers("marker-x", runner.pid)))
    """)
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "0"]  # the surviving sleep; nothing after a clean exit


def test_alfworld_worker_outlives_the_thread_that_started_it():
    """PR_SET_PDEATHSIG fires when the spawning *thread* exits: the pool starts workers from one
    long-lived thread, so an episode begun on a short-lived thread keeps its game."""
    import threading

    pytest.importorskip("textworld")
    from reinagent.benchmarks.alfworld_env import WorkerError, WorkerPool

    pool = WorkerPool(1)
    got: list = []

    def episode_start():
        worker = pool.acquire()
        with pytest.raises(WorkerError, match="engine failed"):  # a round trip: the worker is up
            worker.request(("step", "look"), timeout=300)
        got.append(worker)

    try:
        thread = threading.Thread(target=episode_start)
        thread.start()
        thread.join()
        assert got, "the worker did not start"
        with pytest.raises(WorkerError, match="engine failed"):  # answered: it is alive
            got[0].request(("step", "look"), timeout=300)
    finally:
        pool.close()
