"""PostgreSQL store through psycopg 3: `postgresql://USER[:PASSWORD]@HOST[:PORT]/DB[?...]`.

Documents are JSONB; the key columns are indexed (sql.py). Connecting gives up after
connect_timeout seconds (default 5; `?connect_timeout=N` in the URL overrides it), so an
unreachable server or wrong credentials are a one-line error, never a hang. Prefer PGPASSWORD or
~/.pgpass to a password in the URL; either way it never reaches a message, a log or a spec.

One writer per run: the writer's connection holds a session-level advisory lock on the run
(pg_try_advisory_lock of a 64-bit hash of the run id). The server drops it when that session ends,
however the writer ends (a killed process's connection closes), so no stale lock outlives it;
writes go through the same connection, so a writer that lost its session cannot write either.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from contextlib import contextmanager

from reinagent.redact import redact
from reinagent.stores.base import StoreError
from reinagent.stores.sql import SqlStore, first_line

LOCK_GRACE_S = 3.0
SCHEMA_LOCK = 0x7265696E  # "rein": serializes CREATE TABLE IF NOT EXISTS of concurrent first opens


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise StoreError("postgresql:// stores need psycopg 3: pip install 'reinagent[postgres]'") from None
    return psycopg


def advisory_key(run_id: str) -> int:
    """A signed 64-bit key per run id (pg advisory locks take a bigint)."""
    return int.from_bytes(hashlib.blake2b(f"reinagent-run:{run_id}".encode(), digest_size=8).digest(),
                          "big", signed=True)


class PostgresStore(SqlStore):
    kind = "postgresql"
    json_type = "JSONB"
    tables_query = ("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                    "AND table_name IN (?, ?, ?, ?)")
    seq_column = "seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    insert_ignore = "INSERT INTO"
    conflict_tail = " ON CONFLICT DO NOTHING"
    json_param = "CAST(%s AS jsonb)"

    def __init__(self, url: str, *, connect_timeout: float = 5.0):
        self.dsn = url
        self.url = redact(url)
        self.connect_timeout = connect_timeout
        self._pg = _psycopg()
        super().__init__()

    def connect(self):
        pg = self._pg
        args = {"autocommit": True, "application_name": f"reinagent pid {os.getpid()} on {socket.gethostname()}"[:63]}
        if "connect_timeout" not in self.dsn:
            args["connect_timeout"] = max(1, int(self.connect_timeout))
        try:
            return pg.connect(self.dsn, **args)
        except pg.Error as err:
            raise StoreError(f"cannot connect to {self.url}: {_why(err)}") from None
        except Exception as err:  # noqa: BLE001 - a malformed URL raises ProgrammingError or ValueError
            raise StoreError(f"cannot connect to {self.url}: {first_line(err)}") from None

    def errors(self):
        return (self._pg.Error,)

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    @contextmanager
    def transaction(self, conn):
        with conn.transaction():
            with conn.cursor() as cur:
                yield cur

    def encode_doc(self, text: str) -> tuple[str, str | None]:
        """JSONB cannot hold U+0000 (a program's output may): such a document keeps its exact JSON
        text in `raw` (TEXT holds the escape as six characters) and a JSONB copy with U+FFFD."""
        if "\\u0000" not in text:
            return text, None
        return json.dumps(_without_nul(json.loads(text)), ensure_ascii=False), text

    def serialize_schema(self, cur) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))

    def lock_run(self, conn, run_id: str) -> None:
        key = advisory_key(run_id)
        # A writer killed a moment ago holds the lock until its server process sees the closed
        # socket: give that a few seconds (kill, then resume at once) before calling the run busy.
        deadline = time.monotonic() + LOCK_GRACE_S
        while not (got := conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]):
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if not got:
            try:  # name the holder (its application_name) in the error; best effort
                holder = conn.execute(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND "
                    "((l.classid::bigint << 32) | l.objid::bigint) = %s LIMIT 1", (key,)).fetchone()
            except self._pg.Error:
                holder = None
            who = holder[0] if holder and holder[0] else "another session"
            raise StoreError(f"run {run_id} in {self.url} is in use by {who} (a run or resume writing to it); "
                             "wait for it to end or stop it, then try again")
        return None


def _without_nul(value):
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    return value


def _why(err: Exception) -> str:
    """libpq's reason without the host list noise: 'password authentication failed for user ...'."""
    text = str(err)
    for marker in ("FATAL:", "failed:"):
        if marker in text:
            text = text.rsplit(marker, 1)[-1]
    line = " ".join(text.split())
    return redact(line) or type(err).__name__
