"""SQLite store: `sqlite:///runs.db` (relative path) or `sqlite:////abs/runs.db`.

Durable like records.jsonl: WAL journal with synchronous=FULL, so a committed record survives a
kill or a power cut. Writers of several processes serialize on SQLite's own write lock (BEGIN
IMMEDIATE, waiting up to busy_timeout_s). The one-writer rule of a run: an exclusive flock on
`<db>.locks/<run id>.lock` (runlock.RunLock; <db> is the resolved file, symlinks followed), dropped by the kernel when its holder dies, as for a
run directory. SQLite cannot be shared across machines; use PostgreSQL for that.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path

from reinagent.runlock import RunLock, RunLocked
from reinagent.stores.base import StoreError
from reinagent.stores.sql import SqlStore, first_line


class SqliteStore(SqlStore):
    kind = "sqlite"

    def __init__(self, path: str | Path, *, create: bool = True, busy_timeout_s: float = 60.0):
        self.path = Path(path)
        self.url = f"sqlite:///{path}"
        self.busy_timeout_s = busy_timeout_s
        if self.path.is_dir():
            raise StoreError(f"{self.url} is a directory; name a database file, e.g. sqlite:///runs.db")
        if not self.path.parent.is_dir():
            raise StoreError(f"cannot open {self.url}: folder {self.path.parent} does not exist{self._slashes()}")
        if not create and not self.path.exists():  # a typo must not leave an empty database behind
            raise StoreError(f"cannot open {self.url}: {self.path} does not exist{self._slashes()}")
        super().__init__()

    def _slashes(self) -> str:
        """The hint for sqlite:///tmp/x.db meant as /tmp/x.db: three slashes make a relative path."""
        if self.path.is_absolute():
            return ""
        absolute = Path("/") / self.path
        if not (absolute.exists() or absolute.parent.is_dir()):
            return ""
        return (f" (three slashes make a path relative to the current directory; for {absolute} write "
                f"four: sqlite:///{absolute})")

    def connect(self):
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            return conn
        except sqlite3.Error as err:
            raise StoreError(f"cannot open {self.url}: {first_line(err)}") from None

    def errors(self):
        return (sqlite3.Error,)

    @contextmanager
    def transaction(self, conn):
        cur = conn.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")  # the write lock now: no upgrade deadlock between writers
        except sqlite3.Error as err:
            raise StoreError(f"cannot write {self.url}: {first_line(err)}") from None
        try:
            yield cur
        except BaseException:
            conn.rollback()
            raise
        else:
            cur.execute("COMMIT")
        finally:
            cur.close()

    def lock_run(self, conn, run_id: str) -> RunLock:
        # keyed by the database file itself: the same file through a symlink (or another relative
        # path) must find the same lock, or two writers would run one run
        folder = Path(f"{self.path.resolve()}.locks") / run_id
        folder.mkdir(parents=True, exist_ok=True)
        try:
            return RunLock(folder).acquire()
        except RunLocked as err:
            holder = str(err).split("process ", 1)[-1].split(" ", 1)[0]
            raise StoreError(f"run {run_id} in {self.url} is in use by process {holder} (a run or resume "
                             "writing to it); wait for it to end or stop it, then try again") from None
