"""Sampling that is faithful to its name (issue 26 §1, §4): every sampled call gets its own seed,
derived from the run's seed and the call's place, on every backend that takes one; greedy calls
get none; the seed is recorded with the call; and the episode token budget is counted with the
model's tokenizer where there is one, conservatively otherwise, and never passed."""

from __future__ import annotations

import asyncio
import importlib.util
from collections import Counter

import pytest

from reinagent import run
from reinagent.agents.base import Actor, Budget, estimate_prompt_tokens
from reinagent.llm.base import LLM, Completion, GenerationParams, call_seed, sampling_seed
from reinagent.llm.fake_server import FakeOpenAIServer
from reinagent.records import Message, Trajectory
from reinagent.runner import load_run


def _by_seed(messages, seed: int) -> str:
    return f"Thought: drawn.\nAction: Finish[answer {seed}]"


def _run(tmp_path, name, server, temperature, **kw):
    return run(benchmark="hotpotqa", agent="cot-context", strategy="none", num_trials=3, num_envs=5,
               run_dir=str(tmp_path / name), cache=False, progress=False, model="openai/fake",
               base_url=server.base_url, temperature=temperature, **kw)


def test_none_at_a_temperature_draws_a_fresh_seed_per_trial_and_a_rerun_the_same(tmp_path):
    """The bias this fixes: every trial sent seed 0, so against a seed-honouring server (vLLM)
    trials 2..N copied trial 1 and NONE could never improve."""
    with FakeOpenAIServer(honour_seed=_by_seed) as server:
        first = load_run(_run(tmp_path, "a", server, 0.8))[1]
        seeds_a = [body["seed"] for body in server.requests]
        rerun = load_run(_run(tmp_path, "b", server, 0.8))[1]
        seeds_b = [body["seed"] for body in server.requests[len(seeds_a):]]
    assert len(first) == 15 and len(seeds_a) == 15
    assert len(set(seeds_a)) == 15  # one seed per (task, trial)
    assert Counter(seeds_a) == Counter(seeds_b)  # a rerun sends the same seeds (in whatever order)
    calls = [c for rec in first for c in rec.trajectory.calls]
    assert sorted(c.seed for c in calls) == sorted(seeds_a)  # each call records what it was sent
    for rec in first:
        (call,) = rec.trajectory.calls
        assert call.rollout_id.startswith(f"{rec.task_id}/trial{rec.trial}/")
        assert call.seed == call_seed(0, call.rollout_id)
    by_task: dict[str, set] = {}
    for rec in first:
        by_task.setdefault(rec.task_id, set()).add(rec.answer)
    assert all(len(answers) == 3 for answers in by_task.values())  # trials really differ
    assert {(r.task_id, r.trial, r.answer) for r in first} == {(r.task_id, r.trial, r.answer) for r in rerun}


def test_greedy_calls_send_and_record_no_seed(tmp_path):
    with FakeOpenAIServer(honour_seed=_by_seed) as server:
        records = load_run(_run(tmp_path, "g", server, 0.0))[1]
        bodies = list(server.requests)
    assert bodies and all("seed" not in body for body in bodies)
    assert all(c.seed is None and c.rollout_id for rec in records for c in rec.trajectory.calls)


def test_the_run_seed_moves_every_call_seed():
    place = "HotpotQA/1/trial2/tot/d0/n0/c3"
    assert call_seed(0, place) != call_seed(1, place)
    assert call_seed(0, place) != call_seed(0, place.replace("trial2", "trial3"))
    assert sampling_seed(GenerationParams(temperature=0.0, seed=5), place) is None


def test_litellm_sends_the_call_seed(tmp_path):
    if importlib.util.find_spec("litellm") is None:
        pytest.skip("litellm is not installed")
    from reinagent.llm.litellm_backend import LiteLLM

    async def go(server):
        llm = LiteLLM("hosted_vllm/fake", api_base=server.base_url)
        params = GenerationParams(max_tokens=20, temperature=0.7, seed=3)
        await llm.generate([Message(role="user", content="hi")], params, rollout_id="t/trial1/1")
        await llm.generate([Message(role="user", content="hi")], params, rollout_id="t/trial2/1")
        await llm.generate([Message(role="user", content="hi")], GenerationParams(max_tokens=20), rollout_id="t/trial3/1")

    with FakeOpenAIServer(honour_seed=_by_seed) as server:
        asyncio.run(go(server))
        seeds = [body.get("seed") for body in server.requests]
    assert seeds == [call_seed(3, "t/trial1/1"), call_seed(3, "t/trial2/1"), None]


# --- the token budget ---------------------------------------------------------------------------------

class CharModel(LLM):
    """One token per character: a prompt of digits costs what it looks like. `counts`: whether the
    backend can count a prompt (else the budget must reserve conservatively)."""

    name = "char-model"

    def __init__(self, counts: bool):
        self.counts = counts

    def count_prompt_tokens(self, messages):
        return sum(len(m.content) for m in messages) if self.counts else None

    async def generate(self, messages, params, *, rollout_id=None):
        prompt = sum(len(m.content) for m in messages)
        text = "Thought: 1234567890 1234567890\nAction: Search[VIVA Media 2004 2005 2006]"[: params.max_tokens]
        return Completion(text=text, prompt_tokens=prompt, completion_tokens=len(text), model=self.name)


@pytest.mark.parametrize("counts", [True, False])
@pytest.mark.parametrize("rollout", ["react", "tot", "mcts"])
def test_a_token_budget_is_never_passed_with_a_one_token_per_character_model(rollout, counts):
    from tests.test_search import episode
    from reinagent.rollouts import make_rollout

    llm = CharModel(counts)
    ep, cfg = episode(llm, rollout, agent="react", max_steps=12, max_tokens_per_episode=20000)
    traj, _ = asyncio.run(make_rollout(cfg.rollout, cfg).run(ep))
    used = sum(c.prompt_tokens + c.completion_tokens for c in traj.calls)
    assert len(traj.calls) > 1 and used <= 20000 and traj.end_reason == "token_budget"


def test_the_conservative_estimate_is_never_below_the_bytes_of_a_prompt():
    messages = [Message(role="user", content="0123456789" * 30), Message(role="assistant", content="é" * 10)]
    assert estimate_prompt_tokens(messages) >= 300 + 20


def test_a_server_that_reports_no_usage_keeps_its_reservation():
    class Silent(LLM):
        async def generate(self, messages, params, *, rollout_id=None):
            return Completion(text="x")

    actor = Actor(Silent(), Trajectory(), "t/trial1", Budget(max_tokens=1000))
    asyncio.run(actor.complete([Message(role="user", content="hello")], GenerationParams(max_tokens=50)))
    assert actor.budget.tokens == estimate_prompt_tokens([Message(role="user", content="hello")]) + 50


def test_openai_names_are_counted_with_tiktoken_when_it_is_there():
    from reinagent.llm.tokens import openai_prompt_tokens

    messages = [Message(role="user", content="1234567890" * 20)]
    counted = openai_prompt_tokens("gpt-4o-mini", messages)
    if counted is None:
        pytest.skip("tiktoken or its encoding is not available offline")
    assert 20 < counted < estimate_prompt_tokens(messages)
    assert openai_prompt_tokens("no-such-model-xyz", messages) is None


def test_the_local_engine_counts_a_prompt_as_it_encodes_it_even_before_its_first_call():
    """Before any call (a replay answered by the cache makes none) the count is already exact, so
    the budget decides alike in a first run and in its replay."""
    from reinagent.errors import ConfigError

    if importlib.util.find_spec("openvino_genai") is None:
        pytest.skip("openvino_genai is not installed")
    from reinagent.llm.openvino import OpenVINOLLM

    try:
        llm = OpenVINOLLM()
    except ConfigError as err:
        pytest.skip(str(err))
    messages = [Message(role="system", content="Be brief."), Message(role="user", content="What is 1234 * 5678?")]

    async def go():
        counted = llm.count_prompt_tokens(messages)
        completion = await llm.generate(messages, GenerationParams(max_tokens=2))
        await llm.aclose()
        return counted, completion.prompt_tokens

    counted, used = asyncio.run(go())
    assert counted == used and counted < estimate_prompt_tokens(messages)


# --- --deterministic ------------------------------------------------------------------------------------

def test_deterministic_is_recorded_in_the_spec(tmp_path, script):
    from tests.conftest import run_cli

    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-envs", "1", "--num-trials", "1",
                   "--model", script([]), "--deterministic", "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    spec = load_run(run_dir)[0]
    assert spec.settings["deterministic"] is True and spec.config["deterministic"] is True
    assert spec.settings["sampling_seeds"] == "per-call"


def test_the_deterministic_local_engine_runs_one_sequence_at_a_time_without_a_prefix_cache():
    if importlib.util.find_spec("openvino_genai") is None:
        pytest.skip("openvino_genai is not installed")
    from reinagent.errors import ConfigError
    from reinagent.llm.openvino import OpenVINOLLM

    try:
        llm = OpenVINOLLM(deterministic=True)
    except ConfigError as err:  # the embedded model's wheel is not installed
        pytest.skip(str(err))
    assert llm.max_batch == 1 and llm.default_concurrency == 1
    assert OpenVINOLLM().max_batch > 1
