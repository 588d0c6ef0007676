"""Hosted-model backends against a real loopback server; keys never reach records or errors."""

from __future__ import annotations

import asyncio

import pytest

from reinagent import run
from reinagent.errors import ConfigError, ModelError
from reinagent.llm import backend_of, make_llm
from reinagent.llm.base import GenerationParams
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.llm.litellm_backend import LiteLLM
from reinagent.records import Message

SECRET = "sk-test-THIS-MUST-NEVER-BE-WRITTEN-1234567890"


def test_backend_selection():
    assert backend_of("local") == backend_of("local:/some/dir") == "local"
    assert backend_of("scripted:x.yaml") == "scripted"
    assert backend_of("openai/gpt-4o-mini") == "litellm"
    assert backend_of("openai/my-model", "http://127.0.0.1:8000/v1") == "openai-compatible"
    assert backend_of("ollama/llama3", "http://127.0.0.1:11434") == "litellm"
    with pytest.raises(ConfigError, match="unknown model backend"):
        backend_of("gpt-4o")


def test_litellm_backend_against_loopback_server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with FakeOpenAIServer(faults={1: "429"}) as server:
        llm = LiteLLM("openai/fake-model", api_base=server.base_url)
        completion = asyncio.run(llm.generate(
            [Message(role="user", content="Question: who?")], GenerationParams(max_tokens=20, stop=("\nObservation",))
        ))
        assert completion.text.startswith("Thought:")
        assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
        assert server.count == 2  # the 429 was retried
        assert server.requests[-1]["model"] == "fake-model"


def test_openai_compatible_plain_server():
    with FakeOpenAIServer() as server:
        llm = make_llm("openai/served-model", base_url=server.base_url)
        completion = asyncio.run(llm.generate([Message(role="user", content="hi")], GenerationParams(max_tokens=8)))
        assert server.requests[0]["model"] == "served-model"
        assert completion.model == "openai/served-model" and completion.latency_s > 0


def test_keys_never_reach_run_dirs_or_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    def fault(body):
        return "400" if "VIVA" in body["messages"][-1]["content"] else None

    cache_dir = tmp_path / "cache"
    with FakeOpenAIServer(fault_when=fault) as server:
        run_dir = run(benchmark="hotpotqa", num_trials=2, num_envs=2, model="openai/fake",
                      base_url=server.base_url, run_dir=str(tmp_path / "r"), cache_dir=str(cache_dir),
                      progress=False)
        assert server.headers_seen[0]["Authorization"] == f"Bearer {SECRET}"  # it did use the key
    for folder in (run_dir, cache_dir):
        for path in folder.rglob("*"):
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path
    # an error message that quotes the key is redacted
    with FakeOpenAIServer(fault_when=lambda body: "401") as server:
        llm = make_llm("openai/fake", base_url=server.base_url)
        with pytest.raises(ModelError) as err:
            asyncio.run(llm.generate([Message(role="user", content=f"my key is {SECRET}")], GenerationParams()))
        assert SECRET not in str(err.value)
