"""HotpotQA data, the docstore environment and SQuAD-style evaluation."""

from reinagent import make
from reinagent.benchmarks.hotpotqa import DocstoreEnv, exact_match, f1_score, normalize_answer
from reinagent.env import check_env


def test_splits_and_order():
    bench = make("hotpotqa-v1")
    hard = bench.load_tasks("hard100")
    assert len(hard) == 100 and hard[0].task_id == "5a7613c15542994ccc9186bf"
    dev = bench.load_tasks("dev-first100")
    assert len(dev) == 98 and not {t.task_id for t in hard} & {t.task_id for t in dev}
    assert len(bench.load_tasks("dev-qa7405")) == 7405
    assert all(len(t.titles) == 10 for t in hard)


def test_squad_normalisation():
    assert normalize_answer("The  Beatles!") == "beatles"
    assert exact_match("the Gesellschaft mit beschränkter Haftung.", "Gesellschaft mit beschränkter Haftung")
    assert not exact_match(None, "yes")
    assert f1_score("yes", "no") == 0.0
    assert 0 < f1_score("New York City", "Greenwich Village, New York City") < 1


def test_docstore_search_lookup_finish():
    task = make("hotpotqa").load_tasks("hard100")[0]
    env = DocstoreEnv(task, max_steps=8)
    obs, _ = env.reset()
    assert task.question in obs
    page, *_ = env.step("Search[VIVA Media]")
    assert page.startswith('VIVA Media GmbH (until 2004 "VIVA Media AG") is a music television network')
    # A near miss (difflib ratio >= 0.85 to a title) opens that page; anything further off lists
    # the closest titles instead.
    assert env.step("Search[Viva Medya]")[0] == page
    assert env.step("Search[nothing]")[0] == (
        "Could not find [nothing]. Similar: ['Constantin Medien', 'Qontis', 'John M. Keller', 'VIVA Poland', "
        "'ProSiebenSat.1 Media']."
    )
    env.step("Search[VIVA Media]")
    obs, *_ = env.step("Lookup[2004]")
    assert obs.startswith("(Result 1 /")
    obs, *_ = env.step("Jump[x]")
    assert obs.startswith("Invalid action. Valid actions are Search[<topic>], Lookup[<keyword>] and Finish[<answer>]")
    obs, reward, terminated, truncated, info = env.step(f"Finish[{task.answer}]")
    assert terminated and reward == 1.0 and info["answer"] == task.answer


def test_step_budget_truncates():
    task = make("hotpotqa").load_tasks("hard100")[1]
    env = DocstoreEnv(task, max_steps=2)
    env.reset()
    assert env.step("Search[nothing]")[3] is False
    assert env.step("Search[nothing]")[3] is True


def test_env_checker_passes_for_hotpotqa_envs():
    bench = make("hotpotqa")
    from reinagent.config import RunConfig

    task = bench.load_tasks("hard100")[0]
    for agent in bench.agents:
        env = bench.make_env(task, RunConfig(agent=agent, split="hard100"))
        check_env(env, ["Search[VIVA Media]", "Lookup[name]", "Finish[x]"])


def test_success_is_the_official_em_on_the_answer_as_given():
    # The official script removes string.punctuation (ASCII) only: “X” is not X. Success, reward and
    # the recorded answer follow it; the lenient variant is a separate field.
    import asyncio

    from reinagent.benchmarks.hotpotqa import AnswerEnv, lenient_match
    from reinagent.config import RunConfig
    from reinagent.records import Trajectory

    bench = make("hotpotqa")
    task = bench.load_tasks("hard100")[0]
    for env in (DocstoreEnv(task, max_steps=4), AnswerEnv(task, max_steps=1)):
        env.reset()
        *_, reward, terminated, _, info = env.step(f"Finish[“{task.answer}”]")
        assert terminated and reward == 0.0 and info["answer"] == f"“{task.answer}”"
        env.reset()
        assert env.step(f'Finish["{task.answer}"]')[1] == 1.0  # ASCII quotes are punctuation: removed
    assert not exact_match(f"“{task.answer}”", task.answer) and lenient_match(f"“{task.answer}”", task.answer)
    config = RunConfig(benchmark="hotpotqa")
    curly = asyncio.run(bench.evaluate(task, Trajectory(answer=f"‘{task.answer}’"), config))
    assert not curly.success and curly.reward == 0.0 and curly.detail["em_lenient"] is True
    plain = asyncio.run(bench.evaluate(task, Trajectory(answer=task.answer), config))
    assert plain.success and plain.detail["em_lenient"] is True


def test_agents_send_the_answer_as_given():
    # the ReAct/CoT loops step the env with str(parsed action): it must keep the quotes of a Finish
    from reinagent.agents.parsing import parse_output

    _, action = parse_output("Thought: done.\nAction: Finish[“Paris”]", ("search", "lookup", "finish"))
    assert action.argument == "Paris" and str(action) == "Finish[“Paris”]"
