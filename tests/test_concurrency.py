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
from reinagent.runner import build_models, load_run
from reinagent.store import RunStore, read_records
from tests.conftest import ROOT


class InFlight:
    """A server reply that holds each request for `hold_s` and tracks how many overlap, per kind
    (actor or reflection), so tests see concurrency as the server sees it."""

    def __init__(self, hold_s: float = 0.1, slow_when: str | None = None, slow_s: float = 0.0):
        self.hold_s, self.slow_when, self.slow_s = hold_s, slow_when, slow_s
        self.lock = threading.Lock()
        self.now = {"actor": 0, "reflect": 0, "all": 0}
        self.peak = dict(self.now)

    def __call__(self, messages):
        kind = "reflect" if "failed attempt" in messages[-1]["content"].lower() else "actor"
        with self.lock:
            for k in (kind, "all"):
                self.now[k] += 1
                self.peak[k] = max(self.peak[k], self.now[k])
        slow = self.slow_when is not None and self.slow_when in messages[-1]["content"]
        time.sleep(self.slow_s if slow else self.hold_s)
        with self.lock:
            for k in (kind, "all"):
                self.now[k] -= 1
        return default_reply(messages)


def _run(server, tmp_path, name="r", **kw):
    settings = dict(benchmark="hotpotqa", agent="cot-context", strategy="reflexion", num_trials=2, num_envs=8,
                    model="openai/fake", base_url=server.base_url, run_dir=str(tmp_path / name),
                    max_concurrency=8, cache=False, progress=False)
    return run(**{**settings, **kw})


def test_per_model_limit_caps_requests_at_the_server(tmp_path):
    reply = InFlight()
    with FakeOpenAIServer(reply=reply) as server:
        _run(server, tmp_path, max_model_concurrency=3)
        assert server.count == 8 * 3  # nothing lost to the limit
    assert 2 <= reply.peak["all"] <= 3


def test_without_a_model_limit_episodes_and_reflections_overlap(tmp_path):
    reply = InFlight()
    with FakeOpenAIServer(reply=reply) as server:
        _run(server, tmp_path)
    assert reply.peak["all"] > 3
    assert reply.peak["reflect"] > 1  # reflections of one trial run concurrently too


def test_actor_and_reflector_on_one_model_share_one_limit(tmp_path):
    config = RunConfig(model="openai/fake", base_url="http://127.0.0.1:9/v1", max_model_concurrency=4,
                       cache=True, cache_dir=str(tmp_path))
    actor, reflector, llms = build_models(config)
    assert actor is reflector and len(llms) == 1
    assert isinstance(actor, CachedLLM) and isinstance(actor.inner, LimitedLLM) and actor.inner.limit == 4
    assert actor.default_concurrency == 4  # episodes default to what the model accepts
    asyncio.run(actor.aclose())


def test_a_slow_task_does_not_hold_back_the_others(tmp_path):
    slow_question = "VIVA Media AG"  # the first task of hard100
    reply = InFlight(hold_s=0.01, slow_when=slow_question, slow_s=1.5)
    with FakeOpenAIServer(reply=reply) as server:
        run_dir = _run(server, tmp_path, num_trials=1, num_envs=6, max_concurrency=2)
    _spec, records = load_run(run_dir)
    slow = [r for r in records if slow_question in r.trajectory.messages[1].content]  # the user prompt
    assert len(slow) == 1
    others = [r for r in records if r is not slow[0]]
    # With two slots, the five quick tasks all pass through the other slot while the slow one runs.
    assert len(others) == 5 and all(r.finished_at < slow[0].finished_at for r in others)


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
