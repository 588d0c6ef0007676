"""Checks before a run, exit codes, and a resume that moves to another server (issue 14).

Every server here is a real loopback HTTP server (FakeOpenAIServer); a dead endpoint is a port
nothing listens on. No test measures time: "fails fast" means it fails in the preflight, before a
run directory exists and before any chat completion is asked for.
"""

from __future__ import annotations

import json
import sys

import pytest

from reinagent.config import RunConfig
from reinagent.errors import ConfigError
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.outcome import EXIT_ALL_ERRORS, EXIT_SOME_ERRORS, Outcome, error_kind
from reinagent.preflight import PreflightError
from reinagent.records import TrialRecord
from reinagent.store import read_spec
from tests.conftest import run_cli

DEAD = "http://127.0.0.1:1/v1"  # port 1: nothing listens there
BASE = ["run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-envs", "2", "--num-trials", "2",
        "--quiet"]


def _lines(text: str) -> list[str]:
    return [line for line in text.strip().splitlines() if line.strip()]


def _one_line(proc) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = _lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _args(server_url: str, run_dir, *extra: str) -> list[str]:
    return [*BASE, "--model", "openai/fake", "--base-url", server_url, "--run-dir", str(run_dir), "--no-cache", *extra]


# --- preflight -----------------------------------------------------------------------------------

def test_dead_endpoint_fails_in_the_preflight_with_one_line(tmp_path):
    proc = run_cli(*_args(DEAD, tmp_path / "r"))
    assert proc.returncode == 2
    line = _one_line(proc)
    assert DEAD in line and "connection refused" in line and "--base-url" in line, line
    assert not (tmp_path / "r").exists(), "the preflight runs before a run directory is made"


def test_unknown_provider_fails_in_the_preflight(tmp_path):
    proc = run_cli(*BASE, "--model", "nosuchprovider/foo", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2
    line = _one_line(proc)
    assert "nosuchprovider/foo" in line and "unknown provider 'nosuchprovider'" in line and "openai" in line
    assert not (tmp_path / "r").exists()


def test_base_url_that_is_not_a_url_names_the_flag(tmp_path):
    proc = run_cli(*_args("notaurl", tmp_path / "r"))
    assert proc.returncode == 2
    line = _one_line(proc)
    assert line == ("error: --base-url must be an http(s) URL such as http://127.0.0.1:8000/v1, "
                    "got 'notaurl'"), line


def test_validation_errors_name_the_flag(tmp_path):
    proc = run_cli(*BASE[:-1], "--num-trials", "-2", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert _one_line(proc) == "error: --num-trials must be a positive whole number, got -2"


def test_a_server_that_refuses_the_key_is_named(tmp_path):
    # A real server answering 401 to GET /models (what vLLM with --api-key does without the key).
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import threading

    class Refusing(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        proc = run_cli(*_args(url, tmp_path / "r"), env={"REINAGENT_SERVER_API_KEY": ""})
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 2
    line = _one_line(proc)
    assert url in line and "HTTP 401" in line and "REINAGENT_SERVER_API_KEY" in line, line


def test_a_local_litellm_provider_gets_a_connection_check(monkeypatch):
    from reinagent.preflight import PreflightSettings, preflight

    settings = PreflightSettings(actor_model="ollama/llama3", reflection_model="ollama/llama3")
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:1")
    with pytest.raises(PreflightError) as err:
        preflight(settings)
    assert "http://127.0.0.1:1" in str(err.value) and "connection refused" in str(err.value)
    with FakeOpenAIServer() as server:  # something listening there: the check passes
        monkeypatch.setenv("OLLAMA_API_BASE", server.base_url.removesuffix("/v1"))
        preflight(settings)
        assert server.count == 0  # no completion was asked for


def test_missing_alfworld_extra_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "textworld", None)  # `import textworld` fails, as when not installed
    from reinagent.errors import MissingExtra
    from reinagent.plan import resolve

    with pytest.raises(MissingExtra) as err:  # while resolving, before the benchmark is imported
        resolve(RunConfig(benchmark="alfworld", model="openai/x", base_url="http://127.0.0.1:9/v1"))
    assert isinstance(err.value, PreflightError)
    text = str(err.value)
    assert "alfworld extra" in text and "textworld" in text and "pip install -e '.[alfworld]'" in text
    assert "\n" not in text


def test_missing_alfworld_extra_stops_the_cli_before_anything_starts(tmp_path):
    code = ("import sys; sys.modules['textworld'] = None; sys.modules['alfworld'] = None\n"
            "from reinagent.cli import main; main()")
    import subprocess

    from tests.conftest import ROOT

    proc = subprocess.run(
        [sys.executable, "-c", code, "run", "--benchmark", "alfworld", "--num-envs", "1", "--model", "openai/x",
         "--base-url", DEAD, "--run-dir", str(tmp_path / "r")],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc)
    assert "alfworld extra" in line and "pip install -e '.[alfworld]'" in line, line
    assert not (tmp_path / "r").exists()


# --- exit codes ----------------------------------------------------------------------------------

def test_every_episode_failing_stops_after_the_trial_and_exits_4(tmp_path):
    # The server is up (the preflight passes) but refuses every completion: an infrastructure
    # failure of every episode of trial 1. Trial 2 must not start.
    with FakeOpenAIServer(fault_when=lambda body: "400") as server:
        proc = run_cli(*_args(server.base_url, tmp_path / "r"))
    assert proc.returncode == EXIT_ALL_ERRORS, proc.stderr
    assert "not starting trial 2" in proc.stderr
    assert "errors: every (task, trial)s ended in an error (model error x2)" in proc.stderr
    assert "Traceback" not in proc.stderr
    records = [json.loads(line) for line in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert sorted(r["trial"] for r in records) == [1, 1]
    assert all(r["error"].startswith("model error") for r in records)


def test_some_errors_exit_3_with_a_summary_of_kinds(tmp_path):
    # Exactly one request (the first to arrive) is refused: one (task, trial) errors, the rest run.
    with FakeOpenAIServer(faults={1: "400"}) as server:
        proc = run_cli(*_args(server.base_url, tmp_path / "r"))
    assert proc.returncode == EXIT_SOME_ERRORS, proc.stderr
    summary = [line for line in _lines(proc.stderr) if line.startswith("errors:")]
    assert summary == ["errors: 1 of 4 (task, trial)s ended in an error (model error x1)"], proc.stderr
    assert "--retry-errors" in proc.stderr


def test_a_clean_run_exits_0(tmp_path):
    with FakeOpenAIServer() as server:
        proc = run_cli(*_args(server.base_url, tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "errors:" not in proc.stderr


def test_outcome_counts_kinds():
    recs = [TrialRecord(task_id="a", trial=1, error="model error: HTTP 400"),
            TrialRecord(task_id="b", trial=1, error="sandbox error: bwrap failed"),
            TrialRecord(task_id="c", trial=1, error="model error: HTTP 500"),
            TrialRecord(task_id="d", trial=1)]
    out = Outcome.of(recs)
    assert out.exit_code == EXIT_SOME_ERRORS and out.kinds == {"model error": 2, "sandbox error": 1}
    assert Outcome.of(recs[:3]).exit_code == EXIT_ALL_ERRORS and Outcome.of(recs[3:]).exit_code == 0
    assert error_kind("KeyError: 'x'") == "KeyError"


# --- resume that can move ------------------------------------------------------------------------

def test_resume_moves_to_a_server_on_a_new_port_and_records_it(tmp_path):
    run_dir = tmp_path / "r"
    with FakeOpenAIServer(fault_when=lambda body: "400") as old:
        old_url = old.base_url
        assert run_cli(*_args(old_url, run_dir)).returncode == EXIT_ALL_ERRORS
    # The old server is gone: resuming without moving fails in the preflight, naming both fixes.
    proc = run_cli("resume", str(run_dir), "--retry-errors", "--quiet")
    assert proc.returncode == 2
    line = _one_line(proc)
    assert old_url in line and "reinagent resume RUN_DIR --base-url URL" in line, line
    with FakeOpenAIServer() as new:
        proc = run_cli("resume", str(run_dir), "--retry-errors", "--base-url", new.base_url,
                       "--max-concurrency", "1", "--quiet")
        assert proc.returncode == 0, proc.stderr
        assert new.count == 2 + 2 + 2  # trial 1 actor + reflection per task, then trial 2's actor
    spec = read_spec(run_dir)
    assert spec.config["base_url"] == new.base_url and spec.config["max_concurrency"] == 1
    change = spec.history[-1].changes
    assert change["base_url"] == {"from": old_url, "to": new.base_url}
    assert change["max_concurrency"] == {"from": None, "to": 1}
    assert "retry_errors" in change


@pytest.mark.parametrize("flag, value", [("--strategy", "none"), ("--benchmark", "mbpp"), ("--split", "x"),
                                         ("--agent", "react")])
def test_resume_refuses_to_change_what_the_run_measures(tmp_path, script, flag, value):
    model = script([], default="Thought: x\nAction: Finish[wrong]")
    run_dir = tmp_path / "r"
    assert run_cli(*BASE, "--model", model, "--run-dir", str(run_dir), "--num-trials", "1").returncode == 0
    before = (run_dir / "spec.json").read_text()
    proc = run_cli("resume", str(run_dir), flag, value)
    assert proc.returncode == 2
    line = _one_line(proc)
    assert "resume cannot change" in line and "new run" in line, line
    assert (run_dir / "spec.json").read_text() == before


def test_resume_api_refuses_fixed_settings_and_validates_overrides(tmp_path, script):
    from reinagent import resume, run

    model = script([], default="Thought: x\nAction: Finish[wrong]")
    run_dir = run(benchmark="hotpotqa", agent="cot-context", num_envs=1, num_trials=1, model=model,
                  run_dir=str(tmp_path / "r"), progress=False)
    with pytest.raises(ConfigError, match="resume cannot change --temperature"):
        resume(run_dir, overrides={"temperature": 0.7}, progress=False)
    with pytest.raises(ConfigError, match="--max-concurrency must be a positive whole number, got -1"):
        resume(run_dir, overrides={"max_concurrency": -1}, progress=False)
    assert read_spec(run_dir).history == []


# --- the demo's console: model loading apart from trial progress ---------------------------------

@pytest.mark.slow
def test_local_model_loads_on_its_own_lines_before_trial_progress(tmp_path):
    run_dir = tmp_path / "r"
    proc = run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-envs", "1", "--num-trials", "1",
                   "--model", "local", "--max-tokens", "16", "--no-cache", "--run-dir", str(run_dir), timeout=900)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    loading, ready, trial = err.index("loading model local ..."), err.index("model local ready ("), err.index("trial 1")
    assert loading < ready < trial, err
    assert err.count("loading model") == 1, err  # the constrained actor and the Reflector share the engine
    out = _lines(proc.stdout)
    assert [line for line in out if line.startswith("report:")] == [f"report:        {run_dir / 'report.html'}"]
    # a resume with nothing left to do does not load the model at all
    again = run_cli("resume", str(run_dir), "--quiet")
    assert again.returncode == 0 and "loading model" not in again.stderr, again.stderr


def test_a_model_shared_by_actor_and_reflector_is_announced_once(capsys):
    """Two stacks over one local engine (a constrained actor, its unconstrained Reflector): one
    "loading model" line; both are still called (the second only finds the engine loaded)."""
    import asyncio

    from reinagent.llm.openvino import OpenVINOLLM
    from reinagent.preflight import warm_up

    calls = []

    class Engine(OpenVINOLLM):
        def __init__(self, name):
            self.name = name

        async def generate(self, messages, params, *, rollout_id=None):
            calls.append(self.name)

    class Wrapper:
        def __init__(self, inner):
            self.inner = inner

    asyncio.run(warm_up([Wrapper(Engine("local")), Engine("local"), Engine("local:/other.gguf")]))
    err = capsys.readouterr().err
    assert err.count("loading model local ...") == 1 and err.count("loading model local:/other.gguf") == 1, err
    assert calls == ["local", "local", "local:/other.gguf"]


def test_a_run_that_fails_to_start_leaves_no_run_directory(tmp_path, script, monkeypatch):
    """A start-up failure after the run directory was made (a model that does not load, a cluster
    not joined) removes spec.json and run.lock again, so the same command can be run again; a
    folder that held something else before is left as it was."""
    from reinagent import run
    from reinagent.errors import ConfigError
    from reinagent.executors.local import LocalExecutor

    async def fails(self):
        raise ConfigError("model local: failed to load")

    monkeypatch.setattr(LocalExecutor, "start", fails)
    model = script([])
    for _ in range(2):  # the second attempt fails the same way, not with "already holds a run"
        with pytest.raises(ConfigError, match="failed to load"):
            run(benchmark="hotpotqa", agent="cot-context", num_envs=1, num_trials=1, model=model,
                run_dir=str(tmp_path / "r"), progress=False)
        assert not (tmp_path / "r").exists()
    (tmp_path / "empty").mkdir()  # an existing empty folder: emptied again, not removed
    with pytest.raises(ConfigError):
        run(benchmark="hotpotqa", agent="cot-context", num_envs=1, num_trials=1, model=model,
            run_dir=str(tmp_path / "empty"), progress=False)
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())
