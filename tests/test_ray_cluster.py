"""The Ray executor on a two-node cluster (issue 19 §2): `ray start --head` plus a second `ray
start --address` node, one CPU each, both on this machine but separate raylets, as a multi-machine
cluster is. Each episode appends where it ran (REINAGENT_RAY_TRACE, set in both nodes'
environment) so the test sees that both nodes ran episodes; the records must equal the local
executor's. Also the embedded model as one Ray actor that every episode calls.

The nodes run in their own temporary directory (session files, sockets, logs) and are stopped
by killing the `ray start --block` processes this module started, never `ray stop` (which
stops every Ray node of the machine)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from reinagent import run
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.runner import load_run
from tests.conftest import ROOT
from tests.test_ray_executor import TOKEN, _comparable, _free_port, _one_line_per_key, _text

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="the ray extra is not installed: pip install 'reinagent[ray]'")

RAY = str(Path(sys.executable).with_name("ray"))
NODES_UP = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
print(sum(1 for n in ray.nodes() if n["Alive"]), flush=True)
ray.shutdown()
"""


def _alive_nodes(address: str) -> int:
    proc = subprocess.run([sys.executable, "-c", NODES_UP, address], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    lines = proc.stdout.strip().splitlines()
    return int(lines[-1]) if proc.returncode == 0 and lines and lines[-1].isdigit() else 0


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to `ray start --block` stops its node's processes; kill what is left of its tree."""
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for child in tree:
        try:
            child.kill()
        except psutil.Error:
            pass


@pytest.fixture(scope="module")
def two_nodes():
    """Yields (address, trace file). Skips, saying why, only when Ray cannot bring both nodes up."""
    root = Path(tempfile.mkdtemp(prefix="rr-"))  # short: Ray's socket paths must stay under 107 bytes
    trace = root / "trace.jsonl"
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN,
           "REINAGENT_RAY_TRACE": str(trace)}
    patch = pytest.MonkeyPatch()
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):  # this process is the driver: same token
        patch.setenv(name, env[name])
    from ray.util import get_node_ip_address  # after the token is set: Ray reads it on import

    # The node's own address, as Ray picks it (it rewrites 127.0.0.1 to it when joining, and a
    # process that already joined a cluster keeps that choice).
    port = _free_port()
    address = f"{get_node_ip_address()}:{port}"
    common = ["--num-cpus=1", "--block", "--disable-usage-stats"]
    procs: list[subprocess.Popen] = []
    try:
        def start(args: list[str], nodes: int, what: str) -> None:
            """Start one `ray start` and poll (deadline 180 s) until the cluster has `nodes` alive."""
            proc = subprocess.Popen([RAY, "start", *args, *common], env=env, cwd=root,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(proc)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and proc.poll() is None and _alive_nodes(address) < nodes:
                time.sleep(1)
            if _alive_nodes(address) < nodes:
                pytest.skip(f"`ray start {what}` did not bring up node {nodes} in 180 s (exit {proc.poll()})")

        start(["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={root / 'head'}"], 1, "--head")
        start([f"--address={address}", f"--temp-dir={root / 'node2'}"], 2, "--address")
        yield address, trace
    finally:
        for proc in reversed(procs):
            _stop(proc)
        patch.undo()
        shutil.rmtree(root, ignore_errors=True)


def _traced(trace: Path) -> list[dict]:
    if not trace.exists():
        return []
    return [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]


def test_episodes_run_on_both_nodes_and_equal_the_local_executors(tmp_path, two_nodes):
    address, trace = two_nodes
    # Hold each first-trial call until two are in flight at once: one CPU per node and one per
    # episode, so two episodes at once are on two nodes (if Ray never spreads them, the wait
    # ends at its deadline and the node check below fails).
    lock, in_flight, both = threading.Lock(), [0], threading.Event()

    def two_at_once(body):
        if "failed attempt" in _text(body).lower() or both.is_set():
            return None
        with lock:
            in_flight[0] += 1
            if in_flight[0] >= 2:
                both.set()
        both.wait(300)
        return None

    before = len(_traced(trace))
    kw = dict(benchmark="hotpotqa", agent="cot-context", num_trials=2, num_envs=3, model="openai/fake",
              cache=False, progress=False)
    with FakeOpenAIServer() as server:
        local = run(**kw, base_url=server.base_url, run_dir=str(tmp_path / "local"))
    with FakeOpenAIServer(fault_when=two_at_once) as server:
        on_ray = run(**kw, base_url=server.base_url, run_dir=str(tmp_path / "ray"), executor="ray",
                     ray_address=address)
    assert both.is_set(), "Ray never ran two episodes at once on the two one-CPU nodes"
    ran = _traced(trace)[before:]
    assert sorted((e["task_id"], e["trial"]) for e in ran) == sorted(
        (r.task_id, r.trial) for r in load_run(local)[1])
    assert len({e["node_id"] for e in ran}) == 2, ran
    assert _comparable(load_run(on_ray)[1]) == _comparable(load_run(local)[1])
    _one_line_per_key(on_ray)


def _embedded_model_ready() -> str | None:
    try:
        from reinagent.llm.local import embedded_gguf

        embedded_gguf()
    except Exception as err:  # noqa: BLE001 - the wheel is an optional extra
        return str(err)
    return None if importlib.util.find_spec("torch") else "torch is not installed (the local extra)"


def test_the_embedded_model_is_one_actor_every_episode_calls(tmp_path, two_nodes, capfd):
    why = _embedded_model_ready()
    if why:
        pytest.skip(why)
    address, trace = two_nodes
    # Tiny: the embedded model is slow on a loaded CPU. Greedy, no cache, and deterministic: the engine's
    # greedy text is not batch-invariant (docs/performance.md), and which calls share a batch is up to
    # the scheduler, in this process and in the actor alike; one sequence at a time, a reply depends on
    # its prompt only, so both executors must give the same outputs (a near tie once parted them: CI, Zen 4).
    kw = dict(benchmark="hotpotqa", agent="cot-context", num_trials=1, num_envs=2, model="local", max_tokens=16,
              cache=False, progress=False, deterministic=True)
    local = run(**kw, run_dir=str(tmp_path / "local"))
    before = len(_traced(trace))
    on_ray = run(**kw, run_dir=str(tmp_path / "ray"), executor="ray", ray_address=address)
    err = capfd.readouterr().err
    assert "model local ready" in err  # loaded once, in the actor, before any episode
    assert "one sequence at a time" in err  # the actor's engine is the run's: --deterministic reached it
    ran = _traced(trace)[before:]
    assert len(ran) == 2 and not any(e["torch_loaded"] for e in ran), ran  # no worker loaded the model
    records = load_run(on_ray)[1]
    assert all(r.error is None and r.calls for r in records), [r.error for r in records]
    assert _comparable(records) == _comparable(load_run(local)[1])
