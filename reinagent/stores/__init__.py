"""Where runs live: `open_store(url)` for a directory, sqlite:///, postgresql:// or mongodb:// URL.

See base.py for the interface and the key (run, task, trial, sample, generation, revision), and
docs/stores.md for the user's view.

    base.py             Store, RunWriter, the key rules
    file.py             a directory of ordinary run directories (format: reinagent/store.py)
    sql.py              what sqlite.py and postgres.py share; mongo.py: MongoDB
    query.py cli.py     records across runs (as rows or a DataFrame); `reinagent store ls|export|import`
    report.py           `reinagent report URL ID`: a store's runs exported to a temporary folder for the report
"""

from __future__ import annotations

from pathlib import Path

from reinagent.redact import redact
from reinagent.stores.base import SCHEMA_VERSION, RunInfo, RunWriter, Store, StoreError, new_run_id

__all__ = ["SCHEMA_VERSION", "RunInfo", "RunWriter", "Store", "StoreError", "is_directory", "new_run_id",
           "open_store"]

VALID = "a directory, sqlite:///PATH.db, postgresql://USER@HOST:PORT/DB or mongodb://HOST:PORT/DB"


def is_directory(url: str | Path) -> bool:
    """A plain path (or file://): today's run directories."""
    text = str(url)
    return "://" not in text or text.startswith("file://")


def open_store(url: str | Path, *, create: bool = True, **options) -> Store:
    """The store a URL names, connected and checked (schema version); StoreError (one line, no
    password) when it cannot be used. `create=False` (reading, resuming): a SQLite file that does
    not exist is an error rather than a new empty database."""
    text = str(url).strip()
    if not text:
        raise StoreError(f"empty store URL; valid: {VALID}")
    if is_directory(text):
        from reinagent.stores.file import FileStore

        return FileStore(text.removeprefix("file://") or ".")
    scheme = text.split("://", 1)[0].lower()
    if scheme == "sqlite":
        from reinagent.stores.sqlite import SqliteStore

        path = text.split("://", 1)[1]
        if not path.startswith("/") or path == "/":
            raise StoreError(f"bad SQLite URL {text!r}; valid: sqlite:///relative/path.db or sqlite:////abs/path.db")
        return SqliteStore(path[1:], create=create, **options)
    if scheme in ("postgresql", "postgres"):
        from reinagent.stores.postgres import PostgresStore

        return PostgresStore(text, **options)
    if scheme in ("mongodb", "mongodb+srv"):
        from reinagent.stores.mongo import MongoStore

        return MongoStore(text, **options)
    raise StoreError(f"unknown store {redact(text)!r} (scheme {scheme!r}); valid: {VALID}")
