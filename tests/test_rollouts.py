"""The Rollout interface, its registry, settings and budgets, and rollouts inside real runs."""

from __future__ import annotations

import asyncio

import pytest

from reinagent import run
from reinagent.agents.base import Actor, Budget, BudgetExhausted, Request
from reinagent.config import RunConfig, build_config
from reinagent.errors import ConfigError
from reinagent.llm.base import GenerationParams
from reinagent.llm.scripted import ScriptedLLM
from reinagent.memory import MemoryView
from reinagent.records import Message, Trajectory
from reinagent.rollouts import ROLLOUTS, make_rollout
from reinagent.rollouts.base import _REGISTRY
from reinagent.plan import resolve
from reinagent.runner import load_run
from reinagent.strategy import ReflexionStrategy
from tests.conftest import one_line_error, run_cli

GOLD = "Gesellschaft mit beschränkter Haftung"  # hotpotqa hard100, the first task
LESSON = "LESSON: give the legal form in full"


def test_registry_names_every_rollout_and_imports_lazily():
    assert set(_REGISTRY) == set(ROLLOUTS)
    from reinagent.plan import picked
    from reinagent.settings import RolloutSettings

    settings = picked(RolloutSettings, RunConfig())
    for name in ("react", "tot", "mcts"):
        assert make_rollout(name, settings).name == name
    with pytest.raises(ConfigError, match="unknown rollout 'bfs'; valid: react, tot, mcts or multi-turn"):
        make_rollout("bfs", settings)


@pytest.mark.parametrize("flags, needles", [
    (["--rollout", "bfs"], ["--rollout", "unknown rollout 'bfs'", "react, tot, mcts or multi-turn"]),
    (["--tot-breadth", "0"], ["--tot-breadth must be a positive whole number, got 0"]),
    (["--max-calls-per-episode", "0"], ["--max-calls-per-episode must be a positive"]),
    (["--max-tokens-per-episode", "-3"], ["--max-tokens-per-episode must be a positive"]),
    (["--mcts-children", "0"], ["--mcts-children must be a positive"]),
    (["--search-reflections", "-1"], ["--search-reflections must be zero or a positive whole number, got -1"]),
])
def test_bad_settings_are_one_line_errors(tmp_path, script, flags, needles):
    proc = run_cli("run", "--benchmark", "hotpotqa", "--model", script([]), "--run-dir", str(tmp_path / "r"), *flags)
    one_line_error(proc, *needles)
    assert not (tmp_path / "r").exists()


def test_yaml_settings_and_spec(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("rollout: tot\ntot_breadth: 3\nmax_calls_per_episode: 9\n")
    cfg = build_config(path)
    assert (cfg.rollout, cfg.tot_breadth, cfg.max_calls_per_episode) == ("tot", 3, 9)
    path.write_text("rollout: beam\n")
    with pytest.raises(ConfigError, match=r"rollout \(in .*c.yaml\): unknown rollout 'beam'"):
        build_config(path)


def test_react_rollout_records_what_the_agent_alone_records(tmp_path, script):
    """`react` is the behaviour from before rollouts existed: the same trajectory, call for call."""
    rules = [{"when": "Your failed attempt", "reply": "I should search first."}]
    model = script(rules, default="Thought: I search.\nAction: Search[VIVA Media]")
    run_dir = run(benchmark="hotpotqa", agent="react", strategy="reflexion", num_trials=1, num_envs=1, model=model,
                  run_dir=str(tmp_path / "r"), cache=False, progress=False)
    _spec, (record,) = load_run(run_dir)

    plan = resolve(build_config(benchmark="hotpotqa", agent="react", model=model, cache=False))
    bench, task = plan.benchmark, plan.tasks[0]
    actor = Actor(ScriptedLLM(model.removeprefix("scripted:")), Trajectory(), f"{task.task_id}/trial1")
    direct = asyncio.run(bench.make_agent("react", plan.agent_settings).run(task, bench.make_env(task, plan.task_settings), MemoryView(
        1, ReflexionStrategy.REFLEXION), actor))
    strip = {"calls": {"__all__": {"latency_s"}}}
    assert record.trajectory.model_dump(exclude=strip) == direct.model_dump(exclude=strip)
    assert record.trajectory.rollout == "react" and record.trajectory.tree == []


def test_react_rollout_ends_cleanly_on_its_call_budget(tmp_path, script):
    model = script([], default="Thought: I search.\nAction: Search[VIVA Media]")
    run_dir = run(benchmark="hotpotqa", agent="react", strategy="none", num_trials=1, num_envs=2, model=model,
                  run_dir=str(tmp_path / "r"), cache=False, progress=False, max_calls_per_episode=2)
    _spec, records = load_run(run_dir)
    for rec in records:
        assert rec.error is None and not rec.success
        assert rec.trajectory.end_reason == "call_budget" and len(rec.trajectory.calls) == 2


def test_budget_admits_a_batch_in_order_and_never_overruns():
    """A batch is admitted request by request before any is made; refused ones come back None."""
    budget = Budget(max_calls=3)
    llm = ScriptedLLM.__new__(ScriptedLLM)
    llm.name, llm.latency_s, llm.rules, llm.default = "s", 0.0, [], "fine thanks"
    actor = Actor(llm, Trajectory(), "t/trial1", budget)
    reqs = [Request([Message(role="user", content="hi")], GenerationParams(), f"c{j}") for j in range(5)]
    results = asyncio.run(actor.complete_many(reqs))
    assert [r is not None for r in results] == [True, True, True, False, False]
    assert budget.exhausted == "call_budget" and len(actor.trajectory.calls) == 3
    with pytest.raises(BudgetExhausted):
        asyncio.run(actor.complete([Message(role="user", content="hi")], GenerationParams()))


def test_token_budget_cuts_max_tokens_to_what_is_left():
    budget = Budget(max_tokens=400)
    msgs = [Message(role="user", content="x" * 300)]  # no tokenizer: 300 bytes + 2 x 8 template tokens
    params, reserved = budget.reserve(msgs, GenerationParams(max_tokens=256))
    assert params.max_tokens == 400 - 316 and reserved == 400
    with pytest.raises(BudgetExhausted, match="token_budget"):
        budget.reserve(msgs, GenerationParams())


def test_cli_mcts_with_reflexion_end_to_end(tmp_path, script):
    """`--rollout mcts --strategy reflexion`: trial 1's search fails and reflects on its failed
    branches; the trial's reflection reaches trial 2, whose first expansion then solves it."""
    model = script([
        {"when": "Your failed attempt", "reply": f"I guessed. {LESSON}."},
        {"when": "The attempt:", "reply": "Score: 4"},
        {"when": LESSON, "reply": f"Thought: the lesson says so.\nAction: Finish[{GOLD}]"},
    ], default="Thought: guess.\nAction: Finish[wrong]")
    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "hotpotqa", "--agent", "react", "--rollout", "mcts", "--strategy",
                   "reflexion", "--model", model, "--num-envs", "1", "--num-trials", "2", "--mcts-iterations", "1",
                   "--mcts-children", "2", "--max-calls-per-episode", "20", "--no-cache", "--quiet",
                   "--run-dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    spec, records = load_run(run_dir)
    assert spec.config["rollout"] == "mcts" and spec.config["max_calls_per_episode"] == 20
    first, second = sorted(records, key=lambda r: r.trial)
    assert not first.success and first.reflection and LESSON in first.reflection
    tree = first.trajectory.tree
    assert first.trajectory.rollout == "mcts" and [n.id for n in tree] == [0, 1]  # its 2 samples: 1 child (identical)
    assert first.trajectory.extra["search"]["duplicates"] == 1
    assert all(n.terminal and n.success is False and LESSON in n.reflection for n in tree[1:])
    assert second.success and second.memory == [first.reflection]
    assert second.trajectory.answer == GOLD and second.trajectory.tree[0].visits >= 1
    for rec in records:
        assert len(rec.trajectory.calls) <= 20
    report = run_cli("report", str(run_dir), "--format", "json")
    assert report.returncode == 0, report.stderr


def test_a_rerun_replays_the_same_search_from_the_shared_cache(tmp_path):
    """A sampled model over HTTP that answers at random: the second run of the same MCTS settings
    (cache scope shared, as a resume is within one run) reaches no server and grows the same tree."""
    import random

    from reinagent.llm.fake_server import FakeOpenAIServer

    def reply(messages):
        text = "\n".join(str(m.get("content")) for m in messages)
        if "The attempt:" in text:
            return f"Score: {random.randint(1, 10)}"
        if "Your failed attempt" in text:
            return f"Lesson {random.randint(0, 999)}."
        return random.choice(["Action: Search[VIVA Media]", "Action: Lookup[2004]", "Action: Finish[GmbH]"])

    trees = []
    with FakeOpenAIServer(reply=reply) as server:
        for attempt in range(2):
            before = server.count
            run_dir = run(benchmark="hotpotqa", agent="react", rollout="mcts", strategy="reflexion", num_trials=1,
                          num_envs=1, model="openai/fake", base_url=server.base_url, cache_dir=str(tmp_path / "cache"),
                          cache_scope="shared", mcts_iterations=3, mcts_children=3, value_samples=2,
                          run_dir=str(tmp_path / f"r{attempt}"), progress=False)
            _spec, (record,) = load_run(run_dir)
            assert record.error is None
            trees.append([n.model_dump() for n in record.trajectory.tree])
        assert server.count == before  # the second run was answered by the cache alone
    assert trees[0] == trees[1] and len(trees[0]) > 3


def test_the_progress_bar_counts_calls_and_nodes_of_episodes_in_flight(tmp_path, script, monkeypatch):
    """A ToT episode can run minutes before it finishes: the bar's note counts the model calls and
    tree nodes of the episodes so far (the Actor and the search add to the run's Activity)."""
    from reinagent import run
    from reinagent import schedule

    notes = []

    class Bar:
        total = 0

        def __init__(self, *args, **kwargs):
            pass

        def set_postfix_str(self, text, refresh=True):
            notes.append(text)

        def update(self, n=1):
            pass

        def write(self, line, file=None):
            pass

        def refresh(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(schedule, "_bar", lambda progress, total, desc: Bar() if progress and total else None)
    monkeypatch.setattr(schedule, "TICK_S", 3600.0)  # only the notes at finished episodes: no timing in the test
    model = script([], default="Thought: x\nAction: Finish[wrong]")
    from reinagent.runner import load_run

    run(benchmark="hotpotqa", agent="cot-context", num_envs=2, num_trials=1, model=model, rollout="tot",
        tot_breadth=2, tot_keep=1, value_samples=1, run_dir=str(tmp_path / "r"), cache=False, progress=True)
    assert len(notes) == 2  # one note per finished episode (and one every TICK_S while episodes run)
    calls = [int(n.split()[0]) for n in notes]
    records = load_run(tmp_path / "r")[1]
    # at the first finished episode: at least its own calls (the other one may be under way)
    assert min(len(r.trajectory.calls) for r in records) <= calls[0] <= calls[1]
    assert calls[1] == sum(len(r.trajectory.calls) for r in records)  # every actor and value call, no more
    assert all("nodes expanded" in n for n in notes)
    nodes = int(notes[1].split(", ")[1].split()[0])
    assert nodes == sum(len(r.trajectory.tree) - 1 for r in records)  # expanded: every node but the roots
