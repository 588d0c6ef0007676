"""ALFWorld: data, the worker-process environment, process clean-up, agents, end-to-end runs.

Tests that play real games are marked `alfworld` (they need the alfworld extra); they are part
of the default run. The one on the embedded model is also `slow`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from reinagent.agents.alfworld_react import is_loop, match_admissible, parse_move, render_trace
from reinagent.records import Step, Trajectory
from tests.conftest import CLI, ROOT, run_cli

HAVE_ALFWORLD = importlib.util.find_spec("alfworld") is not None and importlib.util.find_spec("textworld") is not None
_skip = pytest.mark.skipif(not HAVE_ALFWORLD, reason="alfworld is not installed: pip install -e .[alfworld]")


def needs_alfworld(test):
    """Plays real games: marked `alfworld`, skipped with the reason when the extra is missing."""
    return pytest.mark.alfworld(_skip(test))


FIRST_TASK = "examine the alarmclock with the desklamp"  # valid_unseen games 1 and 2 (sorted)


def _alive(pid: int) -> bool:
    """True while a process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _wait_until(condition, what: str, timeout_s: float = 60.0) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout_s` (a deadline for a
    broken machine, not a figure: a healthy one gets there in milliseconds)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting after {timeout_s:.0f} s: {what}"
        time.sleep(0.05)


def _workers_of(pid: int) -> list[int]:
    """Worker processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid and b"alfworld_worker" in cmd:
                found.append(int(entry.name))
    return found


# --- parsing and loops (no engine needed) ------------------------------------------------------

ADMISSIBLE = ["go to desk 1", "take mug 1 from desk 1", "put mug 1 in/on shelf 2", "look"]


@pytest.mark.parametrize("output, kind, text", [
    ("go to desk 1", "command", "go to desk 1"),
    ("> go to desk 1\nYou arrive at the desk.", "command", "go to desk 1"),
    ("**Action:** `Go to desk 1.`", "command", "go to desk 1"),
    ('Action 3: "take mug 1 from desk 1"', "command", "take mug 1 from desk 1"),
    ("put mug 1 on shelf 2", "command", "put mug 1 in/on shelf 2"),
    ("put the mug 1 in shelf 2", "command", "put mug 1 in/on shelf 2"),
    ("> think: I need a mug.", "think", "I need a mug."),
    ("Thought: the mug is on the desk", "think", "the mug is on the desk"),
    ("\n\n  \n", "empty", ""),
    ("fly to the moon", "command", "fly to the moon"),
])
def test_parse_move_is_tolerant(output, kind, text):
    move = parse_move(output, ADMISSIBLE)
    assert (move.kind, move.text) == (kind, text)


def test_match_admissible_leaves_unknown_commands_alone():
    assert match_admissible("go to desk 9", ADMISSIBLE) == "go to desk 9"


def test_loop_detection():
    assert is_loop(["look", "go to desk 1", "go to desk 1", "go to desk 1"])
    assert is_loop(["a", "b", "a", "b", "a", "b"])
    assert not is_loop(["a", "b", "a", "b", "a"])
    assert not is_loop(["go to desk 1", "go to desk 2", "go to desk 3"])


def test_render_trace_reads_like_the_game_log():
    traj = Trajectory(end_reason="loop", extra={"task": "Your task is to: x."})
    traj.steps = [Step(prompt_len=2, output="think: hm", thought="hm", observation="OK."),
                  Step(prompt_len=4, output="look", action="look", observation="You see nothing.")]
    assert render_trace(traj) == ("Your task is to: x.\n> think: hm\nOK.\n> look\nYou see nothing.\n"
                                  "STATUS: FAIL (stopped: the same action was repeated in a loop)")


def test_demonstrations_cover_six_types_from_training_games():
    from reinagent.benchmarks.alfworld_data import TASK_TYPES
    from reinagent.agents.prompts.alfworld import DEMO_DIR, demonstration

    sources = json.loads((DEMO_DIR / "sources.json").read_text())
    assert set(sources) == set(TASK_TYPES.values())
    assert all(src.startswith("valid_train/") for src in sources.values())
    for kind in sources:
        demo = demonstration(kind)
        assert "Your task is to:" in demo and "> think:" in demo and "\nOK.\n" in demo


# --- data and tasks ------------------------------------------------------------------------------

def test_unpack_is_atomic_and_complete(tmp_path, monkeypatch):
    from reinagent.benchmarks import alfworld_data as data

    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    monkeypatch.setenv("REINAGENT_CACHE_DIR", str(tmp_path))
    root = data.data_dir()
    assert root == tmp_path / "alfworld_data" and (root / "logic" / "alfred.pddl").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".alfworld-unpack-")]
    assert {s: len(data.list_games(root, s)) for s in data.SPLITS} == data.SPLITS
    assert data.ensure_unpacked() == root  # second call: nothing to do


def test_bad_data_folder_is_a_clear_error(tmp_path, monkeypatch):
    from reinagent.benchmarks import alfworld_data as data
    from reinagent.errors import ConfigError

    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(ConfigError, match="ALFWORLD_DATA"):
        data.data_dir()
    with pytest.raises(ConfigError, match="valid: valid_unseen, valid_seen or valid_train"):
        data.list_games(tmp_path, "train")


def test_tasks_in_stable_order():
    from reinagent import make

    bench = make("alfworld-v1")
    tasks = bench.load_tasks("valid_unseen")
    assert len(tasks) == 134 and [t.task_id for t in tasks] == sorted(t.task_id for t in tasks)
    assert tasks[0].task_id == "look_at_obj_in_light-AlarmClock-None-DeskLamp-308/trial_T20190908_222917_366542"
    assert {t.kind for t in tasks} == {"put", "clean", "heat", "cool", "examine", "puttwo"}
    unseen = {t.task_id for t in tasks}
    assert not unseen & {t.task_id for t in bench.load_tasks("valid_train")}
    assert len(bench.load_tasks("valid_seen")) == 140


def test_success_is_read_from_won_not_from_the_end():
    from reinagent import make
    from reinagent.config import RunConfig

    bench = make("alfworld")
    task = bench.load_tasks("valid_unseen")[0]
    config = RunConfig(benchmark="alfworld")
    finished = Trajectory(end_reason="finished", extra={"won": False})
    assert not asyncio.run(bench.evaluate(task, finished, config)).success
    won = asyncio.run(bench.evaluate(task, Trajectory(end_reason="won", extra={"won": True}), config))
    assert won.success and won.reward == 1.0 and won.detail["won"] is True


# --- the environment on real games ---------------------------------------------------------------

@pytest.fixture
def pool():
    from reinagent.benchmarks.alfworld_env import WorkerPool

    pool = WorkerPool(2)
    yield pool
    pids = pool.pids
    pool.close()
    assert not [pid for pid in pids if _alive(pid)], "workers left behind"


def _env(pool, index=0, **kwargs):
    from reinagent import make
    from reinagent.benchmarks.alfworld_env import ALFWorldEnv

    bench = make("alfworld")
    task = bench.load_tasks("valid_unseen")[index]
    return ALFWorldEnv(pool, bench.root / task.game, game_id=task.task_id, **kwargs)


@needs_alfworld
def test_reset_admissible_and_expert_plan_wins(pool):
    from reinagent.env import check_env

    expert = _env(pool, expert="planner")
    obs, info = expert.reset()
    assert obs.startswith("You are in the middle of a room.") and f"Your task is to: {FIRST_TASK}." in obs
    assert "Welcome" not in obs and {"look", "inventory", "go to desk 1"} <= set(info["admissible_commands"])
    plan = list(info["expert_plan"])
    assert plan and not info["won"]
    expert.close()

    env = _env(pool)  # no expert: the plan found above, sent as plain commands
    obs, info = env.reset()
    assert "expert_plan" not in info
    obs, reward, terminated, truncated, info = env.step("fly to the moon")
    assert obs == "Nothing happens." and not terminated and info["steps"] == 1
    for i, command in enumerate(plan):
        obs, reward, terminated, truncated, info = env.step(command)
        assert not obs.startswith("You arrive at loc")
        assert terminated == (i == len(plan) - 1)
    assert info["won"] and reward == 1.0 and not truncated
    with pytest.raises(RuntimeError, match="the episode has terminated; call reset"):
        env.step("look")
    env.reset()  # a second episode on the same worker starts afresh
    check_env(env, ["look", "inventory"])



@needs_alfworld
def test_step_budget_is_truncation(pool):
    env = _env(pool, max_steps=3)
    env.reset()
    assert env.step("look")[2:4] == (False, False)
    assert env.step("inventory")[2:4] == (False, False)
    obs, reward, terminated, truncated, info = env.step("look")
    assert truncated and not terminated and reward == 0.0 and not info["won"]
    env.close()


# --- process clean-up -----------------------------------------------------------------------------

@needs_alfworld
def test_workers_are_reused_and_closed(pool):
    first = _env(pool)
    first.reset()
    pid = first.worker_pid
    first.close()
    second = _env(pool, index=2)
    second.reset()
    assert second.worker_pid == pid  # the pooled worker loads the next game
    second.close()
    pool.close()
    assert not _alive(pid) and pool.pids == []


def test_worker_counts_from_the_environment_are_checked(monkeypatch):
    from reinagent.benchmarks.alfworld_env import default_games_per_worker, default_workers
    from reinagent.errors import ConfigError

    monkeypatch.setenv("REINAGENT_ALFWORLD_GAMES_PER_WORKER", "3")
    assert default_games_per_worker() == 3
    for name, read in (("REINAGENT_ALFWORLD_GAMES_PER_WORKER", default_games_per_worker),
                       ("REINAGENT_ALFWORLD_WORKERS", default_workers)):
        monkeypatch.setenv(name, "many")
        with pytest.raises(ConfigError, match=name):
            read()


@needs_alfworld
def test_a_worker_is_retired_after_its_games():
    """A worker's memory grows with the games it loads: after games_per_worker episodes it is
    stopped and the next episode gets a fresh process."""
    from reinagent.benchmarks.alfworld_env import WorkerPool

    pool = WorkerPool(1, games_per_worker=2)
    try:
        pids = []
        for index in range(3):
            env = _env(pool, index=index)
            env.reset()
            pids.append(env.worker_pid)
            env.close()
        assert pids[0] == pids[1] != pids[2]
        assert not _alive(pids[0]) and pool.pids == [pids[2]]
    finally:
        pool.close()


@needs_alfworld
def test_a_crashed_episode_leaves_nothing_behind(pool):
    from reinagent.benchmarks.alfworld_env import WorkerError

    doomed, healthy = _env(pool), _env(pool, index=2)
    doomed.reset()
    healthy.reset()
    pid = doomed.worker_pid
    os.kill(pid, signal.SIGKILL)  # the engine dies mid-episode
    with pytest.raises(WorkerError, match="died"):
        doomed.step("look")
    doomed.close()
    assert not _alive(pid) and pid not in pool.pids
    assert healthy.step("look")[0]  # the other episode carries on
    healthy.close()
    again = _env(pool)
    assert again.reset()[0].startswith("You are in the middle")  # a fresh worker replaces it
    again.close()


@needs_alfworld
def test_cancelled_episode_releases_its_worker(pool):
    """What Ctrl-C does inside the runner: the episode's task is cancelled mid-step."""
    from reinagent.env import aclose, areset, astep

    env = _env(pool)

    async def episode():
        await areset(env)
        while True:
            await astep(env, "look")

    async def main():
        task = asyncio.create_task(episode())
        deadline = time.monotonic() + 120
        while env.worker_pid is None or env._episode.steps < 2:
            assert time.monotonic() < deadline and not task.done(), "the episode never took two steps"
            await asyncio.sleep(0.01)
        pid = env.worker_pid
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await aclose(env)
        return pid

    pid = asyncio.run(main())
    pool.close()
    assert not _alive(pid)  # close() waits for (and reaps) every worker: no grace period needed


@needs_alfworld
def test_workers_exit_when_the_parent_is_killed(tmp_path):
    """A run killed with SIGKILL runs no clean-up at all: its workers must still go away."""
    code = (
        "import os, sys\n"
        "from tests.test_alfworld import _env\n"
        "from reinagent.benchmarks.alfworld_env import WorkerPool\n"
        "env = _env(WorkerPool(1)); env.reset()\n"
        "print(env.worker_pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    assert _alive(pid)
    proc.kill()
    proc.wait()
    _wait_until(lambda: not _alive(pid), "the worker outlived its killed parent")


def _script(path: Path, rules: list[dict], default: str = "look") -> str:
    path.write_text(yaml.safe_dump({"rules": rules, "default": default}))
    return f"scripted:{path}"


def _sigint_as_from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@needs_alfworld
def test_ctrl_c_on_a_run_leaves_no_workers(tmp_path):
    # The model server holds every request, so at the interrupt both episodes are certainly in
    # flight with their workers alive, however fast or slow the machine is.
    from reinagent.llm.fake_server import FakeOpenAIServer

    release = threading.Event()
    arrived = threading.Semaphore(0)

    def held(messages):
        arrived.release()
        release.wait(300)
        return "look"

    with FakeOpenAIServer(reply=held) as server:
        proc = subprocess.Popen(
            [*CLI, "run", "--benchmark", "alfworld", "--num-envs", "4", "--num-trials", "1", "--model", "openai/fake",
             "--base-url", server.base_url, "--max-concurrency", "2", "--run-dir", str(tmp_path / "run"),
             "--no-cache", "--quiet"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread's stack
            # A run started from a terminal takes Ctrl-C. A suite started in the background by a
            # shell without job control (`nohup ... &`, some CI runners) inherits SIGINT *ignored*,
            # exec keeps that, and the run would rightly never see the interrupt: start the run as
            # a terminal would, whatever this process inherited.
            preexec_fn=_sigint_as_from_a_terminal,
        )
        try:
            for _ in range(2):  # both episodes have reset their game and asked the model
                assert arrived.acquire(timeout=180), "the run never asked the model"
            workers = _workers_of(proc.pid)
            assert len(workers) == 2, workers
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
            try:
                _, stderr = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGABRT)  # where it hangs, for the failure message
                pytest.fail("the interrupted run did not exit:\n" + proc.communicate(timeout=60)[1][-6000:])
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130 and "interrupted" in stderr, stderr
    _wait_until(lambda: not [pid for pid in workers if _alive(pid)], "workers outlived the interrupted run")


# --- end to end -------------------------------------------------------------------------------------

def _records(run_dir: Path):
    from reinagent.runner import load_run

    return sorted(load_run(run_dir)[1], key=lambda r: (r.trial, r.task_id))


@needs_alfworld
def test_scripted_reflexion_run_on_two_games(tmp_path):
    """Trial 1 looks on the wrong desk and loops; the reflection says where to look; trial 2 wins."""
    model = _script(tmp_path / "actor.yaml", [
        {"when": "Your failed attempt:", "reply": "LESSON-DESK2: the alarmclock is not on desk 1; look on desk 2."},
        {"when": "LESSON-DESK2", "reply": ["think: My lesson says the alarmclock is on desk 2.", "go to desk 2",
                                            "take alarmclock 1 from desk 2", "go to desk 1", "use desklamp 1"]},
        {"when": "Your task is to", "reply": ["go to desk 1", "Action: take alarmclock 1 from desk 1"]},
    ])
    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "alfworld", "--agent", "react", "--strategy", "reflexion",
                   "--num-envs", "2", "--num-trials", "2", "--model", model, "--run-dir", str(run_dir),
                   "--no-cache", "--quiet", timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = _records(run_dir)
    assert [(r.trial, r.success) for r in records] == [(1, False), (1, False), (2, True), (2, True)]
    for rec in records[:2]:
        traj = rec.trajectory
        assert traj.end_reason == "loop" and rec.evaluation["won"] is False
        assert [s.observation for s in traj.steps[1:]] == ["Nothing happens."] * 3
        assert rec.reflection.startswith("LESSON-DESK2")
    for rec in records[2:]:
        assert rec.memory == [records[0].reflection] and rec.error is None
        assert rec.trajectory.end_reason == "won" and rec.trajectory.steps[0].observation == "OK."
        assert "LESSON-DESK2" in rec.trajectory.messages[1].content  # memory reached the prompt
        assert rec.trajectory.extra["env_steps"] == 4
    report = json.loads(run_cli("report", str(run_dir), "--format", "json").stdout)
    assert report["num_tasks"] == 2


@needs_alfworld
def test_expert_agent_wins(tmp_path):
    run_dir = tmp_path / "expert"
    proc = run_cli("run", "--benchmark", "alfworld", "--agent", "alfworld-expert", "--num-envs", "3",
                   "--num-trials", "1", "--run-dir", str(run_dir), "--quiet", timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = _records(run_dir)
    assert len(records) == 3 and all(r.success and r.trajectory.end_reason == "won" for r in records)
    assert all(not r.trajectory.calls for r in records)  # no model calls


@needs_alfworld
@pytest.mark.slow
def test_embedded_model_run_on_two_games(tmp_path):
    run_dir = tmp_path / "local"
    proc = run_cli("run", "--benchmark", "alfworld", "--agent", "react", "--strategy", "reflexion",
                   "--num-envs", "2", "--num-trials", "2", "--max-steps", "3", "--max-tokens", "24", "--model", "local",
                   "--run-dir", str(run_dir), "--no-cache", "--quiet", timeout=900)
    assert proc.returncode == 0, proc.stderr
    records = _records(run_dir)
    trial1 = [r for r in records if r.trial == 1]
    assert len(trial1) == 2
    # exactly the games lost in trial 1 are played again
    assert sorted(r.task_id for r in records if r.trial == 2) == sorted(r.task_id for r in trial1 if not r.success)
    for rec in records:
        assert rec.error is None, rec.error
        assert rec.trajectory.steps and rec.trajectory.end_reason in ("won", "step_budget", "loop")
        assert rec.success == (rec.trajectory.end_reason == "won") == rec.evaluation["won"]
        assert rec.trajectory.calls[0].prompt_tokens > 300
        if rec.trial == 1 and not rec.success:
            # the Reflector was asked and its reply recorded; the 135M model's reply can hold nothing
            # of its own (e.g. the label alone), which is recorded as empty and adds no lesson
            assert rec.reflection_calls and rec.reflection_raw is not None
            retry = next(r for r in records if r.trial == 2 and r.task_id == rec.task_id)
            assert retry.memory == ([rec.reflection] if rec.reflection else [])
