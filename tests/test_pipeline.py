"""No trial barrier (issue 17 §1): a task starts its next trial as soon as its own record is durable,
the records equal the barrier schedule's, the per-trial lines stay, and a trial whose every episode
errored still stops the run. Concurrency is driven step by step through a loopback model server
whose replies wait on events the test sets; nothing here depends on timing."""

from __future__ import annotations

import re
import threading
import time

import pytest

from reinagent import run
from reinagent.llm.fake_server import FakeOpenAIServer, default_reply
from reinagent.runner import load_run
from reinagent.store import read_log

VIVA = "VIVA Media AG"  # task A: the first task of hard100
BANDS = "Jonny Craig and Pete Doherty"  # task B: the second
LESSON = "I answered too fast; next time I will read the paragraph."
WRONG = "Thought: x\nAction: Finish[wrong]"
RIGHT = "Thought: the paragraph says so.\nAction: Finish[Gesellschaft mit beschränkter Haftung]"
REFLECTION = default_reply([{"content": "failed attempt"}])


def _wait_until(predicate, what, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _comparable(records) -> dict:
    """What a run decided, per (task, trial): everything but timestamps and latencies."""
    return {
        (r.task_id, r.trial): {
            "prompts": [[m.model_dump() for m in r.trajectory.prompt_of(s)] for s in r.trajectory.steps],
            "outputs": [s.output for s in r.trajectory.steps], "reflection": r.reflection,
            "reflection_calls": len(r.reflection_calls), "memory": r.memory, "success": r.success,
            "answer": r.answer, "error": r.error,
        }
        for r in records
    }


def _text(body) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def _run(tmp_path, name, schedule, trials=4, envs=3, **kw):
    return run(benchmark="hotpotqa", agent="cot-context", num_trials=trials, num_envs=envs, run_dir=str(tmp_path / name),
               cache=False, progress=False, schedule=schedule, **kw)


@pytest.mark.parametrize("strategy", ["reflexion", "last_attempt_and_reflexion"])
def test_pipeline_records_equal_the_barrier_schedules(tmp_path, script, capsys, strategy):
    # Task A is solved once it has been told the lesson twice (trial 3); the others never are.
    learner = script([{"when": "Your failed attempt", "reply": LESSON},
                      {"when": f"(?s)^(?=.*{re.escape(VIVA)})(?=.*{re.escape(LESSON)}.*{re.escape(LESSON)})",
                       "reply": RIGHT}], default=WRONG)
    barrier = _comparable(load_run(_run(tmp_path, "barrier", "barrier", model=learner, strategy=strategy))[1])
    capsys.readouterr()
    pipeline = _comparable(load_run(_run(tmp_path, "pipeline", "pipeline", model=learner, strategy=strategy))[1])
    lines = [line for line in capsys.readouterr().err.splitlines() if re.match(r"trial \d+/4:", line)]
    assert pipeline == barrier
    assert ("5a7613c15542994ccc9186bf", 3) in pipeline and pipeline[("5a7613c15542994ccc9186bf", 3)]["success"]
    assert ("5a7613c15542994ccc9186bf", 4) not in pipeline  # solved: its chain stopped
    assert [line.split(":")[0] for line in lines] == ["trial 1/4", "trial 2/4", "trial 3/4", "trial 4/4"]
    assert "attempted 3, solved 0" in lines[0] and "attempted 3, solved 1" in lines[2]
    assert "attempted 2, solved 0" in lines[3]


def test_a_task_starts_its_next_trial_while_another_is_still_in_its_first(tmp_path):
    release_b = threading.Event()
    a_in_trial_2 = threading.Event()

    def hold(body):
        text = _text(body)
        if BANDS in text:
            release_b.wait(120)  # task B stays in trial 1 until the test says so
        elif VIVA in text and REFLECTION.split(".")[0] in text and "failed attempt" not in text.lower():
            a_in_trial_2.set()  # task A's actor prompt carries its trial-1 reflection
        return None

    server = FakeOpenAIServer(fault_when=hold)
    box: dict = {}
    with server:
        worker = threading.Thread(target=lambda: box.setdefault("dir", _run(
            tmp_path, "r", "pipeline", trials=3, envs=2, model="openai/fake", base_url=server.base_url)))
        worker.start()
        try:
            _wait_until(a_in_trial_2.is_set, "task A's trial-2 model call")
            # A's trial 1 is durable; B has recorded nothing: it is still in trial 1.
            durable = [(e.task_id, e.trial) for e in read_log(tmp_path / "r")]
            assert ("5a7613c15542994ccc9186bf", 1) in durable
            assert not any(task_id == "5adf2fa35542993344016c11" for task_id, _ in durable)
        finally:
            release_b.set()
            worker.join(300)
    assert not worker.is_alive()
    records = load_run(box["dir"])[1]
    assert sorted((r.task_id[:4], r.trial) for r in records) == [
        ("5a76", 1), ("5a76", 2), ("5a76", 3), ("5adf", 1), ("5adf", 2), ("5adf", 3)]
    assert all(r.error is None for r in records)


def test_concurrency_stays_bounded_by_max_concurrency(tmp_path):
    """Chains waiting for their next trial hold no slot; running episodes never exceed the limit."""
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def count(_body):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        return None

    server = FakeOpenAIServer(fault_when=count, latency_s=0.01)
    original = server.reply

    def reply(messages):  # called once per answered request, after `count`
        with lock:
            state["now"] -= 1
        return original(messages)

    server.reply = reply
    with server:
        run_dir = _run(tmp_path, "r", "pipeline", trials=3, envs=5, model="openai/fake", base_url=server.base_url,
                       max_concurrency=2)
    assert state["peak"] <= 2
    assert len(load_run(run_dir)[1]) == 15


def test_a_trial_of_only_errors_stops_the_run(tmp_path, capsys):
    with FakeOpenAIServer(faults={n: "400" for n in range(1, 100)}) as server:
        run_dir = _run(tmp_path, "r", "pipeline", trials=3, envs=3, model="openai/fake", base_url=server.base_url)
    records = load_run(run_dir)[1]
    assert sorted(r.trial for r in records) == [1, 1, 1] and all(r.error for r in records)
    err = capsys.readouterr().err
    assert "trial 1: every episode ended in an error" in err and "not starting trial 2" in err
    assert "trial 2/3" not in err


def test_a_task_waits_for_one_good_episode_of_the_trial_before_going_on(tmp_path):
    """Task A errors at once in trial 1 while B is held: A may not start trial 2 until some episode
    of trial 1 ended without an error (else trial 1 might end all errors, which stops the run).
    B is let go when A's trial-2 call arrives (the bug: then the order check fails) or a grace
    period after A's trial-1 record; the grace only gives a bug the chance to show, the verdict is
    the order of the server's requests, never a duration."""
    release_b, a_again = threading.Event(), threading.Event()

    def fault(body):
        text = _text(body)
        if BANDS in text:
            release_b.wait(120)
            return None
        if VIVA in text:
            if a_first.is_set():
                a_again.set()
            a_first.set()
            return "400"
        return None

    a_first = threading.Event()
    server = FakeOpenAIServer(fault_when=fault)
    box: dict = {}
    with server:
        worker = threading.Thread(target=lambda: box.setdefault("dir", _run(
            tmp_path, "r", "pipeline", trials=2, envs=2, model="openai/fake", base_url=server.base_url)))
        worker.start()
        try:
            _wait_until(lambda: any(e.task_id.startswith("5a76") for e in read_log(tmp_path / "r")),
                        "task A's errored trial-1 record")
            a_again.wait(3.0)
        finally:
            release_b.set()
            worker.join(300)
        bodies, timings = list(server.requests), list(server.timings)
    records = {(r.task_id[:4], r.trial): r for r in load_run(box["dir"])[1]}
    assert set(records) == {("5a76", 1), ("5a76", 2), ("5adf", 1), ("5adf", 2)}
    assert records[("5a76", 1)].error and records[("5adf", 1)].error is None
    # A's trial-2 call came in only after B's trial-1 actor call was answered.
    viva = [i for i, b in enumerate(bodies) if VIVA in _text(b)]
    bands_first = next(i for i, b in enumerate(bodies) if BANDS in _text(b))
    assert timings[viva[-1]][0] >= timings[bands_first][1]


def test_barrier_and_pipeline_agree_when_one_task_always_errors(tmp_path):
    def fault(body):
        return "400" if VIVA in _text(body) else None

    with FakeOpenAIServer(fault_when=fault) as server:
        kw = dict(trials=3, envs=3, model="openai/fake", base_url=server.base_url)
        barrier = _comparable(load_run(_run(tmp_path, "b", "barrier", **kw))[1])
        pipeline = _comparable(load_run(_run(tmp_path, "p", "pipeline", **kw))[1])
    assert pipeline == barrier
    assert len(pipeline) == 9 and sum(1 for v in pipeline.values() if v["error"]) == 3


def test_a_retry_goes_ahead_of_a_new_tasks_first_trial(tmp_path):
    """With one slot the pipeline runs a task's trials back to back (the reference programming loop's order):
    A1 A2 B1 B2 C1 C2. A first-come queue gave A1 B1 C1 A2 B2 C2: every retry behind every first
    trial, which left a 32-slot HumanEval run's retries to its last minutes, few calls in flight."""
    with FakeOpenAIServer() as server:  # the default reply never answers right: every trial fails
        run_dir = _run(tmp_path, "r", "pipeline", trials=2, envs=3, model="openai/fake", base_url=server.base_url,
                       max_concurrency=1)
    records = sorted(load_run(run_dir)[1], key=lambda r: r.started_at)
    order = [r.task_id for r in records[::2]]
    assert [(r.task_id, r.trial) for r in records] == [(t, k) for t in order for k in (1, 2)]
    assert not any(r.success for r in records) and len(set(order)) == 3
    # one slot: each episode began after the one before it had ended
    assert all(b.started_at >= a.finished_at for a, b in zip(records, records[1:]))
