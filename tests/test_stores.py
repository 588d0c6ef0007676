"""Stores: a directory of runs, SQLite, and MongoDB at the API level (mongomock: no MongoDB server
can be installed here). PostgreSQL, against a real server, is in test_store_postgres.py."""

from __future__ import annotations

import sqlite3

import pytest

from reinagent.store import read_log, read_spec
from reinagent.stores import open_store
from reinagent.stores.base import StoreError
from reinagent.stores.file import write_run_dir
from tests import store_contract as contract
from tests.conftest import one_line_error, run_cli


def _mongo(tmp_path):
    mongomock = pytest.importorskip("mongomock")
    from reinagent.stores.mongo import MongoStore

    return MongoStore("mongodb://user:hunter2@db.example:27017/reinagent", client=mongomock.MongoClient())


@pytest.fixture(params=["directory", "sqlite", "mongodb"])
def store(request, tmp_path):
    if request.param == "directory":
        db = open_store(str(tmp_path / "runs"))
    elif request.param == "sqlite":
        db = open_store(f"sqlite:///{tmp_path}/runs.db")
    else:
        db = _mongo(tmp_path)
    yield db
    db.close()


def test_log_and_live_records_follow_records_jsonl(store):
    contract.check_log_and_live_records(store)


def test_nul_characters_round_trip(store):
    contract.check_nul_characters_round_trip(store)


def test_spec_history_and_missing_runs(store):
    contract.check_spec_history_and_missing_runs(store)


def test_query_filters_and_frame(store):
    contract.check_query(store)


def test_one_writer_per_run(store):
    contract.check_one_writer(store)


@pytest.mark.parametrize("kind", ["sqlite", "mongodb"])
def test_writes_are_idempotent_and_racing_workers_never_duplicate(kind, tmp_path):
    db = open_store(f"sqlite:///{tmp_path}/runs.db") if kind == "sqlite" else _mongo(tmp_path)
    with db:
        contract.check_idempotent_writes(db)
        contract.check_racing_writers(db)


def test_racing_processes_never_duplicate(tmp_path):
    """Two processes (not threads) writing the same keys to one SQLite file."""
    import multiprocessing

    url = f"sqlite:///{tmp_path}/runs.db"
    with open_store(url) as db:
        db.create_run("race", contract.spec()).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_write_keys, args=(url, n, start)) for n in range(2)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    with open_store(url) as db:
        keys = [(r.task_id, r.trial) for r in db.read_log("race")]
    assert sorted(keys) == sorted((f"t{k}", t) for k in range(10) for t in (1, 2))


def _write_keys(url: str, n: int, start) -> None:
    start.wait(60)
    with open_store(url) as db:
        worker = db.worker("race")
        for k in range(10):
            for trial in (1, 2):
                worker.append(contract.record(f"t{k}", trial, started=float(n)))
        worker.close()


def test_mongo_lease_expires_and_a_writer_that_lost_it_stops(tmp_path):
    db = _mongo(tmp_path)
    first = db.create_run("leased", contract.spec())
    with pytest.raises(StoreError, match="in use by another writer"):
        db.open_run("leased")
    db.db.leases.update_one({"_id": "leased"}, {"$set": {"expires": 0}})  # as if the holder died 30 s ago
    second, _, _ = db.open_run("leased")
    assert first.renew_once() is False  # the first finds its lease gone ...
    with pytest.raises(StoreError, match="lease was taken"):
        first.append(contract.record("a", 1))  # ... and writes nothing more
    second.append(contract.record("a", 1))
    second.close()
    first.close()
    assert db.read_log("leased") == [contract.record("a", 1)]
    assert db.db.leases.find_one({"_id": "leased"}) is None  # released on close


def test_bad_urls_are_one_line_errors_without_passwords(tmp_path):
    (tmp_path / "not.db").write_text("this is not a database" * 100)
    cases = [
        ("redis://u:pw@host/0", ["unknown store", "valid: a directory, sqlite:///", "postgresql://", "mongodb://"]),
        ("sqlite://relative.db", ["bad SQLite URL"]),
        (f"sqlite:///{tmp_path}/missing/runs.db", ["does not exist"]),
        (f"sqlite:///{tmp_path}/not.db", ["not a database"]),
        ("postgresql://me:s3cretpw@127.0.0.1:1/db", ["cannot connect to postgresql://***@127.0.0.1:1/db"]),
        ("mongodb://me:s3cretpw@127.0.0.1:1/db", ["cannot use mongodb://***@127.0.0.1:1/db", "refused"]),
    ]
    for url, needles in cases:
        with pytest.raises(StoreError) as info:
            open_store(url).close()
        message = str(info.value)
        assert "\n" not in message and "s3cretpw" not in message and ":pw@" not in message, message
        for needle in needles:
            assert needle in message, message
    line = one_line_error(run_cli("store", "ls", "postgresql://me:s3cretpw@127.0.0.1:1/db"), "cannot connect")
    assert "s3cretpw" not in line


def test_another_schema_version_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path}/runs.db"
    open_store(url).close()
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("UPDATE reinagent_meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 999; this reinagent reads version 1"):
        open_store(url)
    db = _mongo(tmp_path)
    db.db.meta.update_one({"_id": "schema_version"}, {"$set": {"value": 999}})
    from reinagent.stores.mongo import MongoStore

    with pytest.raises(StoreError, match="schema version 999"):
        MongoStore("mongodb://x/reinagent", client=db.client)


def test_import_then_export_is_lossless_through_the_cli(tmp_path):
    source = tmp_path / "source-run"
    write_run_dir(source, contract.spec(), contract.a_log())
    url = f"sqlite:///{tmp_path}/runs.db"
    done = run_cli("store", "import", str(source), url)
    assert done.returncode == 0, done.stderr
    listing = run_cli("store", "ls", url)
    assert "source-run" in listing.stdout and "hotpotqa" in listing.stdout
    again = run_cli("store", "import", str(source), url)
    one_line_error(again, "already holds a run 'source-run'")
    out = tmp_path / "exported"
    done = run_cli("store", "export", url, "source-run", str(out))
    assert done.returncode == 0, done.stderr
    assert read_log(out) == read_log(source) == contract.a_log()  # records.jsonl, parsed, equal
    assert read_spec(out) == read_spec(source)
    one_line_error(run_cli("store", "export", url, "source-run", str(out)), "already holds a run")
    one_line_error(run_cli("store", "export", url, "nope", str(tmp_path / "x")), "no run 'nope'")


def test_directory_store_is_todays_run_directories(tmp_path):
    db = open_store(str(tmp_path / "runs"))
    contract.write(db, "r1", contract.a_log())
    assert read_log(tmp_path / "runs" / "r1") == contract.a_log()  # an ordinary run directory


def test_cli_run_into_sqlite_killed_and_resumed_equals_an_uninterrupted_run(tmp_path):
    contract.check_cli_run_killed_and_resumed(f"sqlite:///{tmp_path}/runs.db", tmp_path)


def test_cli_directory_store_prints_the_run_id_and_resumes_by_it(tmp_path, script):
    import re

    model = script([], default="Thought: x\nAction: Finish[wrong]")
    args = ["--benchmark", "hotpotqa", "--agent", "cot-context", "--num-envs", "2", "--model", model, "--quiet"]
    first = run_cli("run", *args, "--num-trials", "1", "--store", str(tmp_path / "myruns"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    run_id = re.search(r"run id: (\S+)", first.stderr).group(1)
    assert (tmp_path / "myruns" / run_id / "records.jsonl").is_file()  # an ordinary run directory
    more = run_cli("resume", "--store", str(tmp_path / "myruns"), run_id, "--num-trials", "2", "--quiet", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    assert {r.trial for r in read_log(tmp_path / "myruns" / run_id)} == {1, 2}
    assert run_id in run_cli("store", "ls", str(tmp_path / "myruns")).stdout
    with open_store(f"sqlite:///{tmp_path}/x.db"):
        pass
    one_line_error(run_cli("resume", "--store", f"sqlite:///{tmp_path}/x.db", "nope", cwd=tmp_path), "no run 'nope'")
    # reading a database that is not there is an error, not a new empty file
    one_line_error(run_cli("store", "ls", f"sqlite:///{tmp_path}/typo.db"), "typo.db does not exist")
    one_line_error(run_cli("resume", "--store", f"sqlite:///{tmp_path}/typo.db", "x", cwd=tmp_path), "does not exist")
    assert not (tmp_path / "typo.db").exists()


def test_a_database_run_leaves_no_empty_folder_in_the_working_directory(tmp_path, script):
    """runs/<id>/ of a database run holds only errors.log: it is made when one is written, not before."""
    import re

    model = script([], default="Thought: x\nAction: Finish[wrong]")
    url = f"sqlite:///{tmp_path}/runs.db"
    done = run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-envs", "1", "--num-trials", "1",
                   "--model", model, "--store", url, "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = re.search(r"run id: (\S+)", done.stderr).group(1)
    assert not (tmp_path / "runs").exists(), list((tmp_path / "runs").rglob("*"))
    with open_store(url) as db:
        assert len(db.read_records(run_id)) == 1


def test_store_init_creates_the_schema_once_and_says_what_it_did(tmp_path):
    url = f"sqlite:///{tmp_path}/new.db"
    first = run_cli("store", "init", url)
    assert first.returncode == 0, first.stderr
    assert "created tables reinagent_meta, reinagent_runs, reinagent_entries, reinagent_generations" in first.stdout
    assert f"--store {url}" in first.stdout
    with sqlite3.connect(tmp_path / "new.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"reinagent_meta", "reinagent_runs", "reinagent_entries", "reinagent_generations"} <= tables
    again = run_cli("store", "init", url)
    assert again.returncode == 0 and "already there" in again.stdout and "0 run(s)" in again.stdout
    folder = run_cli("store", "init", str(tmp_path / "myruns"))
    assert folder.returncode == 0 and (tmp_path / "myruns").is_dir() and "created folder" in folder.stdout
    one_line_error(run_cli("store", "init", "redis://x/y"), "unknown store", "postgresql://")
