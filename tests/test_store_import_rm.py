"""Stores (issue 28, section 6): an import cut off half-way never passes for a partial run and a
re-import finishes it; `store rm` deletes a run (never under a live writer); the SQLite run lock is
the database file's, whatever path (a symlink) reaches it."""

from __future__ import annotations

import pytest

from reinagent.stores import open_store
from reinagent.stores.base import StoreError
from reinagent.stores.file import write_run_dir
from tests import store_contract as contract
from tests.conftest import one_line_error, run_cli
from tests.test_stores import _mongo


class Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs in the importing code."""


def _store(kind: str, tmp_path):
    if kind == "directory":
        return open_store(str(tmp_path / "runs"))
    if kind == "sqlite":
        return open_store(f"sqlite:///{tmp_path}/runs.db")
    return _mongo(tmp_path)


def _cut_after(monkeypatch, kind: str, entries: int) -> None:
    """Make the import die after `entries` entries were written."""
    if kind == "directory":  # the run folder and its spec exist; records.jsonl is being written
        import reinagent.stores.file as file_store

        def die(*args, **kw):
            raise Killed()
        monkeypatch.setattr(file_store, "atomic_write", die)
        return
    if kind == "mongodb":
        from reinagent.stores.mongo import MongoRunWriter as Writer
    else:
        from reinagent.stores.sql import SqlRunWriter as Writer
    real, count = Writer.append_replacing, [0]

    def counted(self, record):
        count[0] += 1
        if count[0] > entries:
            raise Killed()
        return real(self, record)
    monkeypatch.setattr(Writer, "append_replacing", counted)


def check_interrupted_import(db, kind: str, monkeypatch) -> None:
    log = contract.a_log()
    with monkeypatch.context() as patch:
        _cut_after(patch, kind, entries=2)
        with pytest.raises(Killed):
            db.import_log("imported", contract.spec(), log)
    if kind == "mongodb":  # no multi-document transaction: the run is marked until finished
        for read in (lambda: db.read_log("imported"), lambda: db.open_run("imported")):
            with pytest.raises(StoreError, match="import that did not finish; run the same `reinagent store import`"):
                read()
        assert [(r.run_id, r.note) for r in db.list_runs()] == [
            ("imported", "(import unfinished: run `store import` again)")]
    else:  # one transaction (SQL) or a rename (directory): nothing is there
        assert not db.has_run("imported") and db.run_ids() == []
    db.import_log("imported", contract.spec(), log)  # a re-import finishes it
    assert db.read_log("imported") == log
    writer, _, records = db.open_run("imported")
    writer.close()
    assert len(records) == 3


@pytest.mark.parametrize("kind", ["directory", "sqlite", "mongodb"])
def test_an_import_cut_off_half_way_is_never_a_partial_run(kind, tmp_path, monkeypatch):
    db = _store(kind, tmp_path)
    try:
        check_interrupted_import(db, kind, monkeypatch)
    finally:
        db.close()


@pytest.mark.parametrize("kind", ["directory", "sqlite", "mongodb"])
def test_remove_run(kind, tmp_path):
    db = _store(kind, tmp_path)
    try:
        contract.write(db, "keep", contract.a_log())
        contract.write(db, "gone", contract.a_log())
        writer, _, _ = db.open_run("gone")
        with pytest.raises(StoreError, match="in use"):
            db.remove_run("gone")  # a run or resume is writing it
        writer.close()
        db.remove_run("gone")
        assert db.run_ids() == ["keep"] and db.read_log("keep") == contract.a_log()
        with pytest.raises(StoreError, match="no run 'gone'"):
            db.remove_run("gone")
        contract.write(db, "gone", contract.a_log()[:2])  # the id is free again, with nothing left over
        assert db.read_log("gone") == contract.a_log()[:2]
    finally:
        db.close()


@pytest.mark.parametrize("kind", ["directory", "sqlite"])
def test_store_rm_cli(kind, tmp_path):
    url = str(tmp_path / "runs") if kind == "directory" else f"sqlite:///{tmp_path}/runs.db"
    source = tmp_path / "src"
    write_run_dir(source, contract.spec(), contract.a_log())
    assert run_cli("store", "import", str(source), url).returncode == 0
    asked = run_cli("store", "rm", url, "src")  # no terminal to say yes: nothing deleted
    assert asked.returncode != 0 and "Traceback" not in asked.stderr
    assert "src" in run_cli("store", "ls", url).stdout
    done = run_cli("store", "rm", url, "src", "--yes")
    assert done.returncode == 0 and "removed run src" in done.stdout, done.stderr
    assert "src" not in run_cli("store", "ls", url).stdout
    one_line_error(run_cli("store", "rm", url, "src", "--yes"), "no run 'src'")


def test_sqlite_run_lock_is_the_files_whatever_path_reaches_it(tmp_path):
    real = open_store(f"sqlite:///{tmp_path}/runs.db")
    (tmp_path / "link.db").symlink_to(tmp_path / "runs.db")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "runs.db").symlink_to(tmp_path / "runs.db")
    linked = [open_store(f"sqlite:///{tmp_path}/link.db"), open_store(f"sqlite:///{tmp_path}/elsewhere/runs.db")]
    try:
        writer = real.create_run("r", contract.spec())
        for other in linked:
            with pytest.raises(StoreError, match="in use by process"):
                other.open_run("r")  # the same file through a symlink: the same run, one writer
        writer.close()
        writer, _, _ = linked[0].open_run("r")
        with pytest.raises(StoreError, match="in use by process"):
            real.open_run("r")
        writer.close()
    finally:
        for db in (real, *linked):
            db.close()
