"""MCTS as in LATS and ToT as in Tree of Thoughts (issue 26 §2, §3, §5), on in-test models whose
value judgements are known in advance, so every test names the node a faithful search must
choose. Each test is meant to fail under a named mutant of the search (see the docstrings)."""

from __future__ import annotations

import asyncio
import dataclasses
import re

import pytest

from reinagent.llm.base import LLM, Completion
from reinagent.records import SearchNode
from reinagent.rollouts import make_rollout
from reinagent.rollouts.mcts import _Run, uct
from reinagent.rollouts.search import Search
from reinagent.rollouts.value import mean_value
from tests.test_search import episode


def run(ep, cfg):
    return asyncio.run(make_rollout(cfg.rollout, ep.settings).run(ep))


# --- selection on a tree built by hand --------------------------------------------------------------

def _search_with(nodes: list[SearchNode], **settings) -> _Run:
    ep, cfg = episode(None, "mcts", agent="react", **settings)
    search = Search(ep, "mcts", "score")
    search.nodes = nodes
    return _Run(search, ep.settings)


def _node(i, parent, *, q=None, visits=0, terminal=False, reward=None, value=None):
    depth = 0 if parent is None else 1
    return SearchNode(id=i, parent=parent, depth=depth, q=q, visits=visits, terminal=terminal, reward=reward,
                      value=value if value is not None else q)


def test_selection_exploits_the_higher_q_at_equal_visits():
    """Mutants: UCT without its exploitation term (a tie: the first child wins), min instead of max."""
    r = _search_with([_node(0, None, visits=6), _node(1, 0, q=0.2, visits=3), _node(2, 0, q=0.9, visits=3)])
    assert r.select() == 2


def test_selection_explores_the_less_visited_at_equal_q():
    """Mutants: UCT without its exploration term (a tie: the first child wins), min instead of max."""
    r = _search_with([_node(0, None, visits=9), _node(1, 0, q=0.5, visits=8), _node(2, 0, q=0.5, visits=1)])
    assert r.select() == 2


def test_uct_terms():
    assert uct(0.9, 3, 6, 1.0) > uct(0.2, 3, 6, 1.0)  # exploitation
    assert uct(0.5, 1, 9, 1.0) > uct(0.5, 8, 9, 1.0)  # exploration
    assert uct(0.5, 1, 9, 0.0) == 0.5


def test_selection_backtracks_past_a_node_whose_children_all_ended():
    """Node 2 is the most valuable, but its children all failed: LATS never selects a failed
    terminal node again; it closes node 2 and goes on from its parent to node 1."""
    nodes = [_node(0, None, visits=3), _node(1, 0, q=0.3, visits=1), _node(2, 0, q=0.9, visits=2),
             _node(3, 2, q=0.0, visits=1, terminal=True, reward=0.0),
             _node(4, 2, q=0.0, visits=1, terminal=True, reward=0.0)]
    nodes[3].parent = nodes[4].parent = 2
    r = _search_with(nodes)
    assert r.select() == 1 and 2 in r.closed
    assert r.select() == 1  # and stays closed


def test_the_root_is_expanded_again_when_nothing_is_open():
    nodes = [_node(0, None, visits=2), _node(1, 0, terminal=True, reward=0.0, visits=1),
             _node(2, 0, terminal=True, reward=0.0, visits=1)]
    assert _search_with(nodes).select() == 0


def test_q_starts_at_the_value_and_averages_the_returns_backed_up_the_path():
    nodes = [_node(0, None), _node(1, 0, value=0.8), _node(2, 1, value=0.4)]
    nodes[2].depth = 2
    r = _search_with(nodes)
    r.backprop(2, 0.2)
    assert [n.visits for n in nodes] == [1, 1, 1]
    assert nodes[0].q == pytest.approx(0.2)
    assert nodes[1].q == pytest.approx((0.8 + 0.2) / 2) and nodes[2].q == pytest.approx((0.4 + 0.2) / 2)
    r.backprop(1, 1.0)
    assert nodes[1].q == pytest.approx((0.8 + 0.2 + 1.0) / 3) and nodes[1].visits == 2


# --- whole searches on a model with known values ----------------------------------------------------

class PlanModel(LLM):
    """Sampled step j says `plan j`; the value of an attempt is fixed by the last plan in it
    (plan j scores 2j+1 out of 10), so the most valuable of any set of siblings is the last one.
    `/v{k}` picks a value sample: `samples` maps a plan to its per-sample scores (ToT)."""

    name = "plan-model"

    def __init__(self, samples: dict[int, list[int]] | None = None):
        self.samples = samples or {}
        self.ids: list[str] = []

    async def generate(self, messages, params, *, rollout_id=None):
        self.ids.append(rollout_id)
        text = "\n".join(m.content for m in messages)
        if "Your failed attempt" in text:
            out = "I wandered. Next time I will search the entity first."
        elif "The attempt:" in text:
            plans = re.findall(r"plan (\d+)", text.split("The attempt:")[1])
            plan = int(plans[-1]) if plans else 0
            k = int(re.search(r"/v(\d+)$", rollout_id).group(1))
            out = f"Score: {self.samples.get(plan, [2 * plan + 1] * 8)[k]}"
        else:
            j = int(m.group(1)) if (m := re.search(r"/c(\d+)$", rollout_id or "")) else 0
            out = f"Thought: plan {j}\nAction: Lookup[plan {j}]"
        return Completion(text=out, prompt_tokens=len(text.split()), completion_tokens=len(out.split()), model=self.name)


def _mcts(**settings):
    llm = PlanModel()
    ep, cfg = episode(llm, "mcts", agent="react", mcts_children=3, mcts_iterations=1, max_steps=3,
                      value_samples=1, **settings)
    traj, ev = run(ep, cfg)
    return ep, traj, ev, llm


def test_a_simulation_starts_at_the_most_valuable_child_and_follows_the_best_valued_of_n_samples():
    """Mutant: simulating from the least valuable child (or following the worst sample)."""
    ep, traj, ev, llm = _mcts()
    tree = traj.tree
    assert not ev.success
    kids = lambda i: [n.id for n in tree if n.parent == i]  # noqa: E731
    assert kids(0) == [1, 2, 3]
    assert [tree[k].value for k in kids(0)] == [0.1, 0.3, 0.5]
    expanded = [n.id for n in tree if kids(n.id)]
    assert expanded == [0, 3, 6]  # root; the most valuable child; then the best of its 3 samples
    assert all(len(kids(i)) == 3 for i in expanded)  # n samples per simulation level
    sim_parents = {re.search(r"/sim/n(\d+)/c\d+$", i).group(1) for i in llm.ids if "/sim/" in i and "/v" not in i
                   and "reflect" not in i}
    assert sim_parents == {"3", "6"}


def test_the_simulated_return_is_backed_up_along_its_path_and_failed_leaves_keep_one_visit():
    ep, traj, ev, _ = _mcts()
    tree = traj.tree
    # the path 0 > 3 > 6 > 7 (the first of the depth-limit leaves, all judged 0): the return is
    # the mean of what was met on the way, 0.5, 0.5 and the leaf's reward 0
    ret = (0.5 + 0.5 + 0.0) / 3
    assert [tree[i].visits for i in (0, 3, 6, 7)] == [1, 1, 1, 1]
    assert tree[0].q == pytest.approx(ret)
    assert tree[3].q == pytest.approx((0.5 + ret) / 2) and tree[6].q == pytest.approx((0.5 + ret) / 2)
    assert tree[1].q == 0.1 and tree[1].visits == 0  # not visited: Q is its LM value
    failed = [n for n in tree if n.terminal and not n.success]
    assert len(failed) == 3 and all(n.visits <= 1 for n in failed)
    assert all(n.value_samples for n in tree[1:] if not n.terminal)  # the judgements' texts
    assert all(c.rollout_id and c.rollout_id.startswith(ep.rollout_id) for c in traj.calls)
    # the benchmark's judge ran once per terminal node (judge: reward), never again at the end
    assert ep.benchmark_evaluations == 3 and traj.extra["search"]["judge"] == "reward"


def test_failed_terminal_nodes_are_never_selected_again_over_many_iterations():
    """The bug LATS avoids: an iteration that re-selects a failed leaf expands nothing."""
    llm = PlanModel()
    ep, cfg = episode(llm, "mcts", agent="react", mcts_children=2, mcts_iterations=6, max_steps=2, value_samples=1)
    traj, _ = run(ep, cfg)
    tree = traj.tree
    assert all(n.visits <= 1 for n in tree if n.terminal and not n.success)
    expansions = {m.group(1) for i in llm.ids if (m := re.search(r"/(it\d+)/n\d+/c0$", i))}
    assert expansions == {f"it{k}" for k in range(6)}  # every iteration expanded a node


def test_search_judge_value_keeps_the_gold_answer_out_of_the_search():
    ep, traj, ev, llm = _mcts(search_judge="value")
    assert ep.benchmark_evaluations == 1  # only the returned path
    leaves = [n for n in traj.tree if n.terminal]
    assert leaves and all(n.reward == n.value for n in leaves)  # judged by the model's own value
    assert any("/judge/v0" in i for i in llm.ids) and traj.extra["search"]["judge"] == "value"


def test_tot_keeps_the_best_tot_keep_by_mean_value():
    """Mutants: ranking ascending (keeps plans 3 and 0), keeping 1 (plan 2 only), ranking by the
    first sample instead of the mean (plan 0 first: its samples are 10 and 1)."""
    samples = {0: [10, 1], 1: [6, 6], 2: [7, 7], 3: [2, 2]}
    llm = PlanModel(samples)
    ep, cfg = episode(llm, "tot", agent="react", tot_breadth=4, tot_keep=2, value_samples=2, max_steps=2)
    traj, _ = run(ep, cfg)
    tree = traj.tree
    first = [n for n in tree if n.depth == 1]
    assert [n.value for n in first] == [pytest.approx(0.55), 0.6, 0.7, 0.2]
    assert [len(n.value_samples) for n in first] == [2, 2, 2, 2]
    kept = {n.parent for n in tree if n.depth == 2}
    assert kept == {first[1].id, first[2].id}  # plans 1 and 2


def test_a_value_is_the_mean_of_its_samples():
    assert mean_value(["Score: 10", "Score: 2"]) == pytest.approx(0.6)
    assert mean_value(["no idea", "Score: 4", None]) == pytest.approx(0.4)


# --- programming: the hidden tests judge the returned program once ------------------------------------

def test_mcts_on_code_runs_the_hidden_tests_once_per_trial(tmp_path, script):
    from tests.test_search import mcts_on_code

    records = mcts_on_code(tmp_path, script)
    assert len(records) == 3
    for rec in records:
        assert rec.evaluation["benchmark_evaluations"] == 1, rec.task_id
        assert rec.trajectory.extra["search"]["judge"] == "internal tests"
        terminal = [n for n in rec.trajectory.tree if n.terminal]
        assert all(n.reward == n.value for n in terminal)  # the internal pass rate, not the hidden tests


def test_every_record_says_how_often_the_benchmark_judged(tmp_path, script):
    from tests.conftest import run_cli

    from reinagent.runner import load_run

    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-envs", "2", "--num-trials", "2",
                   "--model", script([]), "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    _, records = load_run(run_dir)
    assert records and all(r.evaluation["benchmark_evaluations"] == 1 for r in records)


def test_search_judge_is_checked():
    from tests.conftest import run_cli

    proc = run_cli("run", "--benchmark", "hotpotqa", "--rollout", "mcts", "--search-judge", "oracle")
    assert proc.returncode == 2 and "reward" in proc.stderr and "value" in proc.stderr


# --- memory bounded as LATS bounds it (issue 35 §2) ---------------------------------------------------

class WrongModel(LLM):
    """Always wrong: every sampled answer a new wrong one (`distinct`) or the same one, after the
    same thought or (`thoughts`) a new one; every reflection a new numbered lesson, so a prompt's
    lessons can be counted."""

    name = "wrong-model"

    def __init__(self, distinct: bool = True, thoughts: bool = False):
        self.distinct, self.thoughts, self.answers, self.lessons, self.prompts = distinct, thoughts, 0, 0, []

    async def generate(self, messages, params, *, rollout_id=None):
        text = "\n".join(m.content for m in messages)
        self.prompts.append(text)
        if "Your failed attempt" in text:
            self.lessons += 1
            out = f"I named the wrong thing. Lesson #{self.lessons}: check the paragraph first."
        elif "The attempt:" in text:
            out = "Score: 3"
        else:
            self.answers += 1
            thought = f"guess {self.answers}" if self.thoughts else "a guess"
            out = f"Thought: {thought}\nAction: Finish[wrong {self.answers if self.distinct else 0}]"
        return Completion(text=out, prompt_tokens=len(text.split()), completion_tokens=len(out.split()), model=self.name)


def _wrong_episode(distinct=True, thoughts=False, **settings):
    llm = WrongModel(distinct, thoughts)
    ep, cfg = episode(llm, "mcts", agent="cot-context", strategy="none", **settings)
    traj, ev = run(ep, cfg)
    assert not ev.success
    return llm, traj


def test_a_search_shows_at_most_search_reflections_however_many_nodes_fail():
    """Mutant: reflections growing without bound (every failed node reflected on, all shown).
    An always-wrong model with a new wrong answer each time, default settings (30 iterations x 5
    children on HotpotQA): 150 failed nodes, 3 reflections, and no prompt shows more than 3."""
    llm, traj = _wrong_episode()
    failed = [n for n in traj.tree if n.terminal and not n.success]
    assert len(failed) == 150 and traj.extra["search"]["failed"] == 150
    assert sorted(n.reflection for n in failed if n.reflection) == [
        f"I named the wrong thing. Lesson #{k}: check the paragraph first." for k in (1, 2, 3)]
    assert traj.extra["search"]["reflections"] == 3 and llm.lessons == 3
    assert sum(c.role == "reflector" for c in traj.calls) == 3
    assert max(p.count("Lesson #") for p in llm.prompts) == 3
    # the largest prompt does not grow with the failed nodes: 10 iterations' equals 30 iterations'
    short, _ = _wrong_episode(mcts_iterations=10)
    assert max(map(len, short.prompts)) == max(map(len, llm.prompts))
    # the setting: 1 reflection kept, or none
    one, traj1 = _wrong_episode(mcts_iterations=4, search_reflections=1)
    assert one.lessons == 1 and max(p.count("Lesson #") for p in one.prompts) == 1
    none, _ = _wrong_episode(mcts_iterations=4, search_reflections=0)
    assert none.lessons == 0 and traj1.extra["search"]["reflections"] == 1


class EchoingModel(WrongModel):
    """Always wrong, and its Reflector only echoes the attempt: nothing of its own to keep."""

    async def generate(self, messages, params, *, rollout_id=None):
        completion = await super().generate(messages, params, rollout_id=rollout_id)
        if completion.text.startswith("I named the wrong thing"):
            completion = dataclasses.replace(completion, text="Failed attempt:\nThe same attempt again.\nReflection:")
        return completion


def test_a_reflection_with_nothing_of_the_model_s_own_is_no_lesson():
    """Mutant: an empty reflection kept among the search's lessons -- an empty '- ' bullet in the
    prompts, counted as a reflection; the reflector's calls stay bounded either way."""
    llm = EchoingModel()
    ep, cfg = episode(llm, "mcts", agent="cot-context", strategy="none", mcts_iterations=6)
    traj, _ = run(ep, cfg)
    assert llm.lessons == 3 and traj.extra["search"]["reflections"] == 0
    assert not any("Lessons" in p or "\n- \n" in p for p in llm.prompts)


def test_identical_children_are_kept_once_and_one_wrong_answer_is_reflected_on_once():
    """Mutants: no de-duplication of children (5 identical nodes per expansion), a reflection per
    failed node instead of per distinct final answer (LATS's get_unique_trajectories)."""
    llm, traj = _wrong_episode(distinct=False, mcts_iterations=4)
    kids = [n for n in traj.tree if n.parent == 0]
    assert len(kids) == 1 and kids[0].action == "Finish[wrong 0]"  # the 4 repeats of each batch made no node
    assert traj.extra["search"]["duplicates"] == 4 * 5 - 1  # the root re-expanded 3 times, every sample a repeat
    assert llm.lessons == 1 and traj.extra["search"]["reflections"] == 1


def test_one_wrong_answer_reached_by_many_paths_is_reflected_on_once():
    """Mutant: a reflection per failed node instead of per distinct final answer (LATS's
    get_unique_trajectories); here that is also a reflection per node without bound."""
    llm, traj = _wrong_episode(distinct=False, thoughts=True, mcts_iterations=3)
    failed = [n for n in traj.tree if n.terminal and not n.success]
    assert len(failed) == 15 and {n.action for n in failed} == {"Finish[wrong 0]"}  # 15 distinct thoughts
    assert llm.lessons == 1 and [n.id for n in failed if n.reflection] == [failed[0].id]


def test_failed_terminal_children_are_backed_up():
    """Mutant: MCTS no longer backing up failed terminal children. A CoT search (every child ends):
    each failed child is visited once with return 0, and the root counts all of them."""
    llm, traj = _wrong_episode(mcts_iterations=2, mcts_children=3)
    tree = traj.tree
    failed = [n for n in tree if n.terminal and not n.success]
    assert len(failed) == 6
    assert all(n.visits == 1 and n.q == 0.0 for n in failed)
    assert tree[0].visits == 6 and tree[0].q == 0.0
