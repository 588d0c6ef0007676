"""Concurrency: per-model limits seen at the server, reflections in parallel, no head-of-line
blocking within a trial, group-committed records, and a CLI that starts without heavy imports."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import pytest

from reinagent import run
from reinagent.config import RunConfig
from reinagent.llm.cache import CachedLLM
from reinagent.llm.fake_server import FakeOpenAIServer, default_reply
from reinagent.llm.limit import LimitedLLM
from reinagent.records import TrialRecord
from reinagent.plan import build_models
from reinagent.plan import resolve
from reinagent.runner import load_run
from reinagent.store import RunStore, read_records
from tests.conftest import ROOT


DEADLINE_S = 120.0  # how long a held request waits for the others before the test gives up


class InFlight:
    """A server reply that tracks how many requests overlap, per kind (actor or reflection), and
    can hold the first requests of a kind until `gather[kind]` of them are in flight at once.

    Holding makes overlap a guarantee rather than a likelihood: if the client can have that many
    requests in flight, the gathering completes whatever the machine's speed; if it cannot (a
    limit too tight, episodes run one by one), it never does, and the deadline records a miss.
    """

    def __init__(self, gather: dict[str, int] | None = None):
        self.gather = dict(gather or {})
        self.cond = threading.Condition()
        self.now = {"actor": 0, "reflect": 0, "all": 0}
        self.peak = dict(self.now)
        self.gathered: dict[str, bool] = {}  # kind -> the gathering completed (False: deadline)

    def __call__(self, messages):
        kind = "reflect" if "failed attempt" in messages[-1]["content"].lower() else "actor"
        with self.cond:
            for k in (kind, "all"):
                self.now[k] += 1
                self.peak[k] = max(self.peak[k], self.now[k])
            self.cond.notify_all()
            for k in (kind, "all"):
                if k in self.gather and k not in self.gathered:
                    reached = self.cond.wait_for(lambda k=k: self.now[k] >= self.gather[k] or k in self.gathered, DEADLINE_S)
                    self.gathered.setdefault(k, reached)
                    self.cond.notify_all()
            for k in (kind, "all"):
                self.now[k] -= 1
        return default_reply(messages)


def _run(server, tmp_path, name="r", **kw):
    settings = dict(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=2, num_envs=8,
                    model="openai/fake", base_url=server.base_url, run_dir=str(tmp_path / name),
                    max_concurrency=8, cache=False, progress=False)
    return run(**{**settings, **kw})


def test_per_model_limit_caps_requests_at_the_server(tmp_path):
    # The first requests are held until 3 are in flight: the limit lets exactly 3 through.
    reply = InFlight(gather={"all": 3})
    with FakeOpenAIServer(reply=reply) as server:
        _run(server, tmp_path, max_model_concurrency=3)
        assert server.count == 8 * 3  # nothing lost to the limit
    assert reply.gathered == {"all": True} and reply.peak["all"] == 3


def test_without_a_model_limit_episodes_and_reflections_overlap(tmp_path):
    # Every episode of a trial is in flight at once, and so is every reflection: the first of
    # each are held until all eight have arrived.
    reply = InFlight(gather={"actor": 8, "reflect": 8})
    with FakeOpenAIServer(reply=reply) as server:
        _run(server, tmp_path)
    assert reply.gathered == {"actor": True, "reflect": True}
    assert reply.peak["actor"] == reply.peak["reflect"] == 8


def test_actor_and_reflector_on_one_model_share_one_limit(tmp_path):
    config = RunConfig(model="openai/fake", base_url="http://127.0.0.1:9/v1", max_model_concurrency=4,
                       cache=True, cache_dir=str(tmp_path))
    actor, reflector, llms = build_models(resolve(config, task_ids=(), check_models=False))
    assert actor is reflector and len(llms) == 1
    assert isinstance(actor, CachedLLM) and isinstance(actor.inner, LimitedLLM) and actor.inner.limit == 4
    assert actor.default_concurrency == 4  # episodes default to what the model accepts
    asyncio.run(actor.aclose())


def test_a_slow_task_does_not_hold_back_the_others(tmp_path):
    # The slow task's request is answered only once the five others are recorded: with two
    # slots that happens only if they all pass through the other slot while it is in flight
    # (head-of-line blocking would leave them waiting behind it until the deadline).
    slow_question = "VIVA Media AG"  # the first task of hard100
    records = tmp_path / "r" / "records.jsonl"
    waited: list[bool] = []

    def reply(messages):
        if slow_question in messages[-1]["content"]:
            deadline = time.monotonic() + DEADLINE_S
            while not (records.is_file() and records.read_text().count("\n") >= 5):
                if time.monotonic() > deadline:
                    waited.append(False)
                    break
                time.sleep(0.02)
            else:
                waited.append(True)
        return default_reply(messages)

    with FakeOpenAIServer(reply=reply) as server:
        run_dir = _run(server, tmp_path, num_trials=1, num_envs=6, max_concurrency=2)
    assert waited == [True]
    _spec, done = load_run(run_dir)
    slow = [r for r in done if slow_question in r.trajectory.messages[1].content]  # the user prompt
    assert len(slow) == 1 and len(done) == 6 and all(r.error is None for r in done)


def test_records_finishing_together_are_all_durable(tmp_path):
    store = RunStore(tmp_path)

    async def go():
        await asyncio.gather(*(store.append_async(TrialRecord(task_id=f"t{i}", trial=1)) for i in range(50)))

    asyncio.run(go())
    records = read_records(tmp_path)
    assert sorted(r.task_id for r in records) == sorted(f"t{i}" for i in range(50))


DRIVER = """
import json, sys
sys.argv = ["reinagent", *sys.argv[1:]]
from reinagent.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in ("torch", "transformers", "litellm") if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("verb", [["--help"], ["list"], ["report"]])
def test_cli_starts_without_heavy_libraries(tmp_path, script, verb):
    if verb == ["report"]:
        model = script([], default="Thought: x\nAction: Finish[wrong]")
        run_dir = run(benchmark="hotpotqa", num_trials=1, num_envs=2, model=model, run_dir=str(tmp_path / "r"),
                      cache=False, progress=False)
        verb = ["report", str(run_dir)]
    proc = subprocess.run([sys.executable, "-c", DRIVER, *verb], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("episodes, env, batch", [(None, None, 8), (4, None, 8), (32, None, 32), (500, None, 64),
                                                  (32, "4", 4), (None, "16", 16)])
def test_a_local_engine_runs_as_many_requests_at_once_as_the_run_puts_in_flight(monkeypatch, episodes, env, batch):
    from reinagent.llm import local_batch

    if env is None:
        monkeypatch.delenv("REINAGENT_LOCAL_BATCH", raising=False)
    else:
        monkeypatch.setenv("REINAGENT_LOCAL_BATCH", env)
    assert local_batch(episodes) == batch


@pytest.mark.parametrize("engine, size", [("openvino", "max_batch"), ("llamacpp", "parallel")])
def test_max_concurrency_reaches_the_local_engine_of_actor_and_reflector(tmp_path, monkeypatch, engine, size):
    # 32 episodes in flight on a local model: the engine is built for 32 (nothing is loaded here)
    import importlib.util

    if engine == "openvino" and importlib.util.find_spec("openvino_genai") is None:
        pytest.skip("openvino_genai is not installed")
    monkeypatch.delenv("REINAGENT_LOCAL_BATCH", raising=False)
    from reinagent.errors import ConfigError

    config = RunConfig(model="local", max_concurrency=32, local_engine=engine, cache=False)
    try:
        actor, reflector, llms = build_models(resolve(config, task_ids=(), check_models=False))
    except ConfigError as err:  # the embedded model's wheel is not installed
        pytest.skip(str(err))
    backends = []
    for llm in (actor, reflector):
        while getattr(llm, "inner", None) is not None:
            llm = llm.inner
        backends.append(llm)
    assert [getattr(b, size) for b in backends] == [32, 32]
    assert actor.default_concurrency == 32
    for llm in llms:
        asyncio.run(llm.aclose())
