"""What every store guarantees, as checks that test_stores.py (directory, SQLite, MongoDB via
mongomock) and test_store_postgres.py (a real PostgreSQL server) run against their store."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time

from reinagent.errors import RunDirError
from reinagent.records import RunSpec, Step, Supersede, Trajectory, TrialRecord
from reinagent.stores.base import Store, StoreError
from tests.conftest import CLI, run_cli


def spec(benchmark: str = "hotpotqa") -> RunSpec:
    return RunSpec(config={"benchmark": benchmark, "agent": "cot-context", "strategy": "reflexion", "num_trials": 3},
                   task_ids=["a", "b"], created_at=time.time(), reinagent_version="0", python_version="3")


def record(task: str, trial: int, *, success: bool = False, started: float = 1.0, answer: str = "x",
           reflection: str | None = None) -> TrialRecord:
    traj = Trajectory(steps=[Step(prompt_len=0, output=f"Action: Finish[{answer}]", action=f"Finish[{answer}]")],
                      answer=answer, end_reason="finished")
    return TrialRecord(task_id=task, trial=trial, success=success, answer=answer, trajectory=traj,
                       reflection=reflection, started_at=started, finished_at=started + 1)


def a_log() -> list:
    """A log with everything records.jsonl can hold: records, an amended record (the reflection a
    resume --num-trials added), a supersede marker and the redo of the superseded keys."""
    return [
        record("a", 1), record("b", 1, success=True),
        record("a", 2, started=2.0),
        record("a", 2, started=2.0, reflection="read the paragraph"),  # same episode, amended
        Supersede(keys=[("a", 2)], reason="from-trial 2", at=5.0),
        record("a", 2, started=6.0, answer="y", success=True),  # the redo
    ]


def write(store: Store, run_id: str, entries: list) -> None:
    writer = store.create_run(run_id, spec())
    try:
        for entry in entries:
            writer.append(entry)
    finally:
        writer.close()


def check_log_and_live_records(store: Store) -> None:
    from reinagent.store import live_records

    write(store, "r1", a_log())
    assert store.read_log("r1") == a_log()  # every entry, in append order
    live = store.read_records("r1")
    assert live == live_records(a_log())
    assert [(r.task_id, r.trial, r.answer, r.success) for r in live] == [("a", 1, "x", False), ("b", 1, "x", True),
                                                                         ("a", 2, "y", True)]
    assert store.read_spec("r1").config["benchmark"] == "hotpotqa"
    assert store.run_ids() == ["r1"]


def check_nul_characters_round_trip(store: Store) -> None:
    """A program's output may hold U+0000 (PostgreSQL's JSONB cannot): stored and read back exactly."""
    rec = record("nul", 1, answer="a\x00b")
    rec.evaluation = {"stdout": "x\x00y", "literal": "\\u0000 is not a NUL"}
    write(store, "nul", [rec, Supersede(keys=[("nul", 1)], reason="r\x00", at=1.0)])
    assert store.read_log("nul") == [rec, Supersede(keys=[("nul", 1)], reason="r\x00", at=1.0)]


def check_idempotent_writes(store: Store) -> None:
    writer = store.create_run("r2", spec())
    try:
        for _ in range(3):
            writer.append(record("a", 1))  # a retried write
        writer.append(record("a", 1, started=9.0, answer="other"))  # another episode of that key: dropped
    finally:
        writer.close()
    assert store.read_log("r2") == [record("a", 1)]


def check_racing_writers(store: Store, writers: int = 4, keys: int = 12) -> None:
    """Workers (no run lock) writing the same keys at once: each key once, the first write wins."""
    store.create_run("race", spec()).close()
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        worker = store.worker("race")
        try:
            barrier.wait(timeout=60)
            for k in range(keys):
                worker.append(record(f"t{k}", 1, started=float(n)))  # each worker its own episode
        except BaseException as err:  # noqa: BLE001
            errors.append(err)
        finally:
            worker.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    log = store.read_log("race")
    assert sorted((r.task_id, r.trial) for r in log) == sorted((f"t{k}", 1) for k in range(keys))


def check_one_writer(store: Store) -> None:
    first = store.create_run("locked", spec())
    try:
        try:
            store.open_run("locked")
        except RunDirError as err:  # StoreError is one; a run directory says RunLocked
            assert "in use" in str(err) and "\n" not in str(err)
        else:
            raise AssertionError("a second writer was let in")
    finally:
        first.close()
    second, got_spec, records = store.open_run("locked")  # free once the first closed
    second.close()
    assert records == [] and got_spec.task_ids == ["a", "b"]


def check_spec_history_and_missing_runs(store: Store) -> None:
    from reinagent.records import SpecChange

    writer = store.create_run("h", spec())
    new = store.read_spec("h").model_copy(update={"history": [SpecChange(at=1.0, changes={"num_trials": 5})]})
    writer.update_spec(new)
    writer.close()
    assert store.read_spec("h") == new
    for call in (lambda: store.read_spec("nope"), lambda: store.open_run("nope")):
        try:
            call()
        except StoreError as err:
            assert "no run 'nope'" in str(err)
        else:
            raise AssertionError("a missing run was not an error")
    try:
        store.create_run("h", spec())
    except StoreError as err:
        assert "already holds a run 'h'" in str(err)
    else:
        raise AssertionError("a run id was reused")


def check_query(store: Store) -> None:
    write(store, "q1", [record("a", 1), record("b", 1, success=True)])
    writer = store.create_run("q2", spec("mbpp"))
    writer.append(record("c", 1, success=True))
    writer.close()
    assert {(r.run_id, r.record.task_id) for r in store.query(success=True)} == {("q1", "b"), ("q2", "c")}
    assert [r.record.task_id for r in store.query(benchmark="mbpp")] == ["c"]
    assert [r.record.task_id for r in store.query(run="q1", success=False)] == ["a"]
    frame = store.query(run="q1", as_frame=True)
    assert list(frame["task_id"]) == ["a", "b"] and list(frame["success"]) == [False, True]
    assert {"run_id", "benchmark", "trial", "reward", "steps", "calls"} <= set(frame.columns)


# -- the real CLI, killed mid-run and resumed ----------------------------------------------------------

RUN_ARGS = ["--benchmark", "hotpotqa", "--agent", "cot-context", "--num-envs", "3", "--num-trials", "2",
            "--model", "openai/fake", "--no-cache", "--max-concurrency", "1", "--quiet"]


def comparable(records) -> dict:
    return {(r.task_id, r.trial): (r.answer, r.success, r.reflection, r.memory,
                                   [s.output for s in r.trajectory.steps], r.error) for r in records}


def check_cli_run_killed_and_resumed(url: str, tmp_path) -> None:
    """`run --store URL` killed (SIGKILL) after its first record, then `resume --store URL ID`: the
    same records as an uninterrupted run, each (task, trial) once."""
    from reinagent.llm.fake_server import FakeOpenAIServer
    from reinagent.runner import load_run
    from reinagent.stores import open_store

    gate, arrived, seen = threading.Event(), threading.Event(), [0]
    gate.set()

    def hold(_body):
        seen[0] += 1
        if seen[0] > 2:  # act + reflect of the first episode pass; the next call waits
            arrived.set()
            gate.wait(120)
        return None

    with FakeOpenAIServer(fault_when=hold) as server:
        base = ["--base-url", server.base_url]
        whole = run_cli("run", *RUN_ARGS, *base, "--run-dir", str(tmp_path / "whole"), cwd=tmp_path)
        assert whole.returncode == 0, whole.stderr
        expected = comparable(load_run(tmp_path / "whole")[1])
        gate.clear()
        arrived.clear()
        seen[0] = 0
        proc = subprocess.Popen([*CLI, "run", *RUN_ARGS, *base, "--store", url], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            while not arrived.is_set():
                assert time.monotonic() < deadline and proc.poll() is None, "the run never reached its 3rd call"
                time.sleep(0.02)
            with open_store(url) as db:
                (run_id,) = db.run_ids()
                while len(db.read_log(run_id)) < 1:  # the first record is durable before we kill
                    assert time.monotonic() < deadline, "no record written"
                    time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate()
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert re.search(rf"run id: {re.escape(run_id)}\b", err), err
        assert len(load_run(run_id, store=url)[1]) < len(expected)  # it was cut short
        resumed = run_cli("resume", "--store", url, run_id, "--quiet", cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert f"run id:        {run_id}" in resumed.stdout
    with open_store(url) as db:
        log = db.read_log(run_id)
    assert len(log) == len({(r.task_id, r.trial) for r in log})  # nothing written twice
    assert comparable(load_run(run_id, store=url)[1]) == expected
    # export gives an ordinary run directory that `report` reads
    out = tmp_path / "exported"
    assert run_cli("store", "export", url, run_id, str(out), cwd=tmp_path).returncode == 0
    assert comparable(load_run(out)[1]) == expected
    report = run_cli("report", str(out), "--format", "json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    check_cli_resume_redo_and_extend(url, run_id, expected, tmp_path)


def check_cli_resume_redo_and_extend(url: str, run_id: str, expected: dict, tmp_path) -> None:
    """--from-trial 2 supersedes in the database (the old trial-2 records and their redo coexist);
    --num-trials 3 adds the reflections the old last trial skipped (a revision of each record)."""
    from reinagent.llm.fake_server import FakeOpenAIServer
    from reinagent.runner import load_run
    from reinagent.stores import open_store

    with FakeOpenAIServer() as server:
        redo = run_cli("resume", "--store", url, run_id, "--from-trial", "2", "--base-url", server.base_url,
                       "--quiet", cwd=tmp_path)
        assert redo.returncode == 0, redo.stderr
        assert comparable(load_run(run_id, store=url)[1]) == expected
        with open_store(url) as db:
            log, spec = db.read_log(run_id), db.read_spec(run_id)
        markers = [e for e in log if isinstance(e, Supersede)]
        assert len(markers) == 1 and sorted({t for _, t in markers[0].keys}) == [2]
        assert spec.history[-1].changes["from_trial"] == 2
        assert len(log) == len(expected) + 1 + len(markers[0].keys)  # old trial 2, marker, redo
        extend = run_cli("resume", "--store", url, run_id, "--num-trials", "3", "--base-url", server.base_url,
                         "--quiet", cwd=tmp_path)
        assert extend.returncode in (0, 3), extend.stderr
    records = {(r.task_id, r.trial): r for r in load_run(run_id, store=url)[1]}
    failed_2 = [r for (_, trial), r in records.items() if trial == 2 and not r.success and r.error is None]
    assert failed_2 and all(r.reflection for r in failed_2)  # the amended revision is the live one
    assert all(trial <= 3 for _, trial in records)
