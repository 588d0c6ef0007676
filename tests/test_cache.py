"""The response cache: keys, hits counted as zero usage, replay without model calls, secrets."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from reinagent import run
from reinagent.errors import ModelError
from reinagent.llm.base import LLM, Completion, GenerationParams
from reinagent.llm.cache import (
    DB_NAME, CachedLLM, ResponseStore, canonical_request, endpoint_of, model_identity, request_key,
)
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.records import Message, Usage
from reinagent.report.summary import summarize
from reinagent.runner import load_run
from tests.conftest import ROOT, run_cli

SECRET = "sk-cache-THIS-MUST-NEVER-BE-STORED-0987654321"
MSGS = [Message(role="system", content="You answer."), Message(role="user", content="Question: who?")]
GREEDY = GenerationParams(max_tokens=64, stop=("\nObservation",), seed=0)
SAMPLED = GenerationParams(max_tokens=64, temperature=0.7, stop=("\nObservation",), seed=0)
FAKE = model_identity("openai/fake", "http://127.0.0.1:8000/v1")


def key(identity=FAKE, messages=MSGS, params=GREEDY, rollout=None) -> str:
    return request_key(identity, messages, params, rollout)


# --- keys --------------------------------------------------------------------------------------

def test_same_request_same_key_and_any_difference_changes_it():
    assert key() == key(messages=[Message(role=m.role, content=m.content) for m in MSGS])
    different = [
        key(messages=[MSGS[0], Message(role="user", content="Question: when?")]),
        key(messages=[Message(role="user", content=MSGS[0].content), MSGS[1]]),  # role matters
        key(params=GenerationParams(max_tokens=65, stop=("\nObservation",))),
        key(params=GenerationParams(max_tokens=64, stop=("\nQuestion:",))),
        key(params=SAMPLED, rollout="t/trial1/1"),
        key(identity=model_identity("openai/other", "http://127.0.0.1:8000/v1")),
        key(identity=model_identity("openai/fake", "http://127.0.0.1:8001/v1")),  # another server
    ]
    assert len({key(), *different}) == len(different) + 1


def test_rollout_id_and_seed_only_matter_when_sampling():
    assert key(rollout="t/trial1/1") == key(rollout="t/trial2/1") == key()
    assert key(params=GenerationParams(max_tokens=64, stop=("\nObservation",), seed=7)) == key()
    assert key(params=SAMPLED, rollout="t/trial1/1") != key(params=SAMPLED, rollout="t/trial2/1")
    assert key(params=SAMPLED, rollout="t/trial1/1") == key(params=SAMPLED, rollout="t/trial1/1")


def test_secrets_never_enter_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    url = f"https://alice:{SECRET}@Proxy.example.com:8443/v1/?api_key={SECRET}#x"
    assert endpoint_of(url) == "https://proxy.example.com:8443/v1"
    canonical = json.dumps(canonical_request(model_identity("openai/m", url), MSGS, GREEDY, None))
    assert SECRET not in canonical and "alice" not in canonical
    # credentials do not split the cache: the same server with another key shares entries
    assert key(model_identity("openai/m", url)) == key(model_identity("openai/m", "https://proxy.example.com:8443/v1"))


def test_local_weights_fingerprint_changes_the_key(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"v1")
    before = key(model_identity(f"local:{tmp_path}"))
    assert key(model_identity(f"local:{tmp_path}")) == before
    (tmp_path / "model.safetensors").write_bytes(b"v2 retrained")
    assert key(model_identity(f"local:{tmp_path}")) != before


# --- the wrapper -------------------------------------------------------------------------------

class CountingLLM(LLM):
    name = "openai/counting"

    def __init__(self, delay_s: float = 0.0, fail: bool = False):
        self.calls, self.delay_s, self.fail = 0, delay_s, fail

    async def generate(self, messages, params, *, rollout_id=None) -> Completion:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise ModelError("boom")
        return Completion(text=f"answer {self.calls}", prompt_tokens=10, completion_tokens=3, model=self.name)


def test_hits_are_marked_cached_and_count_zero_usage(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, ResponseStore(tmp_path), FAKE)

    async def go():
        first = await llm.generate(MSGS, GREEDY, rollout_id="a")
        second = await llm.generate(MSGS, GREEDY, rollout_id="b")
        return first, second

    first, second = asyncio.run(go())
    assert inner.calls == 1 and not first.cached and second.cached and second.text == first.text
    usage = Usage.of([first.to_call("actor"), second.to_call("actor")])
    assert (usage.calls, usage.cache_hits, usage.prompt_tokens, usage.completion_tokens) == (2, 1, 10, 3)


def test_identical_requests_in_flight_are_coalesced(tmp_path):
    inner = CountingLLM(delay_s=0.05)
    llm = CachedLLM(inner, ResponseStore(tmp_path), FAKE)

    async def go():
        return await asyncio.gather(*(llm.generate(MSGS, GREEDY) for _ in range(5)))

    results = asyncio.run(go())
    assert inner.calls == 1
    assert sum(not r.cached for r in results) == 1 and {r.text for r in results} == {"answer 1"}
    assert llm.stats.coalesced == 4


def test_failures_are_not_cached_and_reach_every_waiter(tmp_path):
    inner = CountingLLM(delay_s=0.02, fail=True)
    llm = CachedLLM(inner, ResponseStore(tmp_path), FAKE)

    async def go():
        return await asyncio.gather(*(llm.generate(MSGS, GREEDY) for _ in range(3)), return_exceptions=True)

    assert all(isinstance(r, ModelError) for r in asyncio.run(go()))
    inner.fail = False
    assert not asyncio.run(llm.generate(MSGS, GREEDY)).cached  # nothing was stored for the failure


def test_sampling_without_a_rollout_id_is_never_cached(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, ResponseStore(tmp_path), FAKE)
    asyncio.run(llm.generate(MSGS, SAMPLED))
    asyncio.run(llm.generate(MSGS, SAMPLED))
    assert inner.calls == 2 and len(llm.store) == 0


WRITER = """
import sys
from reinagent.llm.cache import ResponseStore
store = ResponseStore(sys.argv[1])
for i in range(300):
    store.put(f"key{i}", "m", {"text": sys.argv[2]})
"""


def test_several_processes_share_one_store(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name], cwd=ROOT) for name in "ab"]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    store = ResponseStore(tmp_path)
    assert len(store) == 300
    texts = {store.get(f"key{i}")["text"] for i in range(300)}
    assert texts <= {"a", "b"}  # every key holds one writer's whole entry, the first one stored


# --- whole runs against a real server ----------------------------------------------------------

def _run(server, tmp_path, name, strategy="reflexion", **kw):
    settings = dict(benchmark="hotpotqa", agent="cot-context", strategy=strategy, num_trials=2, num_envs=3,
                    model="openai/fake", base_url=server.base_url, run_dir=str(tmp_path / name),
                    cache_dir=str(tmp_path / "cache"), progress=False)
    return run(**{**settings, **kw})


def test_identical_rerun_makes_no_model_calls_and_reports_hits(tmp_path):
    with FakeOpenAIServer() as server:
        _run(server, tmp_path, "first", cache_scope="shared")
        paid = server.count
        assert paid == 3 * 2 + 3  # actor + reflection in trial 1, actor in trial 2
        second = _run(server, tmp_path, "second", cache_scope="shared")
        assert server.count == paid
    _spec, records = load_run(second)
    calls = [c for r in records for c in r.calls]
    assert len(calls) == paid and all(c.cached for c in calls)
    summary = summarize(second)
    usage = summary["usage"]
    assert usage["calls"] == paid and usage["cache_hits"] == paid
    assert usage["prompt_tokens"] == usage["completion_tokens"] == 0
    # ... and the report says what the calls cost when they were made, and warns.
    first = summarize(tmp_path / "first")
    assert usage["if_uncached"] == first["usage"]["if_uncached"]
    assert usage["if_uncached"]["prompt_tokens"] == first["usage"]["prompt_tokens"] > 0
    assert summary["cache_share"] == 1.0 and first["cache_share"] == 0.0
    from reinagent.report.markdown import report_markdown

    text = report_markdown([first, summary])
    assert "tokens if uncached" in text and "cost if uncached (USD)" in text
    warnings = [line for line in text.splitlines() if line.startswith("> **warning:**") and "response cache" in line]
    assert len(warnings) == 2 and f"{paid} of {paid} calls (100%)" in warnings[0]  # comparison + its own section


def test_runs_do_not_share_answers_by_default(tmp_path):
    """The default scope is `run`: a second run pays for its own calls (an honest cost), while a
    resume of the same run replays its own calls from the cache."""
    with FakeOpenAIServer() as server:
        first = _run(server, tmp_path, "first")
        paid = server.count
        second = _run(server, tmp_path, "second")
        assert server.count == 2 * paid
        assert not any(c.cached for r in load_run(second)[1] for c in r.calls)
        proc = run_cli("resume", str(first), "--from-trial", "1", "--quiet")  # redo it all: same run
        assert proc.returncode == 0, proc.stderr
        assert server.count == 2 * paid
    _spec, records = load_run(first)
    assert len(records) == 6 and all(c.cached for r in records for c in r.calls)


@pytest.mark.parametrize("scope, reused", [("run", False), ("shared", True)])
def test_sampled_calls_reuse_another_runs_samples_only_when_asked(tmp_path, scope, reused):
    with FakeOpenAIServer() as server:
        _run(server, tmp_path, "first", temperature=0.7, cache_scope=scope)
        paid = server.count
        second = _run(server, tmp_path, "second", temperature=0.7, cache_scope=scope)
        assert server.count == (paid if reused else 2 * paid)
    calls = [c for r in load_run(second)[1] for c in r.calls]
    assert all(c.cached is reused for c in calls)


def test_run_scope_without_a_run_key_shares_nothing():
    from reinagent.llm.cache import scoped_identity

    assert scoped_identity(FAKE, "shared", "k") == FAKE
    assert scoped_identity(FAKE, "run", "k") == {**FAKE, "run": "k"}
    assert scoped_identity(FAKE, "run", None) != scoped_identity(FAKE, "run", None)
    with pytest.raises(ValueError, match="valid: run or shared"):
        scoped_identity(FAKE, "global", "k")


def test_strategies_share_their_trial_one_calls(tmp_path):
    with FakeOpenAIServer() as server:
        _run(server, tmp_path, "reflexion", strategy="reflexion", cache_scope="shared")
        before = server.count
        later = _run(server, tmp_path, "last_attempt", strategy="last_attempt", cache_scope="shared")
        paid = server.count - before
    _spec, records = load_run(later)
    trial1 = [c for r in records if r.trial == 1 for c in r.calls]
    assert trial1 and all(c.cached for c in trial1)  # identical prompts: memory is empty in trial 1
    assert paid == sum(not c.cached for r in records for c in r.calls) == 3  # only trial 2's actor calls


def test_no_cache_flag_calls_the_model_every_time(tmp_path):
    with FakeOpenAIServer() as server:
        args = ["run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-trials", "1",
                "--num-envs", "2", "--model", "openai/fake", "--base-url", server.base_url, "--quiet"]
        env = {"REINAGENT_CACHE_DIR": str(tmp_path / "root")}
        for i, flag in enumerate(["--no-cache", "--no-cache", "--cache", "--cache"]):
            proc = run_cli(*args, flag, "--cache-scope", "shared", "--run-dir", str(tmp_path / f"r{i}"), env=env)
            assert proc.returncode == 0, proc.stderr
        assert server.count == 2 + 2 + 2 + 0
    assert (tmp_path / "root" / "responses" / DB_NAME).is_file()  # REINAGENT_CACHE_DIR moved it


def test_secrets_never_reach_the_cache_file(tmp_path, monkeypatch):
    # A --base-url server gets REINAGENT_SERVER_API_KEY (never a hosted provider's key).
    monkeypatch.setenv("REINAGENT_SERVER_API_KEY", SECRET)
    with FakeOpenAIServer() as server:
        _run(server, tmp_path, "r")
        assert server.headers_seen[0]["Authorization"] == f"Bearer {SECRET}"
    files = [p for p in (tmp_path / "cache").iterdir() if p.is_file()]
    assert any(p.name == DB_NAME for p in files)
    for path in files:  # the database and its WAL
        assert SECRET.encode() not in path.read_bytes(), path


def test_scripted_models_are_not_cached(tmp_path, script):
    model = script([], default="Thought: x\nAction: Finish[wrong]")
    run(benchmark="hotpotqa", num_trials=1, num_envs=1, model=model, run_dir=str(tmp_path / "r"),
        cache_dir=str(tmp_path / "cache"), progress=False)
    assert not (tmp_path / "cache").exists()


def test_unusable_cache_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with FakeOpenAIServer() as server, pytest.raises(Exception, match="cannot use --cache-dir"):
        _run(server, tmp_path, "r", cache_dir=str(blocker))
