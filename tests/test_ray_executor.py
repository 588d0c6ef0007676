"""The Ray executor (issue 19 §2) on a real local cluster: a `ray.init(num_cpus=2)` in a child
process (never local_mode), which this process joins through --ray-address as a remote driver
would. Episodes run in Ray workers, model calls go from the workers to a loopback server, and
records come back to the driver, the single writer of the run directory."""

from __future__ import annotations

import importlib.util
import os
import secrets
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

from reinagent import run
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.runner import load_run
from reinagent.store import read_log
from tests.conftest import ROOT, one_line_error, run_cli

# Not imported here: Ray reads its auth settings when first imported, after `cluster` sets them.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="the ray extra is not installed: pip install 'reinagent[ray]'")

VIVA = "VIVA Media AG"  # the first task of hard100
VIVA_ID = "5a7613c15542994ccc9186bf"

# One token for every cluster this test session starts (test_ray_cluster.py's too): a driver
# process reads Ray's token once, so a later cluster with another token would refuse it.
TOKEN = secrets.token_hex(16)

CLUSTER = """
import sys, ray
ctx = ray.init(num_cpus=2, include_dashboard=False)
print(ctx.address_info["gcs_address"], flush=True)
sys.stdin.read()  # serve until the test closes our stdin
ray.shutdown()
"""


@pytest.fixture(scope="module")
def cluster():
    """A two-CPU Ray cluster in a child process; yields its address and the child's pid. Ray
    (>= 2.59) authenticates with a token: the cluster and this driver share a fresh one, as the
    nodes of a real cluster do (docs/multi-machine.md)."""
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}
    patch = pytest.MonkeyPatch()
    for name, value in auth.items():
        patch.setenv(name, value)
    procs = []
    try:
        for _attempt in range(3):  # ray.init gives a raylet 30 s to register: a busy machine may need another go
            proc = subprocess.Popen([sys.executable, "-c", CLUSTER], cwd=ROOT, stdin=subprocess.PIPE,
                                    env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(proc)
            address = proc.stdout.readline().strip()  # ray.init returns once the cluster is up
            if address:
                break
            proc.wait(120)
        if not address:  # Ray's own start-up, before any of our code runs: not a finding about reinagent
            pytest.skip("Ray could not start a local node in 3 attempts (its raylet start limit on a busy machine)")
        yield address, proc.pid
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.stdin.close()
                try:
                    proc.wait(120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        patch.undo()


def _wait_until(predicate, what, timeout=180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _text(body) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def _comparable(records) -> dict:
    return {
        (r.task_id, r.trial): {
            "prompts": [[m.model_dump() for m in r.trajectory.prompt_of(s)] for s in r.trajectory.steps],
            "outputs": [s.output for s in r.trajectory.steps], "reflection": r.reflection,
            "memory": r.memory, "success": r.success, "answer": r.answer, "error": r.error,
        }
        for r in records
    }


def _run(tmp_path, name, server, **kw):
    return run(benchmark="hotpotqa", agent="cot-context", num_trials=3, num_envs=3, model="openai/fake",
               base_url=server.base_url, run_dir=str(tmp_path / name), cache=False, progress=False, **kw)


def _one_line_per_key(run_dir) -> None:
    keys = [(e.task_id, e.trial) for e in read_log(run_dir)]
    assert len(keys) == len(set(keys)), keys


def _episode_workers(cluster_pid: int) -> list[psutil.Process]:
    """Ray worker processes of the cluster that are running one of our episodes right now (Ray
    titles a busy worker `ray::run_job`)."""
    found = []
    for proc in psutil.Process(cluster_pid).children(recursive=True):
        try:
            if "run_job" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def test_ray_records_equal_the_local_executors(tmp_path, cluster):
    address, _pid = cluster
    with FakeOpenAIServer() as server:
        local = _run(tmp_path, "local", server)
        on_ray = _run(tmp_path, "ray", server, executor="ray", ray_address=address)
    assert _comparable(load_run(on_ray)[1]) == _comparable(load_run(local)[1])
    assert len(load_run(on_ray)[1]) == 9
    _one_line_per_key(on_ray)


@pytest.mark.parametrize("retries", [2, 0])
def test_a_worker_killed_mid_episode_is_retried_or_recorded_as_an_error(tmp_path, cluster, monkeypatch, retries):
    from reinagent.executors import ray as ray_executor

    monkeypatch.setattr(ray_executor, "MAX_RETRIES", retries)
    address, cluster_pid = cluster
    held, killed = threading.Event(), threading.Event()

    def hold(body):
        text = _text(body)
        if VIVA in text and "failed attempt" not in text.lower() and not killed.is_set():
            held.set()  # task A's trial-1 actor call: its worker is about to be killed
            killed.wait(180)
            return "drop"
        return None

    box: dict = {}
    with FakeOpenAIServer(fault_when=hold) as server:
        driver = threading.Thread(target=lambda: box.setdefault("dir", _run(
            tmp_path, "r", server, executor="ray", ray_address=address)))
        driver.start()
        try:
            _wait_until(held.is_set, "task A's first model call, from a Ray worker")
            # Tasks B and C run all their trials meanwhile; then the only busy worker is A's.
            _wait_until(lambda: len([e for e in read_log(tmp_path / "r") if e.task_id != VIVA_ID]) == 6,
                        "tasks B and C to finish")
            victims = _wait_until(lambda: _episode_workers(cluster_pid), "task A's busy Ray worker")
            assert len(victims) == 1, victims
            os.kill(victims[0].pid, 9)
        finally:
            killed.set()
            driver.join(600)
        viva_calls = sum(1 for b in server.requests if VIVA in _text(b) and "failed attempt" not in _text(b).lower())
    assert not driver.is_alive()
    records = {(r.task_id, r.trial): r for r in load_run(box["dir"])[1]}
    _one_line_per_key(box["dir"])
    first = records[(VIVA_ID, 1)]
    if retries:
        assert first.error is None and viva_calls >= 4  # A's trial 1 ran again (then trials 2, 3)
        assert len(records) == 9 and all(r.error is None for r in records.values())
    else:
        assert first.error and first.error.startswith("infrastructure error: ray"), first.error
        assert len(records) == 9  # the run went on: other tasks, and A's later trials
        assert all(r.error is None for key, r in records.items() if key != (VIVA_ID, 1))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_ray_address_is_a_one_line_error(tmp_path):
    proc = run_cli("run", "--benchmark", "hotpotqa", "--num-envs", "1", "--model", "openai/fake", "--base-url",
                   "http://127.0.0.1:9/v1", "--executor", "ray", "--ray-address", f"127.0.0.1:{_free_port()}",
                   "--run-dir", str(tmp_path / "r"), timeout=120)
    one_line_error(proc, "cannot reach the Ray cluster", "--ray-address")
    assert not (tmp_path / "r").exists()


def test_an_address_that_is_not_ray_is_a_one_line_error(tmp_path):
    """A port that accepts and never answers (another service, a wrong port): without the gRPC
    probe ray.init retried for minutes (over 240 s here); now one line before any run directory."""
    with socket.socket() as silent, FakeOpenAIServer() as server:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        proc = run_cli("run", "--benchmark", "hotpotqa", "--num-envs", "1", "--model", "openai/fake", "--base-url",
                       server.base_url, "--executor", "ray", "--ray-address",
                       f"127.0.0.1:{silent.getsockname()[1]}", "--run-dir", str(tmp_path / "r"), timeout=120)
    one_line_error(proc, "not as a Ray cluster")
    assert not (tmp_path / "r").exists()


def test_ray_workers_replay_the_local_executors_cache(tmp_path, cluster):
    """Same cache, same records: the workers build the driver's cache layer (identity, scope), so
    a Ray run replays every answer a local run cached (--cache-scope shared) without one call to
    the server. (The embedded model on Ray, one actor for all episodes: test_ray_cluster.py.)"""
    address, _pid = cluster
    kw = dict(benchmark="hotpotqa", agent="cot-context", num_trials=3, num_envs=3, model="openai/fake",
              cache=True, cache_dir=str(tmp_path / "cache"), cache_scope="shared", progress=False)
    with FakeOpenAIServer() as server:
        local = run(**kw, base_url=server.base_url, run_dir=str(tmp_path / "local"))
        calls = len(server.requests)
        on_ray = run(**kw, base_url=server.base_url, run_dir=str(tmp_path / "ray"), executor="ray",
                     ray_address=address)
        assert calls > 0 and len(server.requests) == calls  # every call a cache hit, on the workers
    records = load_run(on_ray)[1]
    assert all(c.cached for r in records for c in r.calls)
    assert _comparable(records) == _comparable(load_run(local)[1])


RAY_INIT_TIMES_OUT = """
import sys, ray
from reinagent import run
from reinagent.errors import ConfigError

def times_out(*args, **kwargs):
    raise TimeoutError("Timed out after 60 s waiting for the GCS to start")

ray.init = times_out
for attempt in (1, 2):  # the identical command again: the same error, not "already holds a run"
    try:
        run(benchmark="hotpotqa", num_envs=1, model="openai/fake", base_url=sys.argv[2], executor="ray",
            run_dir=sys.argv[1], progress=False)
    except ConfigError as err:
        print("ERROR", err)
"""


def test_a_local_ray_start_that_times_out_leaves_nothing_and_no_token_hint(tmp_path):
    """The private cluster a run starts has no token: its failure names the start and a retry,
    and the run directory made just before is removed (spec.json and run.lock included)."""
    with FakeOpenAIServer() as server:
        proc = subprocess.run([sys.executable, "-c", RAY_INIT_TIMES_OUT, str(tmp_path / "r"), server.base_url],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    errors = [line for line in proc.stdout.splitlines() if line.startswith("ERROR ")]
    assert len(errors) == 2 and errors[0] == errors[1], proc.stdout + proc.stderr
    assert "cannot start a local Ray cluster: Timed out" in errors[0] and "ray start --head" in errors[0]
    assert "RAY_AUTH_MODE" not in errors[0] and "token" not in errors[0]
    assert not (tmp_path / "r").exists()
