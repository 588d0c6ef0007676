"""What SQLite and PostgreSQL stores share: the tables, idempotent inserts, markers, reading back.

Tables (prefixed, so a store can share a database with other applications):
    reinagent_meta         key/value; `schema_version` (opening another version is an error)
    reinagent_runs         run_id, benchmark, created_at, spec (the RunSpec, with its history)
    reinagent_entries      seq (append order), run_id, kind ('record' | 'supersede'), task_id, trial,
                           sample, generation, revision, success, doc (the record or marker),
                           raw (the exact JSON text, only where `doc` could not hold it: see
                           PostgresStore.encode_doc)
                           UNIQUE (run_id, task_id, trial, sample, generation, revision); markers
                           have NULL keys (NULLs never conflict)
    reinagent_generations  (run_id, task_id, trial) -> how many markers have named it
A record's generation is read from reinagent_generations inside its INSERT, and a marker raises the
generations of its keys in the same transaction as it is written (see base.py).
"""

from __future__ import annotations

import json
import threading
from abc import abstractmethod
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from reinagent.records import RunSpec, Supersede, TrialRecord, record_json
from reinagent.store import Entry
from reinagent.stores.base import (SCHEMA_VERSION, AsyncAppend, DatabaseRuns, Store, StoreError, check_run_id,
                                   record_sample, same_episode)

KEY = "run_id, task_id, trial, sample, generation, revision"


class SqlStore(DatabaseRuns, Store):
    """A relational store; subclasses say how to connect, lock and spell a few types."""

    json_type = "TEXT"
    seq_column = "seq INTEGER PRIMARY KEY AUTOINCREMENT"
    insert_ignore = "INSERT OR IGNORE INTO"  # SQLite; PostgreSQL appends ON CONFLICT DO NOTHING
    conflict_tail = ""
    json_param = "?"

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one statement at a time on the shared connection
        self.conn = self.connect()
        try:
            self._init_schema()
        except BaseException:
            self.conn.close()
            raise

    # -- dialect --------------------------------------------------------------------------------
    @abstractmethod
    def connect(self):
        """A new connection in autocommit mode; StoreError (one line) when it cannot be had."""

    @abstractmethod
    def transaction(self, conn) -> Any:
        """A context manager: one transaction on conn."""

    @abstractmethod
    def lock_run(self, conn, run_id: str) -> Any:
        """Take the run's writer lock for as long as the returned handle (or conn) lives."""

    def sql(self, text: str) -> str:
        return text

    def load_doc(self, value: Any, raw: str | None = None) -> Any:
        if raw is not None:
            return json.loads(raw)
        return json.loads(value) if isinstance(value, (str, bytes)) else value

    def encode_doc(self, text: str) -> tuple[str, str | None]:
        """(doc, raw) to store for a document's JSON text; raw is None when doc holds it exactly."""
        return text, None

    def errors(self) -> tuple[type[BaseException], ...]:
        return ()

    # -- schema ---------------------------------------------------------------------------------
    def _ddl(self) -> list[str]:
        j = self.json_type
        return [
            "CREATE TABLE IF NOT EXISTS reinagent_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS reinagent_runs (run_id TEXT PRIMARY KEY, benchmark TEXT, "
            f"created_at DOUBLE PRECISION, spec {j} NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS reinagent_entries ({self.seq_column}, run_id TEXT NOT NULL, "
            f"kind TEXT NOT NULL, task_id TEXT, trial INTEGER, sample INTEGER, generation INTEGER, "
            f"revision INTEGER, success BOOLEAN, doc {j} NOT NULL, raw TEXT)",
            f"CREATE UNIQUE INDEX IF NOT EXISTS reinagent_entries_key ON reinagent_entries ({KEY})",
            "CREATE INDEX IF NOT EXISTS reinagent_entries_log ON reinagent_entries (run_id, seq)",
            "CREATE INDEX IF NOT EXISTS reinagent_runs_benchmark ON reinagent_runs (benchmark)",
            "CREATE TABLE IF NOT EXISTS reinagent_generations (run_id TEXT NOT NULL, task_id TEXT NOT NULL, "
            "trial INTEGER NOT NULL, generation INTEGER NOT NULL, PRIMARY KEY (run_id, task_id, trial))",
        ]

    TABLES = ("reinagent_meta", "reinagent_runs", "reinagent_entries", "reinagent_generations")
    # names of existing tables among TABLES (dialects differ: PostgreSQL overrides it)
    tables_query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?, ?, ?)"

    def _init_schema(self) -> None:
        with self._lock, self.transaction(self.conn) as cur:
            self.serialize_schema(cur)
            cur.execute(self.sql(self.tables_query), self.TABLES)
            before = {row[0] for row in cur.fetchall()}
            # what this open created (`reinagent store init` says it): none when the schema was there
            self.created_tables = [t for t in self.TABLES if t not in before]
            for statement in self._ddl():
                cur.execute(statement)
            cur.execute(self.sql(f"{self.insert_ignore} reinagent_meta (key, value) VALUES (?, ?){self.conflict_tail}"),
                        ("schema_version", str(SCHEMA_VERSION)))
            cur.execute(self.sql("SELECT value FROM reinagent_meta WHERE key = ?"), ("schema_version",))
            found = cur.fetchone()[0]
        if str(found) != str(SCHEMA_VERSION):
            raise StoreError(f"{self.url} holds reinagent store schema version {found}; this reinagent reads "
                             f"version {SCHEMA_VERSION}: use a matching reinagent, or another database")

    def serialize_schema(self, cur) -> None:
        """Two processes creating the tables at once must not race (PostgreSQL: an xact lock)."""

    # -- reading --------------------------------------------------------------------------------
    def _fetch(self, text: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return list(self.conn.execute(self.sql(text), params).fetchall())
            except self.errors() as err:
                raise StoreError(f"{self.url}: {first_line(err)}") from None

    def run_ids(self, benchmark: str | None = None) -> list[str]:
        if benchmark is None:
            rows = self._fetch("SELECT run_id FROM reinagent_runs ORDER BY created_at, run_id")
        else:
            rows = self._fetch("SELECT run_id FROM reinagent_runs WHERE benchmark = ? ORDER BY created_at, run_id",
                               (benchmark,))
        return [r[0] for r in rows]

    def has_run(self, run_id: str) -> bool:
        return bool(self._fetch("SELECT 1 FROM reinagent_runs WHERE run_id = ?", (run_id,)))

    def read_spec(self, run_id: str) -> RunSpec:
        rows = self._fetch("SELECT spec FROM reinagent_runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise self.missing(run_id)
        return RunSpec.model_validate(self.load_doc(rows[0][0]))

    def read_log(self, run_id: str) -> list[Entry]:
        if not self.has_run(run_id):
            raise self.missing(run_id)
        rows = self._fetch("SELECT kind, doc, raw FROM reinagent_entries WHERE run_id = ? ORDER BY seq", (run_id,))
        return [Supersede.model_validate(self.load_doc(doc, raw)) if kind == "supersede"
                else TrialRecord.model_validate(self.load_doc(doc, raw)) for kind, doc, raw in rows]

    # -- writing --------------------------------------------------------------------------------
    def create_run(self, run_id: str, spec: RunSpec, log_dir: Path | None = None) -> "SqlRunWriter":
        check_run_id(run_id)
        writer = SqlRunWriter(self, run_id, log_dir, locked=True)
        try:
            with writer.tx() as cur:
                self._insert_run(cur, run_id, spec)
        except BaseException:
            writer.close()
            raise
        return writer

    def _insert_run(self, cur, run_id: str, spec: RunSpec) -> None:
        cur.execute(self.sql(f"{self.insert_ignore} reinagent_runs (run_id, benchmark, created_at, spec) "
                             f"VALUES (?, ?, ?, {self.json_param}){self.conflict_tail}"),
                    (run_id, spec.config.get("benchmark"), spec.created_at, record_json(spec)))
        if cur.rowcount != 1:
            raise StoreError(f"{self.url} already holds a run {run_id!r}; "
                             f"continue it with `reinagent resume --store URL {run_id}`")

    def import_log(self, run_id: str, spec: RunSpec, entries: list[Entry]) -> None:
        """One transaction: an import killed half-way leaves nothing, and can simply be run again."""
        writer = SqlRunWriter(self, check_run_id(run_id), None, locked=True)
        try:
            with writer.tx() as cur:
                writer.bulk = cur  # every append below joins this transaction
                self._insert_run(cur, run_id, spec)
                for entry in entries:
                    (writer.append if isinstance(entry, Supersede) else writer.append_replacing)(entry)
        finally:
            writer.bulk = None
            writer.close()

    def remove_run(self, run_id: str) -> None:
        if not self.has_run(check_run_id(run_id)):
            raise self.missing(run_id)
        writer = SqlRunWriter(self, check_run_id(run_id), None, locked=True)  # never under a live writer
        try:
            with writer.tx() as cur:
                for table in ("reinagent_entries", "reinagent_generations", "reinagent_runs"):
                    cur.execute(self.sql(f"DELETE FROM {table} WHERE run_id = ?"), (run_id,))
                if cur.rowcount != 1:
                    raise self.missing(run_id)
        finally:
            writer.close()

    def run_writer(self, run_id: str, log_dir: Path | None, *, locked: bool) -> "SqlRunWriter":
        return SqlRunWriter(self, run_id, log_dir, locked=locked)  # open_run, worker: base.DatabaseRuns

    def close(self) -> None:
        self.conn.close()


def first_line(err: BaseException) -> str:
    from reinagent.redact import redact

    text = str(err).strip().splitlines()
    return redact(text[0] if text else type(err).__name__)


class SqlRunWriter(AsyncAppend):
    """Writes one run through its own connection (which also holds the run's lock, if locked)."""

    def __init__(self, store: SqlStore, run_id: str, log_dir: Path | None, *, locked: bool):
        self.store, self.run_id = store, run_id
        self.run_dir = Path(log_dir) if log_dir else None  # made only when errors.log is written
        self._mutex = threading.Lock()
        self.bulk: Any = None  # the cursor of an import's one transaction, while it runs
        self.conn = store.connect()
        self._lock_handle = None
        try:
            if locked:
                self._lock_handle = store.lock_run(self.conn, run_id)
        except BaseException:
            self.conn.close()
            raise

    @contextmanager
    def tx(self) -> Iterator[Any]:
        if self.bulk is not None:
            yield self.bulk
            return
        with self._mutex:
            try:
                with self.store.transaction(self.conn) as cur:
                    yield cur
            except self.store.errors() as err:
                raise StoreError(f"could not write run {self.run_id} to {self.store.url}: {first_line(err)}; "
                                 "nothing finished was lost: resume it when the database is back") from None

    def append(self, entry: Entry) -> None:
        if isinstance(entry, Supersede):
            self._mark(entry)
        else:
            self._insert(entry, replacing=False)

    def append_replacing(self, record: TrialRecord) -> None:
        """Import: a later record of a key replaces the earlier one, as in records.jsonl."""
        self._insert(record, replacing=True)

    def update_spec(self, spec: RunSpec) -> None:
        with self.tx() as cur:
            cur.execute(self.store.sql(f"UPDATE reinagent_runs SET spec = {self.store.json_param} WHERE run_id = ?"),
                        (record_json(spec), self.run_id))

    def close(self) -> None:
        try:
            self.conn.close()  # ends the session: drops an advisory lock
        finally:
            if self._lock_handle is not None and hasattr(self._lock_handle, "release"):
                self._lock_handle.release()
            self._lock_handle = None

    # ---------------------------------------------------------------------------------------------
    def _insert(self, rec: TrialRecord, *, replacing: bool) -> None:
        s = self.store
        key = (self.run_id, rec.task_id, rec.trial, record_sample(rec))
        doc, raw = s.encode_doc(record_json(rec))
        generation = ("COALESCE((SELECT generation FROM reinagent_generations WHERE run_id = ? AND task_id = ? "
                      "AND trial = ?), 0)")
        with self.tx() as cur:
            cur.execute(s.sql(f"{s.insert_ignore} reinagent_entries (run_id, kind, task_id, trial, sample, generation, "
                              f"revision, success, doc, raw) SELECT ?, 'record', ?, ?, ?, {generation}, 0, ?, "
                              f"{s.json_param}, ?{s.conflict_tail or ' WHERE true'}"),
                        (*key, *key[:3], rec.success, doc, raw))
            if cur.rowcount == 1:
                return
            # The key exists: a repeated write (no-op), a later revision of the same episode, or
            # another episode of the same key (a retried worker: the first one written wins).
            cur.execute(s.sql(f"SELECT generation, revision, doc, raw FROM reinagent_entries WHERE run_id = ? AND "
                              f"task_id = ? AND trial = ? AND sample = ? AND generation = {generation} "
                              "ORDER BY revision DESC LIMIT 1"), (*key, *key[:3]))
            gen, revision, stored, stored_raw = cur.fetchone()
            old = TrialRecord.model_validate(s.load_doc(stored, stored_raw))
            if old == rec or not (replacing or same_episode(old, rec)):
                return
            cur.execute(s.sql(f"{s.insert_ignore} reinagent_entries (run_id, kind, task_id, trial, sample, "
                              f"generation, revision, success, doc, raw) VALUES (?, 'record', ?, ?, ?, ?, ?, ?, "
                              f"{s.json_param}, ?){s.conflict_tail}"),
                        (*key, gen, revision + 1, rec.success, doc, raw))

    def _mark(self, marker: Supersede) -> None:
        s = self.store
        with self.tx() as cur:
            for task_id, trial in marker.keys:
                cur.execute(s.sql("INSERT INTO reinagent_generations (run_id, task_id, trial, generation) "
                                  "VALUES (?, ?, ?, 1) ON CONFLICT (run_id, task_id, trial) DO UPDATE SET "
                                  "generation = reinagent_generations.generation + 1"),
                            (self.run_id, task_id, trial))
            cur.execute(s.sql(f"INSERT INTO reinagent_entries (run_id, kind, doc, raw) VALUES (?, 'supersede', "
                              f"{s.json_param}, ?)"), (self.run_id, *s.encode_doc(record_json(marker))))
