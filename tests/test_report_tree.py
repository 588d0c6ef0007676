"""Search rollouts in reports (issue 16): the per-rollout table and one episode's tree in HTML.

Records are made by hand with the real record types (a TrialRecord whose trajectory holds a
SearchNode tree), so the reports are tested before and independently of the rollouts that fill them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reinagent.records import Message, ModelCall, RunSpec, SearchNode, Step, TrialRecord, Trajectory
from reinagent.report.html import report_html
from reinagent.report.loading import load
from reinagent.report.markdown import report_markdown
from reinagent.report.rollouts import rollout_table
from reinagent.report.trajectory import task_story
from reinagent.report.tree import chosen_path, drawn_tree
from reinagent.store import RunStore
from tests.test_report import COMPLETE, T0, make_run


def node(i, parent, action=None, **kw) -> SearchNode:
    return SearchNode(id=i, parent=parent, depth=0 if parent is None else kw.pop("depth", 1), action=action, **kw)


def mcts_tree() -> list[SearchNode]:
    """root -> 3 candidate searches; the second leads to the answer, the first failed with a reflection."""
    return [
        node(0, None, observation="Question: who wrote X?", visits=4),
        node(1, 0, "Search[A]", observation="A is a river.", value=0.2, visits=1),
        node(2, 0, "Search[B]", observation="B wrote X in 1990. " + "x" * 500, value=0.9, q=0.95, visits=2),
        node(3, 0, "Search[C]", observation="No results.", value=0.1, visits=1),
        node(4, 1, "Finish[river]", depth=2, observation="wrong", reward=0.0, terminal=True, success=False,
             visits=1, reflection="I searched the wrong entity; search B next time."),
        node(5, 2, "Finish[B]", depth=2, observation="correct", reward=1.0, terminal=True, success=True, visits=1),
    ]


def chosen_steps() -> list[Step]:
    return [Step(prompt_len=1, output="Action: Search[B]", action="Search[B]", observation="B wrote X in 1990."),
            Step(prompt_len=1, output="Action: Finish[B]", action="Finish[B]", observation="correct")]


def search_record(task_id: str, *, success: bool, tree: list[SearchNode], calls: int,
                  steps: list[Step] | None = None, trial: int = 1, judged: int | None = None) -> TrialRecord:
    model_calls = [ModelCall(role="actor", model="scripted:x", prompt_tokens=100, completion_tokens=10)
                   for _ in range(calls)]
    traj = Trajectory(messages=[Message(role="user", content=f"Question: who wrote {task_id}?")],
                      steps=steps or [], answer="B" if success else "river", end_reason="finished",
                      calls=model_calls, rollout="mcts", tree=tree)
    evaluation = {} if judged is None else {"benchmark_evaluations": judged}
    return TrialRecord(task_id=task_id, trial=trial, success=success, reward=float(success), answer=traj.answer,
                       trajectory=traj, evaluation=evaluation, started_at=T0, finished_at=T0 + 1)


def make_search_run(run_dir: Path, records: list[TrialRecord], num_trials: int = 1, rollout="mcts") -> Path:
    spec = RunSpec(config={"benchmark": "hotpotqa", "agent": "react", "strategy": "none", "num_trials": num_trials,
                           "model": "scripted:x", "rollout": rollout},
                   task_ids=sorted({r.task_id for r in records}), created_at=T0, reinagent_version="test",
                   python_version="3")
    store = RunStore.create(run_dir, spec)
    for rec in records:
        store.append(rec)
    return run_dir


def test_chosen_path_follows_the_steps():
    traj = search_record("a", success=True, tree=mcts_tree(), calls=1, steps=chosen_steps()).trajectory
    assert chosen_path(traj) == [0, 2, 5]


def test_chosen_path_recorded_by_the_search_wins():
    """rollouts/search.py records the chosen node ids; a malformed record is ignored, not trusted."""
    tree = mcts_tree()
    assert chosen_path(Trajectory(tree=tree, steps=chosen_steps(), extra={"search": {"chosen": [0, 1, 4]}})) == [0, 1, 4]
    for bad in ([0, 4], [2, 5], [0, 9], "0,1", []):
        assert chosen_path(Trajectory(tree=tree, steps=chosen_steps(), extra={"search": {"chosen": bad}})) == [0, 2, 5]


def test_chosen_path_falls_back_to_the_successful_leaf_then_the_best_reward():
    tree = mcts_tree()
    assert chosen_path(Trajectory(tree=tree)) == [0, 2, 5]  # no steps recorded
    failed = [n.model_copy(update={"success": False, "reward": 0.3}) if n.id == 5 else n for n in tree]
    assert chosen_path(Trajectory(tree=failed)) == [0, 2, 5]  # best reward among terminals
    no_terminal = [n.model_copy(update={"terminal": False}) for n in tree[:4]]
    assert chosen_path(Trajectory(tree=no_terminal)) == [0, 2]  # best value
    assert chosen_path(Trajectory()) == []


def test_tree_nests_children_under_parents():
    roots = drawn_tree(search_record("a", success=True, tree=mcts_tree(), calls=1).trajectory)
    assert [r.node.id for r in roots] == [0]
    assert [c.node.id for c in roots[0].children] == [1, 2, 3]
    b = roots[0].children[1]
    assert b.chosen and len(b.observation) <= 240 and b.observation.endswith("...")
    assert [c.node.id for c in b.children] == [5]


def test_html_draws_every_node_and_marks_the_chosen_path(tmp_path):
    tree = mcts_tree()
    run = make_search_run(tmp_path / "mcts", [search_record("a", success=True, tree=tree, calls=3, steps=chosen_steps())])
    page = report_html(load(run))
    nodes = re.findall(r"<li class='node([^']*)' data-node='(\d+)'>", page)
    assert len(nodes) == len(tree)
    assert sorted(int(i) for _, i in nodes) == list(range(len(tree)))
    assert [int(i) for cls, i in nodes if "chosen" in cls.split()] == [0, 2, 5]
    assert "I searched the wrong entity; search B next time." in page  # a failed node's reflection
    assert "value 0.9" in page and "q 0.95" in page and "visits 2" in page and "reward 1" in page
    assert "search tree: 6 nodes, depth 2 (mcts)" in page
    assert "x" * 300 not in page.split("class='tree'")[1].split("</ul>\n</details>")[0]  # shortened in the tree
    assert "<script" not in page and "http://" not in page


def test_html_escapes_node_text(tmp_path):
    tree = [node(0, None), node(1, 0, "Search[<script>alert(1)</script>]", observation="<b>&</b>")]
    run = make_search_run(tmp_path / "esc", [search_record("a", success=False, tree=tree, calls=1)])
    page = report_html(load(run))
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in page


def test_a_react_run_draws_no_tree(tmp_path):
    page = report_html(load(make_run(tmp_path / "react", COMPLETE)))
    assert "data-node=" not in page and "search tree" not in page


def test_per_rollout_table_numbers(tmp_path):
    """Two mcts runs (grouped) and an old react run whose config names no rollout."""
    solved = search_record("a", success=True, tree=mcts_tree(), calls=4, steps=chosen_steps(), judged=5)
    unsolved = search_record("b", success=False, tree=mcts_tree()[:4], calls=2, judged=2)
    m1 = make_search_run(tmp_path / "m1", [solved, unsolved])
    m2 = make_search_run(tmp_path / "m2", [search_record("c", success=False, tree=mcts_tree()[:2], calls=1)])
    react = make_run(tmp_path / "react", COMPLETE)  # 5 tasks, 3 solved, 10 one-step episodes, 15 calls
    summaries = [r.summary for r in load([m1, react, m2])]
    assert summaries[0]["rollout"] == "mcts" and summaries[1]["rollout"] == "react"
    assert summaries[0]["rollout_stats"] == {
        "episodes": 2, "benchmark_evaluations": 7, "judged_episodes": 2,
        "nodes_expanded": 10, "calls": 6, "tokens": 660, "solved_tasks": 1,
        "nodes_per_episode": 5.0, "calls_per_solved": 6.0, "tokens_per_solved": 660.0}
    header, rows = rollout_table(summaries)
    assert header[0] == "rollout" and [r[0] for r in rows] == ["mcts", "one pass"]  # a cot-context run: not "react"
    # mcts: 2 runs, 1 of 3 tasks, the judge ran 5+2 times in the 2 episodes that say (m2's record is
    # older: unknown), 3 episodes, 6+4+2 = 12 nodes, 7 calls x 110 tokens, per solved task
    assert header[3] == "benchmark judge runs (per episode)"
    assert rows[0] == ["mcts", "2", "1/3 33.3% [6.1, 79.2]", "7 (3.5)", "3", "12 (4.0)", "7.0", "770"]
    # react: actor 10 x 110 + reflector 5 x 70 tokens over 3 solved tasks; nodes are steps
    # react records from before the count was kept: a react episode has always judged once
    assert rows[1] == ["one pass", "1", "3/5 60.0% [23.1, 88.2]", "10 (1.0)", "10", "10 (1.0)", "5.0", "483"]
    md = report_markdown(summaries)
    assert "## By rollout" in md and "| mcts | 2 | 1/3 33.3% [6.1, 79.2] | 7 (3.5) | 3 | 12 (4.0) | 7.0 | 770 |" in md
    assert md.count("### Rollout") == 3
    page = report_html(load([m1, react, m2]))
    assert page.count("<table class='rollouts'>") == 4  # the comparison's and one per run


def test_no_solved_task_has_no_per_solved_figure(tmp_path):
    run = make_search_run(tmp_path / "m", [search_record("b", success=False, tree=mcts_tree(), calls=2)])
    _, rows = rollout_table([load(run)[0].summary])
    assert rows == [["mcts", "1", "0/1 0.0% [0.0, 79.3]", "-", "1", "6 (6.0)", "-", "-"]]


def test_task_story_names_the_tree(tmp_path):
    run = make_search_run(tmp_path / "m", [search_record("a", success=True, tree=mcts_tree(), calls=1,
                                                           steps=chosen_steps())])
    assert "search tree (mcts): 6 nodes, chosen path #0 > #2 > #5" in task_story(run, "a")


@pytest.mark.parametrize("bad_parent", [99, 3])
def test_malformed_trees_still_draw(bad_parent):
    """A parent id that does not exist, or a cycle, must neither hang nor drop a node."""
    tree = [node(0, None), node(1, 0, "a"), node(2, bad_parent, "b"), node(3, 2, "c")]
    traj = Trajectory(tree=tree)
    drawn = drawn_tree(traj)
    count, stack = 0, list(drawn)
    while stack:
        d = stack.pop()
        count += 1
        stack += d.children
    assert count == 4
    assert chosen_path(traj)[0] in (0, 2, 3)
    assert report_html_nodes(tree) == 4


def report_html_nodes(tree: list[SearchNode]) -> int:
    from reinagent.report.html import _template

    macro = _template().environment.get_template("macros.html.j2").module.tree
    return str(macro(drawn_tree(Trajectory(tree=tree)))).count("data-node=")


def test_frames_carry_rollout_and_nodes(tmp_path):
    from reinagent.report.frames import load_frames

    run = make_search_run(tmp_path / "m", [search_record("a", success=True, tree=mcts_tree(), calls=1),
                                           search_record("b", success=False, tree=mcts_tree()[:3], calls=1)])
    frames = load_frames([run, make_run(tmp_path / "react", COMPLETE)])
    assert frames.runs["rollout"].tolist() == ["mcts", "react"]
    mcts = frames.trials[frames.trials["run_id"] == "m"]
    assert mcts["rollout"].tolist() == ["mcts", "mcts"] and mcts["nodes_expanded"].tolist() == [6, 3]


# --- search runs outside the HTML report: the listing, the viewer, value calls, timing ----------

def _search_and_react_runs(root: Path) -> None:
    tree = mcts_tree()
    tree[1] = tree[1].model_copy(update={"action": "Search[<script>x</script>]"})  # escaped in the viewer too
    rec = search_record("a", success=True, tree=tree, calls=3, steps=chosen_steps())
    rec.trajectory.calls += [ModelCall(role="value", model="scripted:x", prompt_tokens=50, completion_tokens=2,
                                       latency_s=1.0) for _ in range(4)]
    make_search_run(root / "mcts", [rec])
    make_search_run(root / "tot", [search_record("a", success=False, tree=tree[:3], calls=2)], rollout="tot")
    make_run(root / "react", COMPLETE)


def test_the_listing_and_labels_name_the_rollout(tmp_path):
    from reinagent.browse.listing import list_runs, runs_table
    from reinagent.report.labels import run_label, unique_labels

    _search_and_react_runs(tmp_path)
    infos, _ = list_runs(tmp_path)
    assert {i.run_id: i.rollout for i in infos} == {"mcts": "mcts", "tot": "tot", "react": "react"}
    table = runs_table(infos).splitlines()
    assert table[0].split()[:5] == ["run", "benchmark", "agent", "strategy", "rollout"]
    assert all(i.to_json()["rollout"] == i.rollout for i in infos)
    summaries = [i.summary for i in sorted(infos, key=lambda i: i.run_id)]
    # ToT and MCTS runs of one agent/strategy/model are told apart; a react run keeps its old label
    assert [run_label(s) for s in summaries] == ["react/none/scripted:x (mcts)", run_label(summaries[1]),
                                                 "react/none/scripted:x (tot)"]
    assert "(" not in run_label(summaries[1]) and len(set(unique_labels(summaries))) == 3


def test_value_calls_have_their_own_role_and_timing_names_the_concurrency(tmp_path):
    from reinagent.report.tables import concurrency_line, usage_table

    _search_and_react_runs(tmp_path)
    (run,) = load(tmp_path / "mcts")
    header, rows = usage_table(run.summary)
    by_role = {r[0]: r for r in rows}
    assert by_role["actor"][1] == "3" and by_role["value"][1] == "4" and by_role["total"][1] == "7"
    assert by_role["value"][3] == "200+8"
    assert header[-1] == "call latency, summed"
    line = concurrency_line(run.summary)
    assert line.startswith("wall time 1.0s") and "latency summed 4.0s" in line and "4.0 calls were in flight" in line
    md = report_markdown([run.summary])
    assert "| value | 4 |" in md and line in md


def test_the_viewer_shows_the_rollout_and_draws_the_search_tree(tmp_path):
    from fastapi.testclient import TestClient

    from reinagent.viewer.app import create_app

    _search_and_react_runs(tmp_path)
    client = TestClient(create_app(tmp_path), base_url="http://127.0.0.1")  # a loopback Host (guard.py)
    listing = client.get("/").text
    assert re.search(r"<td class=\"nowrap\">mcts</td>", listing) and re.search(r"<td class=\"nowrap\">tot</td>", listing)
    task = client.get("/runs/mcts/tasks/1").text
    assert "rollout mcts" in task and "mcts search tree of 6 nodes, depth 2" in task
    assert task.count("data-node=") == 6 and "ul.tree" in task  # every node, with the tree's stylesheet
    assert "<script>x</script>" not in task and "&lt;script&gt;x&lt;/script&gt;" in task
    react = client.get("/runs/react/tasks/1").text
    assert "data-node=" not in react and "ul.tree" not in react and "rollout react" in react
    compare = client.get("/compare", params={"run": ["mcts", "tot"]}).text
    assert "react/none/mcts" in compare and "react/none/tot" in compare
    run_page = client.get("/runs/mcts").text
    assert "rollout mcts" in run_page and "calls were in flight" in run_page and "<td>value</td>" in run_page
