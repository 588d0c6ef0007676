"""A finished episode stays finished (issue 36, 2 and 4), in every benchmark's environment, in
Gymnasium, and on `serve-env` under both protocols (real servers on loopback).

A step after `terminated` or `truncated` is refused (EpisodeEnded in process, 409 with a JSON error
naming the reset over HTTP) instead of being judged again: a wrong `Finish` followed by
`Finish[gold]` earned 1.0 before, again and again, so a client that ignored `done` got pass@k.
And a seed-style client that never closes walks a whole split through a small session cap: an
id-less session whose episode has ended is reclaimed when the cap is reached.
"""

from __future__ import annotations

import gymnasium
import httpx
import pytest

import reinagent.service.gym  # noqa: F401 - registers the ids
from reinagent import make
from reinagent.config import RunConfig
from reinagent.env import EpisodeEnded
from tests.test_alfworld import HAVE_ALFWORLD, needs_alfworld
from tests.test_env_service import GUESS, Server, server_factory  # noqa: F401 - fixture

HOTPOT = make("hotpotqa").load_tasks("hard100")


# --- in process: every benchmark's environment ----------------------------------------------------------

def _right_and_wrong(name: str, task) -> tuple[str, str]:
    """(a right answer, a wrong one) for a task: both end the episode."""
    if name in ("humaneval", "mbpp"):
        return task.header + task.canonical, "def nothing():\n    return None\n"
    if name == "hotpotqa":
        return f"Finish[{task.answer}]", "Finish[certainly not this]"
    return f"Finish[{task.answer}]", "Finish[-123456789]"  # gsm8k, arithmetic, arithmetic20


ANSWERED = [("hotpotqa", "react"), ("hotpotqa", "cot-context"), ("gsm8k", "cot"), ("arithmetic", "cot"),
            ("arithmetic20", "cot"), ("humaneval", "coder"), ("mbpp", "coder")]


def test_every_benchmark_is_covered():
    from reinagent.benchmarks import REGISTRY

    # a new benchmark must join the cases here (remote is a client of someone else's server)
    assert {b for b, _ in ANSWERED} | {"alfworld", "remote"} == set(REGISTRY)


@pytest.mark.parametrize(("name", "agent"), ANSWERED)
def test_a_step_after_the_answer_is_refused_in_process(name, agent):
    bench = make(name)
    task = bench.load_tasks(bench.default_split)[0]
    right, wrong = _right_and_wrong(name, task)
    env = bench.make_judged_env(task, RunConfig(benchmark=name, agent=agent, split=bench.default_split))
    try:
        env.reset(seed=0)
        _, reward, terminated, truncated, _ = env.step(wrong)
        assert (reward, terminated, truncated) == (0.0, True, False)
        for _ in range(2):  # again and again: never judged
            with pytest.raises(EpisodeEnded, match="terminated; call reset"):
                env.step(right)
        env.reset(seed=0)  # a new episode takes the right answer
        _, reward, terminated, _, _ = env.step(right)
        assert (reward, terminated) == (1.0, True)
        with pytest.raises(EpisodeEnded):
            env.step(right)
    finally:
        env.close()


@pytest.mark.parametrize(("name", "agent", "idle"), [("hotpotqa", "react", "Search[nothing at all]"),
                                                     ("hotpotqa", "cot-context", "no answer here"),
                                                     ("gsm8k", "cot", "no number here"),
                                                     ("arithmetic", "cot", "no number here")])
def test_a_step_after_truncation_is_refused_in_process(name, agent, idle):
    bench = make(name)
    task = bench.load_tasks(bench.default_split)[0]
    right, _ = _right_and_wrong(name, task)
    env = bench.make_env(task, RunConfig(benchmark=name, agent=agent, split=bench.default_split, max_steps=2))
    env.reset(seed=0)
    assert env.step(idle)[2:4] == (False, False)
    assert env.step(idle)[2:4] == (False, True)  # the budget ran out
    with pytest.raises(EpisodeEnded, match="truncated"):
        env.step(right)


@needs_alfworld
@pytest.mark.timeout(600)
def test_alfworld_refuses_a_step_after_truncation():
    bench = make("alfworld")
    task = bench.load_tasks(bench.default_split)[0]
    env = bench.make_judged_env(task, RunConfig(benchmark="alfworld", max_steps=1, max_concurrency=1))
    try:
        env.reset(seed=0)
        assert env.step("look")[3] is True
        with pytest.raises(EpisodeEnded, match="truncated"):
            env.step("look")
        env.reset(seed=0)
        assert env.step("look")[3] is True  # a reset starts the next episode
    finally:
        env.close()
        bench.close()


# --- Gymnasium: every registered id, as made -------------------------------------------------------------

GYM_IDS = sorted(i for i in gymnasium.registry if i.startswith("reinagent/") and i != "reinagent/remote-v1")


@pytest.mark.parametrize("env_id", GYM_IDS)
def test_gymnasium_ids_refuse_a_step_after_the_end(env_id):
    if env_id == "reinagent/alfworld-v1" and not HAVE_ALFWORLD:
        pytest.skip("alfworld is not installed: pip install -e .[alfworld]")
    name = env_id.split("/")[1].rsplit("-v", 1)[0]
    env = gymnasium.make(env_id)
    try:
        _, info = env.reset(seed=0)
        if name == "alfworld":  # no wrong answer ends a game: play out the 50-step budget
            actions = ["look"] * 50
        else:
            task = env.unwrapped._tasks[info["task_id"]]
            actions = [_right_and_wrong(name, task)[1]]
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
        assert terminated or truncated
        with pytest.raises(EpisodeEnded):
            env.step(actions[0])
        env.reset(seed=0)
        env.step(actions[0])  # a reset starts the next one
    finally:
        env.close()


def test_remote_gymnasium_id_refuses_a_step_after_the_end(server_factory):  # noqa: F811
    server = server_factory("--benchmark", "hotpotqa")
    env = gymnasium.make("reinagent/remote-v1", url=server.url, task_id=HOTPOT[0].task_id)
    try:
        env.reset(seed=0)
        assert env.step("Finish[certainly not this]")[2] is True
        with pytest.raises(EpisodeEnded):
            env.step(f"Finish[{HOTPOT[0].answer}]")
    finally:
        env.close()


# --- serve-env, the reinagent protocol --------------------------------------------------------------------

def _refused(response: httpx.Response, *needles: str) -> str:
    assert response.status_code == 409, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert "POST /reset" in error, error
    for needle in needles:
        assert needle in error, error
    return error


@pytest.fixture(scope="module")
def hotpot_server():
    server = Server("--benchmark", "hotpotqa")
    yield server
    assert server.stop() == 0


def test_server_refuses_a_step_after_the_answer(hotpot_server):
    task = HOTPOT[3]
    sid = hotpot_server.post("/create", {"task_id": task.task_id}).json()["id"]
    hotpot_server.post("/reset", {"id": sid})
    wrong = hotpot_server.post("/step", {"id": sid, "action": "Finish[certainly not this]"}).json()
    assert (wrong["reward"], wrong["done"], wrong["terminated"]) == (0.0, True, True)
    for _ in range(2):
        _refused(hotpot_server.post("/step", {"id": sid, "action": f"Finish[{task.answer}]"}),
                 "terminated", "/create")
    assert hotpot_server.sessions() >= 1  # refused, not crashed: the session lives on
    hotpot_server.post("/reset", {"id": sid})
    assert hotpot_server.post("/step", {"id": sid, "action": f"Finish[{task.answer}]"}).json()["reward"] == 1.0
    _refused(hotpot_server.post("/step", {"id": sid, "action": f"Finish[{task.answer}]"}))
    hotpot_server.post("/close", {"id": sid})


def test_server_refuses_a_step_after_truncation(hotpot_server):
    task = HOTPOT[4]
    sid = hotpot_server.post("/create", {"task_id": task.task_id, "options": {"max_steps": 1}}).json()["id"]
    hotpot_server.post("/reset", {"id": sid})
    cut = hotpot_server.post("/step", {"id": sid, "action": "Search[nothing at all]"}).json()
    assert (cut["done"], cut["truncated"]) == (True, True)
    _refused(hotpot_server.post("/step", {"id": sid, "action": f"Finish[{task.answer}]"}), "truncated")
    hotpot_server.post("/close", {"id": sid})


def test_server_refuses_a_step_after_the_end_in_the_seed_form(hotpot_server):
    hotpot_server.post("/reset", {"idx": 7})
    assert hotpot_server.post("/step", {"idx": 7, "action": "Finish[certainly not this]"}).json()["done"] is True
    _refused(hotpot_server.post("/step", {"idx": 7, "action": f"Finish[{HOTPOT[7].answer}]"}), '{"idx": 7}')
    hotpot_server.post("/reset", {"idx": 7})
    assert hotpot_server.post("/step", {"idx": 7, "action": f"Finish[{HOTPOT[7].answer}]"}).json()["reward"] == 1.0


@pytest.mark.parametrize("name", ["gsm8k", "humaneval", GUESS])
def test_every_kind_of_env_is_refused_by_the_server(server_factory, name):  # noqa: F811
    """GSM8K and HumanEval, and an env of someone else's that would score the second answer (the
    test benchmark's GuessEnv does): the server refuses it whatever the env would do."""
    server = server_factory("--benchmark", name)
    bench = make(name) if name != GUESS else None
    task_id = server.http.get("/tasks").json()["tasks"][0]
    if bench is None:
        right, wrong = "word0", "not the word"
    else:
        right, wrong = _right_and_wrong(name, bench.task_by_id()[task_id] if name == "humaneval"
                                        else bench.load_tasks(bench.default_split)[0])
    sid = server.post("/create", {"task_id": task_id}).json()["id"]
    server.post("/reset", {"id": sid})
    first = server.post("/step", {"id": sid, "action": wrong})
    if name == GUESS:  # GuessEnv ends on a wrong guess only at its budget (5): spend it
        while not first.json()["done"]:
            first = server.post("/step", {"id": sid, "action": wrong})
    assert first.json()["done"] is True and first.json()["reward"] == 0.0
    _refused(server.post("/step", {"id": sid, "action": right}))
    server.post("/reset", {"id": sid})
    assert server.post("/step", {"id": sid, "action": right}).json()["reward"] == 1.0


@needs_alfworld
@pytest.mark.timeout(600)
def test_alfworld_server_answers_409_not_500(server_factory):  # noqa: F811
    server = server_factory("--benchmark", "alfworld")
    task_id = server.http.get("/tasks").json()["tasks"][0]
    sid = server.post("/create", {"task_id": task_id, "options": {"max_steps": 1}}).json()["id"]
    server.post("/reset", {"id": sid})
    assert server.post("/step", {"id": sid, "action": "look"}).json()["truncated"] is True
    _refused(server.post("/step", {"id": sid, "action": "look"}), "truncated")
    assert server.sessions() == 1


# --- serve-env --protocol agentgym --------------------------------------------------------------------------

def test_agentgym_score_never_passes_one(server_factory):  # noqa: F811
    server = server_factory("--benchmark", "hotpotqa", "--protocol", "agentgym")
    task = HOTPOT[3]
    env_id = server.http.post("/create").json()["id"]
    assert server.post("/reset", {"id": env_id, "data_idx": 3}).json()["done"] is False
    wrong = server.post("/step", {"id": env_id, "action": "Finish[certainly not this]"}).json()
    assert (wrong["reward"], wrong["score"], wrong["done"]) == (0.0, 0.0, True)
    for _ in range(2):
        _refused(server.post("/step", {"id": env_id, "action": f"Finish[{task.answer}]"}), "data_idx", "/create")
    assert server.http.get(f"/observation?id={env_id}").json()["score"] == 0.0
    server.post("/reset", {"id": env_id, "data_idx": 3})
    right = server.post("/step", {"id": env_id, "action": f"Finish[{task.answer}]"}).json()
    assert (right["reward"], right["score"], right["done"]) == (1.0, 1.0, True)
    _refused(server.post("/step", {"id": env_id, "action": f"Finish[{task.answer}]"}))
    assert server.http.get(f"/observation?id={env_id}").json()["score"] == 1.0  # was 2.0 after two right answers
    assert server.post("/close", {"id": env_id}).json() == {"closed": True}


@needs_alfworld
@pytest.mark.timeout(600)
def test_agentgym_alfworld_answers_409_not_500(server_factory):  # noqa: F811
    server = server_factory("--benchmark", "alfworld", "--protocol", "agentgym")
    env_id = server.http.post("/create").json()["id"]
    server.post("/reset", {"id": env_id, "data_idx": 0})
    done = False
    for _ in range(50):  # ALFWorld's budget: no wrong answer ends a game sooner
        done = server.post("/step", {"id": env_id, "action": "look"}).json()["done"]
        if done:
            break
    assert done
    _refused(server.post("/step", {"id": env_id, "action": "look"}))


# --- the seed client over a whole split -------------------------------------------------------------------

def test_a_seed_client_that_never_closes_walks_a_whole_split(server_factory):  # noqa: F811
    """The seed's loop (reset idx, step until done, next idx; never /close) over all 100 tasks of a
    split, through a server that holds at most 4 sessions: each idx gets its task and its reward."""
    server = server_factory("--benchmark", "hotpotqa", "--max-sessions", "4")
    rewards = []
    for idx, task in enumerate(HOTPOT):
        first = server.post("/reset", {"idx": idx})
        assert first.status_code == 200, (idx, first.text)
        assert first.json()["observation"] == f"Question: {task.question}"
        step = server.post("/step", {"idx": idx, "action": f"Finish[{task.answer}]"})
        assert step.status_code == 200, (idx, step.text)
        rewards.append(step.json()["reward"])
        assert server.sessions() <= 4
    assert rewards == [1.0] * len(HOTPOT)
    # an early idx, its session long reclaimed: still "ended", not a session that never was
    _refused(server.post("/step", {"idx": 0, "action": f"Finish[{HOTPOT[0].answer}]"}), "reclaimed", '{"idx": 0}')
    assert server.post("/reset", {"idx": 0}).status_code == 200  # and it can be played again


def test_only_finished_id_less_sessions_are_reclaimed(server_factory):  # noqa: F811
    server = server_factory("--benchmark", "hotpotqa", "--max-sessions", "2")
    playing = server.post("/reset", {"idx": 0})  # mid-episode: must survive
    assert server.post("/step", {"idx": 0, "action": "Search[nothing at all]"}).json()["done"] is False
    for idx in (1, 2, 3):  # each finished one makes room for the next
        assert server.post("/reset", {"idx": idx}).status_code == 200, idx
        assert server.post("/step", {"idx": idx, "action": "Finish[x]"}).json()["done"] is True
    assert server.post("/reset", {"idx": 4}).status_code == 200
    full = server.post("/reset", {"idx": 5})  # idx 0 and 4 are both mid-episode: no room
    assert full.status_code == 503 and full.headers["retry-after"]
    # the mid-episode session of idx 0 was never taken: its episode goes on
    assert server.post("/step", {"idx": 0, "action": f"Finish[{HOTPOT[0].answer}]"}).json()["reward"] == 1.0
    assert playing.status_code == 200
    # /create takes a finished id-less session's room too (idx 0's, now)
    made = server.post("/create", {"task_id": HOTPOT[9].task_id})
    assert made.status_code == 200, made.text
    sid = made.json()["id"]
    assert server.post("/step", {"id": sid, "action": "Finish[x]"}).json()["done"] is True
    # but a finished session a client holds by id is never taken: its client may reset it
    assert server.post("/reset", {"idx": 6}).status_code == 503
    assert server.post("/reset", {"id": sid}).status_code == 200


def test_check_env_wants_a_step_after_the_end_refused(server_factory):  # noqa: F811
    from tests.conftest import run_cli

    server = server_factory("--benchmark", GUESS)
    out = run_cli("check-env", server.url, "--action", "word0")  # the right guess ends the episode
    assert out.returncode == 0 and "PASS step" in out.stdout.splitlines(), out.stdout + out.stderr


def test_agentgym_refuses_for_an_env_that_would_play_on(server_factory):  # noqa: F811
    """The test benchmark's GuessEnv takes steps after its end; the agentgym server does not."""
    server = server_factory("--benchmark", GUESS, "--protocol", "agentgym")
    env_id = server.http.post("/create").json()["id"]
    server.post("/reset", {"id": env_id, "data_idx": 0})
    done = False
    while not done:  # five wrong guesses spend the budget
        done = server.post("/step", {"id": env_id, "action": "not the word"}).json()["done"]
    _refused(server.post("/step", {"id": env_id, "action": "word0"}), "truncated")
    assert server.http.get(f"/observation?id={env_id}").json()["score"] == 0.0
