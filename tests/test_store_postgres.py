"""The PostgreSQL store against a real server: initdb + pg_ctl in a temporary directory on a free
port (as user postgres when we are root: initdb refuses root), password authentication on TCP."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from tests import store_contract as contract
from tests.conftest import one_line_error, run_cli, write_script

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install 'reinagent[postgres]')")


def _binary(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """A throwaway PostgreSQL: yields the admin URL (user postgres, a random password)."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed (scripts/system-packages.sh installs postgresql)")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="reinagent-pg-"))  # not under pytest's 0700 tmp: postgres must enter
    if os.geteuid() == 0:
        try:
            import pwd

            account = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no `postgres` user for initdb to run as")
        os.chown(root, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    password = uuid.uuid4().hex
    pwfile = root / "pw"
    pwfile.write_text(password)
    if as_user:
        os.chown(pwfile, account.pw_uid, account.pw_gid)
    data, port = root / "data", _free_port()
    subprocess.run([*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth-host=scram-sha-256",
                    "--auth-local=trust", f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"],
                   check=True, capture_output=True, timeout=300)
    options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} -c fsync=off"
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-l", str(root / "log"), "-w", "-t", "120", "-o", options,
                    "start"], check=True, capture_output=True, timeout=300)
    try:
        yield f"postgresql://postgres:{password}@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True,
                       timeout=120)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def url(server):
    """A fresh database per test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


@pytest.fixture
def store(url):
    from reinagent.stores import open_store

    db = open_store(url)
    yield db
    db.close()


def test_log_and_live_records_follow_records_jsonl(store):
    contract.check_log_and_live_records(store)


def test_nul_characters_round_trip(store):
    contract.check_nul_characters_round_trip(store)


def test_spec_history_missing_runs_and_query(store):
    contract.check_spec_history_and_missing_runs(store)
    contract.check_query(store)


def test_one_writer_per_run_is_an_advisory_lock_named_in_the_error(store):
    contract.check_one_writer(store)
    first = store.create_run("named", contract.spec())
    with pytest.raises(Exception, match=r"in use by reinagent pid \d+"):
        store.open_run("named")
    first.close()


def test_idempotent_writes_and_racing_workers(store):
    contract.check_idempotent_writes(store)
    contract.check_racing_writers(store, writers=4, keys=20)


def test_documents_are_jsonb_with_indexed_keys(store, url):
    contract.write(store, "r", contract.a_log())
    with psycopg.connect(url) as conn:
        kinds = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                                  "WHERE table_name = 'reinagent_entries'").fetchall())
        indexes = [row[0] for row in conn.execute("SELECT indexdef FROM pg_indexes "
                                                   "WHERE tablename = 'reinagent_entries'").fetchall()]
        # the superseded record and its redo coexist, told apart by their generation
        rows = conn.execute("SELECT generation, revision, doc->>'answer' FROM reinagent_entries WHERE task_id = 'a' "
                            "AND trial = 2 ORDER BY seq").fetchall()
    assert kinds["doc"] == "jsonb"
    assert any("UNIQUE" in i and "(run_id, task_id, trial, sample, generation, revision)" in i for i in indexes)
    assert rows == [(0, 0, "x"), (0, 1, "x"), (1, 0, "y")]


def test_bad_credentials_unreachable_server_and_schema_version_are_one_line_errors(server, url, tmp_path):
    from reinagent.stores import open_store
    from reinagent.stores.base import StoreError

    wrong = url.replace("postgres:", "postgres:WRONGpw", 1)
    with pytest.raises(StoreError) as info:
        open_store(wrong)
    assert "password authentication failed" in str(info.value) and "WRONGpw" not in str(info.value)
    line = one_line_error(run_cli("store", "ls", wrong), "password authentication failed")
    assert "WRONGpw" not in line
    with pytest.raises(StoreError, match="does not exist"):
        open_store(f"{server}/no_such_db")
    open_store(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE reinagent_meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 2; this reinagent reads version 1"):
        open_store(url)
    model = write_script(tmp_path / "s.yaml", [])
    line = one_line_error(run_cli("run", "--num-envs", "1", "--model", model, "--store", wrong, cwd=tmp_path),
                          "cannot connect to postgresql://***@127.0.0.1", "password authentication failed")
    assert "WRONGpw" not in line
    assert not (tmp_path / "runs").exists()  # nothing started


def test_import_export_roundtrip_is_lossless(url, tmp_path):
    from reinagent.store import read_log, read_spec
    from reinagent.stores.file import write_run_dir

    source = tmp_path / "src"
    write_run_dir(source, contract.spec(), contract.a_log())
    assert run_cli("store", "import", str(source), url).returncode == 0
    assert run_cli("store", "export", url, "src", str(tmp_path / "out")).returncode == 0
    assert read_log(tmp_path / "out") == read_log(source)
    assert read_spec(tmp_path / "out") == read_spec(source)


def test_cli_run_into_postgres_killed_and_resumed_equals_an_uninterrupted_run(url, tmp_path):
    contract.check_cli_run_killed_and_resumed(url, tmp_path)


def test_a_password_in_a_query_parameter_is_redacted_everywhere(url, tmp_path):
    """`?password=X` (libpq reads it like user:X@): not in the store:/report: lines, a connection
    error, the spec or its command (issue 28)."""
    user_url, password = url.split("@", 1), url.split("//", 1)[1].split("@", 1)[0].split(":", 1)[1]
    in_query = f"postgresql://postgres@{user_url[1]}?password={password}"
    model = write_script(tmp_path / "s.yaml", [])
    out = run_cli("run", "--num-envs", "1", "--model", model, "--store", in_query, "--quiet", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert password not in out.stdout + out.stderr and "store:         postgresql://***@" in out.stdout
    assert "?password=***" in out.stdout
    with psycopg.connect(url) as conn:
        docs = [row[0] for row in conn.execute("SELECT spec::text FROM reinagent_runs").fetchall()]
    assert docs and not any(password in d for d in docs), docs
    wrong = in_query.replace(password, "WRONGpw-in-query")
    line = one_line_error(run_cli("store", "ls", wrong), "password authentication failed")
    assert "WRONGpw-in-query" not in line


def test_an_import_cut_off_half_way_leaves_nothing_and_rm_removes(store, monkeypatch):
    from tests.test_store_import_rm import check_interrupted_import

    check_interrupted_import(store, "postgresql", monkeypatch)  # one transaction: nothing, then a clean re-import
    store.remove_run("imported")
    assert store.run_ids() == []


def test_store_init_creates_the_schema_on_a_real_server_and_says_so(url):
    """`reinagent store init postgresql://...` on the database `createdb` made: the tables and
    indexes now, one line saying which; again: nothing changed. No password in what it prints."""
    password = url.split(":")[2].split("@")[0]
    first = run_cli("store", "init", url)
    assert first.returncode == 0, first.stderr
    assert "created tables reinagent_meta, reinagent_runs, reinagent_entries, reinagent_generations" in first.stdout
    assert password not in first.stdout + first.stderr and "***@127.0.0.1" in first.stdout
    with psycopg.connect(url) as conn:
        tables = {row[0] for row in conn.execute("SELECT table_name FROM information_schema.tables "
                                                 "WHERE table_name LIKE 'reinagent%'").fetchall()}
        indexes = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes "
                                                  "WHERE tablename = 'reinagent_entries'").fetchall()}
    assert tables == {"reinagent_meta", "reinagent_runs", "reinagent_entries", "reinagent_generations"}
    assert "reinagent_entries_key" in indexes
    again = run_cli("store", "init", url)
    assert again.returncode == 0 and "already there" in again.stdout and "nothing changed" in again.stdout
    missing = url.rsplit("/", 1)[0] + "/no_such_db"
    line = one_line_error(run_cli("store", "init", missing), "no_such_db")
    assert password not in line
