"""`--local-engine llamacpp` (reinagent/llm/llamacpp_engine.py): a `local` model decoded by
llama.cpp's real server, which the run starts as a child on loopback and stops with itself.
Skipped only where the binary cannot exist (tests/test_llamacpp.py's _binary)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from reinagent.llm.base import GenerationParams, innermost
from reinagent.llm.stack import ModelSettings, build_llm
from reinagent.records import Message
from reinagent.runner import load_run
from tests.conftest import one_line_error, run_cli
from tests.test_llamacpp import _binary


def _servers() -> set[int]:
    """The pids of llama-server processes running now."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if argv0.endswith(b"llama-server"):
                pids.add(int(entry.name))
    return pids


@pytest.mark.slow
def test_a_run_on_llamacpp_records_the_engine_and_stops_its_server(tmp_path):
    _binary()
    before = _servers()
    result = run_cli("run", "--benchmark", "humaneval", "--num-envs", "2", "--strategy", "reflexion",
                     "--num-trials", "2", "--model", "local", "--local-engine", "llamacpp", "--max-concurrency", "2",
                     "--run-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "cache"), timeout=900)
    assert result.returncode in (0, 1), result.stderr  # 1: a task unsolved, which SmolLM2 may leave
    assert "starting llama.cpp's server for SmolLM2-135M-Instruct.Q4_1.gguf" in result.stderr
    spec, records = load_run(tmp_path / "r")
    assert spec.config["local_engine"] == "llamacpp"
    assert spec.settings["constrained"] is False  # llama.cpp reads GBNF, not our regular expressions
    calls = [c for r in records for c in [*r.trajectory.calls, *r.reflection_calls]]
    assert calls and all(c.model == "local" and c.completion_tokens > 0 for c in calls)
    assert all(r.error is None for r in records), [r.error for r in records]
    assert _servers() <= before  # the run's own server ended with it

    # a resume replays from the log and the cache: the same engine (the spec's), no new calls
    again = run_cli("resume", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "cache"), timeout=900)
    assert again.returncode in (0, 1), again.stderr
    assert load_run(tmp_path / "r")[0].config["local_engine"] == "llamacpp"


def test_the_engine_is_part_of_the_cache_key(tmp_path):
    """Two engines give different text for one request: neither replays the other's answers."""
    _binary()
    identities = {}
    for engine in ("openvino", "llamacpp"):
        llm = build_llm("local", ModelSettings(local_engine=engine, cache_dir=str(tmp_path)))
        identities[engine] = llm.identity
        assert type(innermost(llm)).__name__ == {"openvino": "OpenVINOLLM", "llamacpp": "LlamaCppLLM"}[engine]
    assert identities["openvino"] != identities["llamacpp"]
    assert identities["llamacpp"]["engine"] == "llamacpp" and "engine" not in identities["openvino"]


@pytest.mark.slow
def test_prompt_tokens_are_counted_as_the_server_counts_them():
    """count_prompt_tokens (the token budget, cutting text) renders and tokenizes on the server:
    the count equals the usage the server reports for the same prompt."""
    _binary()
    from reinagent.llm.llamacpp_engine import LlamaCppLLM

    llm = LlamaCppLLM("local", parallel=1)
    messages = [Message(role="system", content="You write Python."),
                Message(role="user", content="def add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n")]

    async def go():
        try:
            completion = await llm.generate(messages, GenerationParams(max_tokens=4))
            return completion, await asyncio.to_thread(llm.count_prompt_tokens, messages)
        finally:
            await llm.aclose()

    completion, counted = asyncio.run(go())
    assert completion.prompt_tokens > 10 and counted == completion.prompt_tokens
    assert completion.model == "local" and llm.load_info["engine"] == "llamacpp"


@pytest.mark.parametrize("flags, needles", [
    (["--constrained"], ["--constrained needs --local-engine openvino"]),
    (["--precision", "exact"], ["--precision exact is the OpenVINO engine's"]),
    (["--deterministic"], ["--deterministic is the OpenVINO engine's"]),
    (["--local-engine", "vllm"], ["--local-engine", "openvino", "llamacpp"]),
])
def test_what_llamacpp_cannot_do_is_one_line_before_any_run_directory(tmp_path, flags, needles):
    _binary()
    proc = run_cli("run", "--benchmark", "humaneval", "--model", "local", "--local-engine", "llamacpp",
                   *flags, "--run-dir", str(tmp_path / "r"))
    one_line_error(proc, *needles)
    assert not (tmp_path / "r").exists()


def test_a_model_that_is_not_local_or_a_missing_server_is_one_line(tmp_path, script):
    proc = run_cli("run", "--benchmark", "humaneval", "--model", script([]), "--local-engine", "llamacpp",
                   "--run-dir", str(tmp_path / "r"))
    one_line_error(proc, "--local-engine llamacpp is for a local model", "drop the flag")
    proc = run_cli("run", "--benchmark", "humaneval", "--model", "local", "--local-engine", "llamacpp",
                   "--run-dir", str(tmp_path / "r"), env={"REINAGENT_LLAMA_SERVER": str(tmp_path / "none")})
    one_line_error(proc, "REINAGENT_LLAMA_SERVER", "is not an executable file")
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("not a model")
    _binary()
    proc = run_cli("run", "--benchmark", "humaneval", "--model", f"local:{not_gguf}", "--local-engine", "llamacpp",
                   "--run-dir", str(tmp_path / "r"))
    one_line_error(proc, "is not a GGUF file")
    assert not (tmp_path / "r").exists()
