"""Hosted-model backends against a real loopback server; keys never reach records or errors."""

from __future__ import annotations

import asyncio

import pytest

from reinagent import resume, run
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
    monkeypatch.setenv("REINAGENT_SERVER_API_KEY", SECRET)

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
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with FakeOpenAIServer(fault_when=lambda body: "401") as server:
        llm = make_llm("openai/fake", base_url=server.base_url, api_key_env="OPENAI_API_KEY")
        with pytest.raises(ModelError) as err:
            asyncio.run(llm.generate([Message(role="user", content=f"my key is {SECRET}")], GenerationParams()))
        assert SECRET not in str(err.value)


# --- API keys go only where they belong ---------------------------------------------------------

HOSTED = "sk-hosted-PROVIDER-KEY-must-stay-home-0987654321"
SERVER_KEY = "server-key-for-the-loopback-server"


def _authorizations(server) -> set[str | None]:
    return {h.get("Authorization") for h in server.headers_seen}


@pytest.mark.parametrize("model", ["openai/served", "anthropic/claude-x"])  # openai-compatible, litellm
def test_hosted_keys_never_go_to_a_base_url_server(model, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, HOSTED)
    monkeypatch.delenv("REINAGENT_SERVER_API_KEY", raising=False)
    if model.startswith("anthropic/"):
        # litellm speaks Anthropic's wire format; the server only needs to see the headers
        pytest.importorskip("litellm")
    with FakeOpenAIServer() as server:
        llm = make_llm(model, base_url=server.base_url)
        try:
            asyncio.run(llm.generate([Message(role="user", content="hi")], GenerationParams(max_tokens=8)))
        except ModelError:
            pass  # the Anthropic path cannot parse an OpenAI reply; what it sent is what matters
        assert server.count >= 1
        seen = " ".join(str(v) for h in server.headers_seen for v in h.values())
        assert HOSTED not in seen


def test_base_url_server_gets_the_server_key_or_the_named_variable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", HOSTED)
    monkeypatch.setenv("REINAGENT_SERVER_API_KEY", SERVER_KEY)
    monkeypatch.setenv("MY_VLLM_KEY", "named-variable-key")
    messages, params = [Message(role="user", content="hi")], GenerationParams(max_tokens=8)
    with FakeOpenAIServer() as server:
        asyncio.run(make_llm("openai/m", base_url=server.base_url).generate(messages, params))
        asyncio.run(make_llm("openai/m", base_url=server.base_url, api_key_env="MY_VLLM_KEY").generate(messages, params))
        assert [h.get("Authorization") for h in server.headers_seen] == [
            f"Bearer {SERVER_KEY}", "Bearer named-variable-key"]
    monkeypatch.delenv("REINAGENT_SERVER_API_KEY")
    with FakeOpenAIServer() as server:  # no server key at all: no Authorization header
        asyncio.run(make_llm("openai/m", base_url=server.base_url).generate(messages, params))
        assert _authorizations(server) == {None}


def test_openai_key_goes_only_to_openais_endpoint(monkeypatch):
    from reinagent.llm.wire import endpoint_key

    monkeypatch.setenv("OPENAI_API_KEY", HOSTED)
    monkeypatch.delenv("REINAGENT_SERVER_API_KEY", raising=False)
    assert endpoint_key("https://api.openai.com/v1") == HOSTED
    assert endpoint_key("http://127.0.0.1:8000/v1") is None
    assert endpoint_key("https://api.openai.com.evil.example/v1") is None


def test_api_key_env_flag_records_only_the_name(tmp_path, monkeypatch):
    from tests.conftest import run_cli

    monkeypatch.setenv("OPENAI_API_KEY", HOSTED)
    with FakeOpenAIServer() as server:
        result = run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-trials", "1",
                         "--num-envs", "1", "--model", "openai/fake", "--base-url", server.base_url,
                         "--api-key-env", "MY_SERVER_KEY", "--run-dir", str(tmp_path / "r"), "--no-cache", "--quiet",
                         env={"MY_SERVER_KEY": SERVER_KEY})
        assert result.returncode == 0, result.stderr
        assert _authorizations(server) == {f"Bearer {SERVER_KEY}"}
    spec = (tmp_path / "r" / "spec.json").read_text()
    assert '"api_key_env": "MY_SERVER_KEY"' in spec and SERVER_KEY not in spec and HOSTED not in spec
    # a variable that is not set, or a key pasted where the name belongs: one line, no secret echoed
    unset = run_cli("run", "--model", "openai/fake", "--base-url", "http://127.0.0.1:9/v1",
                    "--api-key-env", "NOT_SET_ANYWHERE", "--run-dir", str(tmp_path / "u"), "--quiet")
    assert unset.returncode == 2 and "NOT_SET_ANYWHERE" in unset.stderr and "Traceback" not in unset.stderr
    pasted = run_cli("run", "--model", "openai/fake", "--base-url", "http://127.0.0.1:9/v1",
                     "--api-key-env", "sk-abc-123", "--run-dir", str(tmp_path / "p"), "--quiet")
    assert pasted.returncode == 2 and "sk-abc-123" not in pasted.stderr and "environment variable" in pasted.stderr


# --- broken replies are infrastructure errors, never failed attempts -------------------------------


def test_cut_bodies_are_retried():
    with FakeOpenAIServer(faults={1: "cut", 2: "cut_eof"}) as server:
        llm = make_llm("openai/m", base_url=server.base_url)
        completion = asyncio.run(llm.generate([Message(role="user", content="hi")], GenerationParams(max_tokens=8)))
        assert completion.text.startswith("Thought:") and server.count == 3
        assert completion.extra["attempts"] == 3


@pytest.mark.parametrize("fault", ["html", "badjson", "null_message", "no_choices"])
def test_broken_reply_is_a_model_error(fault):
    from reinagent.errors import MalformedResponseError

    with FakeOpenAIServer(faults={1: fault}) as server:
        llm = make_llm("openai/m", base_url=server.base_url)
        with pytest.raises(MalformedResponseError):
            asyncio.run(llm.generate([Message(role="user", content="hi")], GenerationParams(max_tokens=8)))
        assert server.count == 1  # not transient: no retry storm against a misconfigured endpoint


@pytest.mark.parametrize("fault", ["null_message", "html", "no_choices"])
def test_broken_reply_is_recorded_as_the_trials_error_and_redone(tmp_path, fault):
    """The first task's trial-1 actor call gets a broken 200: that (task, trial) is an error (no
    verdict, no reflection, nothing in memory), the run goes on, and --retry-errors redoes it."""
    from reinagent.runner import load_run

    broken = {"on": True}
    bad_question = "VIVA Media AG"  # first task of hard100

    def fault_when(body):
        last = body["messages"][-1]["content"]
        return fault if broken["on"] and bad_question in last and "failed attempt" not in last.lower() else None

    with FakeOpenAIServer(fault_when=fault_when) as server:
        run_dir = run(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=2, num_envs=2,
                      model="openai/fake", base_url=server.base_url, run_dir=str(tmp_path / "r"), cache=False,
                      progress=False)
        _spec, records = load_run(run_dir)
        by_key = {(r.task_id, r.trial): r for r in records}
        bad = [r for r in records if r.error]
        assert len(bad) == 2 and all("model error" in r.error for r in bad)  # both trials of that task
        for r in bad:
            assert not r.success and r.reflection is None and not r.reflection_calls and r.memory == []
        good = [r for r in records if not r.error]
        assert len(good) == 2 and good[0].reflection  # the other task failed for real and reflected
        # what the reflector was asked: never about the broken task
        reflect_prompts = [b["messages"][-1]["content"] for b in server.requests
                           if "failed attempt" in b["messages"][-1]["content"].lower()]
        assert reflect_prompts and not any(bad_question in p for p in reflect_prompts)
        broken["on"] = False
        resume(run_dir, retry_errors=True, progress=False)
    _spec, records = load_run(run_dir)
    assert len(records) == 4 and all(r.error is None for r in records)
    assert {(r.task_id, r.trial) for r in records} == set(by_key)


def test_sandbox_that_cannot_start_is_an_error_not_a_failed_attempt(tmp_path, monkeypatch, script):
    """A sandbox launch that fails (here: the temporary directory it needs is gone) judged
    nothing; the coder's (task, trial) records an error instead of a failing verdict."""
    import tempfile

    from reinagent.runner import load_run
    from reinagent.sandbox import Sandbox

    Sandbox()  # probe the sandbox mode while it still works (the probe is cached per process)
    code = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
    model = script([], default=code)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-tmp"))
    run_dir = run(benchmark="humaneval", num_trials=2, num_envs=1, model=model, run_dir=str(tmp_path / "r"),
                  cache=False, progress=False)
    _spec, records = load_run(run_dir)
    assert records  # (a trial in which every episode errored ends the run: nothing was judged)
    for r in records:
        assert r.error and "sandbox" in r.error.lower()
        assert not r.success and r.reflection is None and not r.reflection_calls
        assert "could not run" in r.error or "cannot start" in r.error


def test_a_base_url_server_does_not_need_the_providers_key(monkeypatch):
    from reinagent.llm import check_credentials

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    check_credentials("anthropic/claude-x", "http://127.0.0.1:9/v1")  # the key would not be sent there
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        check_credentials("anthropic/claude-x")
    with pytest.raises(ConfigError, match="NOT_SET_HERE"):
        check_credentials("openai/m", "http://127.0.0.1:9/v1", "NOT_SET_HERE")


def test_an_empty_key_counts_as_missing_and_the_environment_is_left_alone(monkeypatch):
    import os

    from reinagent.llm import check_credentials

    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    monkeypatch.setenv("SOME_OTHER_TOKEN", "")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        check_credentials("anthropic/claude-x")
    # The check hides empty variables from litellm only while it asks; the user's stay as they were.
    assert os.environ["ANTHROPIC_API_KEY"] == "" and os.environ["SOME_OTHER_TOKEN"] == ""
