"""Tree search rollouts (tot, mcts) on in-test models that answer by prompt and sample index.

Each model below decides from what it is asked: the rollout id's sample index (`.../c2` is the
third sample of a node), whether the prompt holds a lesson from a reflection, or whether it is a
value prompt. So every test names exactly which sample or which prompt content solves the task.
"""

from __future__ import annotations

import asyncio
import functools
import random
import re

import pytest

from reinagent.agents.base import Actor, Budget
from reinagent.config import build_config
from reinagent.llm.base import LLM, Completion
from reinagent.llm.cache import CachedLLM, ResponseStore
from reinagent.memory import MemoryView
from reinagent.records import Trajectory
from reinagent.rollouts import Episode, make_rollout
from reinagent.rollouts.branching import Branching
from reinagent.plan import resolve
from reinagent.strategy import ReflexionStrategy

LESSON = "LESSON: answer with the legal form"


class PromptModel(LLM):
    """Answers by prompt kind; `answer(j, text, steps)` decides an actor step from the sample
    index j (-1: not a sampled child), the prompt and the number of steps already taken."""

    name = "prompt-model"

    def __init__(self, gold: str, answer):
        self.gold, self.answer, self.prompts, self.ids = gold, answer, [], []

    async def generate(self, messages, params, *, rollout_id=None):
        text = "\n".join(m.content for m in messages)
        self.prompts.append(text)
        self.ids.append(rollout_id)
        if "Your failed attempt" in text:
            out = f"I gave a wrong name. {LESSON}."
        elif "The attempt:" in text:
            out = "Score: 10" if f"Finish[{self.gold}]" in text else "Score: 2"
        else:
            m = re.search(r"/c(\d+)$", rollout_id or "")
            steps = sum(1 for msg in messages if msg.role == "assistant")  # steps taken so far
            out = self.answer(int(m.group(1)) if m else -1, text, steps)
        return Completion(text=out, prompt_tokens=len(text.split()), completion_tokens=len(out.split()), model=self.name)


def episode(llm, rollout="mcts", agent="cot-context", strategy="reflexion", **settings):
    cfg = build_config(benchmark="hotpotqa", agent=agent, rollout=rollout, num_envs=1, cache=False,
                       model="scripted:unused", **settings)
    plan = resolve(cfg, check_models=False)
    bench, cfg, task = plan.benchmark, plan.config, plan.tasks[0]
    actor = Actor(llm, Trajectory(), f"{task.task_id}/trial1", Budget.of(plan.agent_settings))
    view = MemoryView(1, ReflexionStrategy(strategy))
    return Episode(bench, bench.make_agent(cfg.agent, plan.agent_settings), task, view, actor, plan.task_settings,
                   plan.rollout), cfg


@functools.lru_cache(maxsize=1)
def gold() -> str:
    return episode(None)[0].task.answer


def third_sample_right(j: int, _text: str, _steps: int = 0) -> str:
    """Greedy (no sample index) and every sample but the third answer wrongly."""
    return f"Thought: t\nAction: Finish[{gold() if j == 2 else f'wrong{j}'}]"


def run(ep, cfg):
    return asyncio.run(make_rollout(cfg.rollout, ep.settings).run(ep))


@pytest.mark.parametrize("rollout", ["react", "tot", "mcts"])
def test_greedy_fails_where_search_finds_the_third_sample(rollout):
    llm = PromptModel(gold(), third_sample_right)
    ep, cfg = episode(llm, rollout, max_calls_per_episode=40)
    traj, ev = run(ep, cfg)
    assert ev.success == (rollout != "react")
    assert traj.rollout == rollout
    assert len(llm.ids) <= 40
    if rollout != "react":
        chosen = traj.tree[traj.extra["search"]["chosen"][-1]]
        assert chosen.action == f"Finish[{gold()}]" and traj.answer == gold()
        assert [n.id for n in traj.tree] == list(range(len(traj.tree)))
        # the chosen path is what the Reflector and LAST_ATTEMPT see
        assert traj.steps[-1].action == chosen.action


def test_mcts_solves_in_one_trial_because_a_reflection_reaches_the_next_expansion():
    def needs_lesson(j, text, _steps):
        return f"Thought: t\nAction: Finish[{gold() if LESSON in text else f'wrong{j}'}]"

    llm = PromptModel(gold(), needs_lesson)
    ep, cfg = episode(llm, "mcts", mcts_children=2, strategy="none")  # even under NONE
    traj, ev = run(ep, cfg)
    assert ev.success
    failed = [n for n in traj.tree if n.terminal and not n.success]
    assert failed and all(n.reflection and LESSON in n.reflection for n in failed)
    # the first expansion had no lesson; the one that solved it had
    first = [p for p, i in zip(llm.prompts, llm.ids) if i.endswith("/mcts/it0/n0/c0")]
    solved = [p for p, i in zip(llm.prompts, llm.ids) if "/it1/" in i and i.endswith("/c0")]
    assert LESSON not in first[0] and LESSON in solved[0]
    assert any(c.role == "reflector" for c in traj.calls)


def test_reflections_reach_the_value_prompt():
    def answer(j, text, steps):
        if j == 0:
            return f"Thought: t\nAction: Finish[wrong{j}]"
        return "Thought: hmm\nAction: Search[VIVA Media]" if steps == 0 else "Action: Finish[no]"

    llm = PromptModel(gold(), answer)
    ep, cfg = episode(llm, "mcts", agent="react", mcts_children=2, mcts_iterations=3, value_samples=1)
    traj, ev = run(ep, cfg)
    assert not ev.success
    values = [p for p in llm.prompts if "The attempt:" in p]
    assert values and any(LESSON in p for p in values)


@pytest.mark.parametrize("rollout", ["react", "tot", "mcts"])
@pytest.mark.parametrize("budget", [{"max_calls_per_episode": 7}, {"max_tokens_per_episode": 2500}])
def test_no_episode_ever_exceeds_its_budget(rollout, budget):
    llm = PromptModel("never", lambda j, t, steps: "Thought: look\nAction: Search[VIVA Media]" if steps == 0
                      else "Thought: again\nAction: Lookup[name]")
    ep, cfg = episode(llm, rollout, agent="react", max_steps=12, **budget)
    traj, ev = run(ep, cfg)
    assert not ev.success
    if "max_calls_per_episode" in budget:
        assert len(traj.calls) == len(llm.ids) <= 7
        assert traj.end_reason == "call_budget"
    else:
        assert sum(c.prompt_tokens + c.completion_tokens for c in traj.calls) <= 2500
        assert traj.end_reason == "token_budget"


class RandomModel(LLM):
    """A sampled model with no seed: a replay is only the same if the cache answers it."""

    name = "random-model"

    def __init__(self):
        self.calls = 0

    async def generate(self, messages, params, *, rollout_id=None):
        self.calls += 1
        await asyncio.sleep(random.random() / 200)  # concurrent answers come back in any order
        text = "\n".join(m.content for m in messages)
        if "The attempt:" in text:
            out = f"Score: {random.randint(1, 10)}"
        elif "Your failed attempt" in text:
            out = f"Lesson {random.randint(0, 99)}."
        else:
            out = random.choice(["Action: Search[VIVA Media]", "Action: Lookup[2004]", "Action: Finish[x]",
                                 "Action: Search[Constantin Medien]"])
        return Completion(text=out, prompt_tokens=len(text.split()), completion_tokens=3, model=self.name)


def test_mcts_replays_the_same_tree_from_the_response_cache(tmp_path):
    inner = RandomModel()
    store = ResponseStore(tmp_path / "cache")
    trees = []
    for _ in range(2):
        llm = CachedLLM(inner, store, {"model": "random-model"})
        ep, cfg = episode(llm, "mcts", agent="react", mcts_children=3, mcts_iterations=4, value_samples=2,
                          max_calls_per_episode=60)
        traj, _ = run(ep, cfg)
        trees.append([n.model_dump() for n in traj.tree])
        calls_after_first = inner.calls
    assert trees[0] == trees[1] and len(trees[0]) > 4
    assert inner.calls == calls_after_first  # every call of the replay came from the cache
    store.close()


def test_children_are_requested_concurrently():
    """The model lets no request finish until all 4 children of the root are in flight: a
    rollout that asked for them one after another would never get past the first."""
    in_flight, all_in = [], asyncio.Event()

    class Gate(PromptModel):
        async def generate(self, messages, params, *, rollout_id=None):
            if rollout_id.endswith(("/c0", "/c1", "/c2", "/c3")) and "/n0/" in rollout_id:
                in_flight.append(rollout_id)
                if len(in_flight) == 4:
                    all_in.set()
                await asyncio.wait_for(all_in.wait(), timeout=60)
            return await super().generate(messages, params, rollout_id=rollout_id)

    llm = Gate(gold(), third_sample_right)
    ep, cfg = episode(llm, "mcts", mcts_children=4)
    traj, ev = run(ep, cfg)
    assert ev.success and len(in_flight) == 4


# --- branching ------------------------------------------------------------------------------------

def _docstore(snapshots: bool):
    ep, _cfg = episode(None, "tot", agent="react")
    make = ep.make_env
    if not snapshots:
        def make():  # the same env, but one that cannot snapshot: branches replay instead
            env = ep.make_env()
            env.snapshot = lambda: None
            return env
    return Branching(make)


@pytest.mark.parametrize("snapshots", [True, False])
def test_branches_never_share_env_state(snapshots):
    from reinagent.env import astep

    async def go():
        branching = _docstore(snapshots)
        env, _, _ = await branching.start()
        await astep(env, "Search[VIVA Media]")
        obs, *_ = await astep(env, "Lookup[VIVA]")
        assert obs.startswith("(Result 1 /")
        parent = branching.save(env, ("Search[VIVA Media]", "Lookup[VIVA]"))
        a, b = await branching.open(parent), await branching.open(parent)
        assert a is not b
        for _ in range(2):
            obs_a, *_ = await astep(a, "Lookup[VIVA]")
        obs_b, *_ = await astep(b, "Lookup[VIVA]")
        assert obs_a.startswith("(Result 3 /") and obs_b.startswith("(Result 2 /")
        assert a.steps == 4 and b.steps == 3  # the step counter of one branch never leaks
        c = await branching.open(parent)  # the parent itself is untouched by its children
        obs_c, *_ = await astep(c, "Lookup[VIVA]")
        assert obs_c.startswith("(Result 2 /") and c.steps == 3
        return branching.replays

    replays = asyncio.run(go())
    assert (replays > 0) == (not snapshots)


def test_siblings_in_a_search_see_their_own_lookup_cursor():
    """Every child of a node does the same Lookup (with its own thought, so that the children are
    distinct and all kept): each must see result 2, never 3, 4, ..."""
    def answer(j, text, steps):
        action = ("Search[VIVA Media]", "Lookup[VIVA]", "Lookup[VIVA]")[steps] if steps < 3 else "Finish[no]"
        return f"Thought: sample {j}\nAction: {action}"

    llm = PromptModel(gold(), answer)
    ep, cfg = episode(llm, "tot", agent="react", tot_breadth=3, tot_keep=1, value_samples=1)
    traj, _ = run(ep, cfg)
    second = [n for n in traj.tree if n.depth == 3]
    assert len(second) == 3 and all(n.observation.startswith("(Result 2 /") for n in second)


# --- programming: values are the agent's own tests ------------------------------------------------

def mcts_on_code(tmp_path, script) -> list:
    """The records of one trial of `--rollout mcts` on 3 HumanEval tasks with the scripted coder."""
    from tests.conftest import run_cli
    from tests.test_coder import RULES

    from reinagent.runner import load_run

    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "humaneval", "--agent", "coder", "--strategy", "none", "--rollout", "mcts",
                   "--num-trials", "1", "--num-envs", "3", "--mcts-iterations", "3", "--mcts-children", "2",
                   "--tot-depth", "2", "--model", script(RULES, default="I do not know."),
                   "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    return load_run(run_dir)[1]


def test_mcts_on_code_values_nodes_by_internal_tests_and_fixes_after_a_reflection(tmp_path, script):
    records = mcts_on_code(tmp_path, script)
    rec = next(r for r in records if r.task_id == "HumanEval/2")
    assert rec.success and rec.trial == 1 and rec.error is None  # one trial, strategy none
    tree = rec.trajectory.tree
    buggy = [n for n in tree[1:] if "int(number)" in (n.action or "")]
    assert buggy and all(n.value == 0.0 for n in buggy)  # 0 of 3 internal tests pass
    assert any(n.reflection and "FIX-MARKER" in n.reflection for n in tree)
    solved = tree[rec.trajectory.extra["search"]["chosen"][-1]]
    assert solved.success and solved.value == 1.0 and "% 1.0" in solved.action
    assert rec.trajectory.extra["internal_pass_rate"] == 1.0


# --- ALFWorld: no snapshots, so every branch replays its actions in a fresh game ---------------------

def test_tot_on_alfworld_replays_the_action_prefix_and_wins(tmp_path, script):
    from tests.test_alfworld import HAVE_ALFWORLD

    if not HAVE_ALFWORLD:
        pytest.skip("alfworld is not installed: pip install -e .[alfworld]")
    from tests.conftest import run_cli

    from reinagent.runner import load_run

    model = script([
        {"when": "The attempt:", "reply": "The plan is on track.\nsure"},
        {"when": "Your task is to", "reply": ["think: The alarmclock is on desk 2.", "go to desk 2",
                                             "take alarmclock 1 from desk 2", "go to desk 1", "use desklamp 1"]},
    ], default="look")
    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "alfworld", "--agent", "react", "--strategy", "none", "--rollout", "tot",
                   "--tot-breadth", "1", "--tot-keep", "1", "--value-samples", "1", "--num-envs", "1",
                   "--num-trials", "1", "--model", model, "--run-dir", str(run_dir), "--no-cache", "--quiet",
                   timeout=600)
    assert proc.returncode == 0, proc.stderr
    _, (rec,) = load_run(run_dir)
    traj = rec.trajectory
    assert rec.success and traj.end_reason == "won" and traj.extra["env_steps"] == 4
    assert [n.depth for n in traj.tree] == [0, 1, 2, 3, 4, 5]
    assert traj.tree[1].thought and traj.tree[2].action == "go to desk 2"
    # each level reopened its parent's game by replaying the actions so far: 0+0+1+2+3
    assert traj.extra["search"]["replayed_actions"] == 6


@pytest.mark.parametrize("text, value", [
    ("The steps check out.\nScore: 8", 0.8), ("Score: 7/10", 0.7), ("rating = 3", 0.3), ("9", 0.9),
    ("It could work... likely", 0.5), ("Not sure at first, but impossible", 0.0), ("Sure.", 1.0),
    ("Score: 40", 1.0), ("no idea", None),
])
def test_value_parsing(text, value):
    from reinagent.rollouts.value import parse_value

    assert parse_value(text) == value


def test_a_model_error_mid_search_is_the_trials_error_and_keeps_the_tree(tmp_path, monkeypatch):
    """Through run_episode: the error is recorded (not a crash), with the calls and tree so far."""
    from reinagent.errors import ModelError
    from reinagent.memory import EpisodicMemory
    from reinagent.plan import build
    from reinagent.plan import resolve
    from reinagent.runner import run_episode

    class Failing(PromptModel):
        async def generate(self, messages, params, *, rollout_id=None):
            if "/it1/" in rollout_id:
                raise ModelError("server went away")
            return await super().generate(messages, params, rollout_id=rollout_id)

    ep, cfg = episode(Failing(gold(), lambda j, t, s: f"Action: Finish[wrong{j}]"), "mcts", mcts_children=2)
    store = type("S", (), {"run_dir": tmp_path})()
    plan = resolve(cfg, task_ids=[ep.task.task_id], check_models=False)
    exp = build(plan, store, models=(ep.actor.llm, ep.actor.llm, []))
    exp.agent = ep.agent
    record = asyncio.run(run_episode(exp, ep.task, 1, EpisodicMemory(window=3), None))
    assert record.error == "model error: server went away" and not record.success
    assert record.trajectory.rollout == "mcts" and [n.id for n in record.trajectory.tree] == [0, 1, 2]
    assert len(record.trajectory.calls) == 4  # two children and their reflections (by the actor's model)


def test_siblings_get_distinct_seeds_that_replay():
    """A server that honours `seed` (vLLM) must not answer every sibling alike: each sampled call
    records the seed its backend is sent, derived from its place; a replay records the same ones."""
    from reinagent.llm.base import sampling_seed

    runs = []
    for _ in range(2):
        ep, cfg = episode(PromptModel(gold(), third_sample_right), "tot", seed=7)
        traj, _ = run(ep, cfg)
        runs.append([(c.rollout_id, c.seed) for c in traj.calls])
    first, second = runs
    assert first == second
    children = [s for rid, s in first if re.search(r"/c\d+$", rid)]
    assert len(children) == 5 and len(set(children)) == 5
    assert all(s == sampling_seed(ep.agent.params.__class__(temperature=1.0, seed=7), rid) for rid, s in first
               if re.search(r"/c\d+$", rid))


def test_a_search_refuses_an_agent_it_cannot_step_before_any_work(tmp_path):
    # The ALFWorld expert plays a fixed plan: no search can branch it. Said up front, in one line,
    # naming the agents that can be searched, and no run directory is made.
    from tests.conftest import one_line_error, run_cli

    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "alfworld", "--agent", "alfworld-expert", "--rollout", "tot",
                   "--num-envs", "1", "--run-dir", str(run_dir))
    line = one_line_error(proc)
    assert "cannot step agent 'alfworld-expert'" in line and "valid agents there: react" in line, line
    assert not run_dir.exists()


def test_a_failure_is_the_same_whatever_its_case_and_spacing():
    """LATS's unique trajectories: 'Paris' and ' paris ' are one failed answer (one reflection)."""
    from reinagent.rollouts.search import Search
    from reinagent.rollouts.steps import PathState

    ep, _ = episode(None)
    search = Search(ep, "mcts", "score")
    search.states = [PathState(base=[], answer="Paris"), PathState(base=[], answer=" paris "),
                     PathState(base=[], answer="Lyon")]
    assert search.failure_key(0) == search.failure_key(1) != search.failure_key(2)
